// GPU tests of the per-layer ops against their CPU twins: RMSNorm, RoPE (tables and rotation), SwiGLU (split and
// fused), cross-entropy and embedding, in f32 and bf16 with the f32 statistics, tables and weight gradients the
// models use, at awkward sizes, and their error paths.
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaLayers : public CudaTest {};

// ---------------------------------------------------------------- RMSNorm

TEST_F(CudaLayers, RmsNormForwardAndBackwardMatchCpu) {
  std::mt19937 rng(21);
  for (DType dtype : float_dtypes())
    for (const auto& [n, d] : {std::pair<int64_t, int64_t>{37, 129}, {5, 1024}, {300, 128}, {1, 7}}) {
      SCOPED_TRACE(fmt::format("{} n {} d {}", dtype_name(dtype), n, d));
      const Tensor x = representable(random_f32({n, d}, rng, -2.0f, 2.0f), dtype);
      const Tensor w = representable(random_f32({d}, rng, 0.5f, 1.5f), dtype);
      const Tensor dy = representable(random_f32({n, d}, rng), dtype);
      const Tensor dw0 = random_f32({d}, rng);
      Tensor y = Tensor::empty({n, d}, DType::F32), rstd = Tensor::empty({n}, DType::F32);
      Tensor dx = Tensor::empty({n, d}, DType::F32), dw = dw0.clone();
      ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
      ops::rmsnorm_backward(dy, x, w, rstd, dx, dw);

      const Tensor gx = to_gpu(x, dtype), gw = to_gpu(w, dtype), gdy = to_gpu(dy, dtype);
      Tensor gy = Tensor::empty({n, d}, dtype, gpu()), grstd = Tensor::empty({n}, DType::F32, gpu());
      Tensor gdx = Tensor::empty({n, d}, dtype, gpu()), gdw = to_gpu(dw0);  // weight gradient stays f32
      ops::rmsnorm_forward(gx, gw, 1e-6f, gy, grstd);
      ops::rmsnorm_backward(gdy, gx, gw, grstd, gdx, gdw);
      EXPECT_TRUE(close_to(grstd, rstd, kF32Rtol));
      EXPECT_TRUE(close_to(gy, y, rtol_for(dtype)));
      EXPECT_TRUE(close_to(gdx, dx, rtol_for(dtype)));
      EXPECT_TRUE(close_to(gdw, dw, kF32Rtol));
    }
}

TEST_F(CudaLayers, RmsNormWeightGradIsDeterministic) {
  std::mt19937 rng(22);
  const int64_t n = 4099, d = 96;
  const Tensor x = to_gpu(random_f32({n, d}, rng), DType::BF16), dy = to_gpu(random_f32({n, d}, rng), DType::BF16);
  const Tensor w = to_gpu(random_f32({d}, rng));
  Tensor y = Tensor::empty({n, d}, DType::BF16, gpu()), rstd = Tensor::empty({n}, DType::F32, gpu());
  ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
  Tensor dx = Tensor::empty({n, d}, DType::BF16, gpu());
  Tensor dw1 = Tensor::zeros({d}, DType::F32, gpu()), dw2 = Tensor::zeros({d}, DType::F32, gpu());
  ops::rmsnorm_backward(dy, x, w, rstd, dx, dw1);
  ops::rmsnorm_backward(dy, x, w, rstd, dx, dw2);
  EXPECT_TRUE(bitwise_equal(dw1, dw2));
}

// ---------------------------------------------------------------- RoPE

TEST_F(CudaLayers, RopeTablesMatchCpuForAllPositionKinds) {
  const int64_t s = 50, d = 128;
  std::vector<int64_t> pos(s);
  for (int64_t i = 0; i < s; ++i) pos[static_cast<size_t>(i)] = i * 2039;  // up to ~100k: large angles
  std::vector<float> pos_f(pos.begin(), pos.end());
  std::vector<int64_t> pos3(3 * s);
  for (int64_t i = 0; i < 3 * s; ++i) pos3[static_cast<size_t>(i)] = (i * 7919) % 4096;
  struct Case {
    Tensor positions;
    std::vector<int64_t> section;
    const char* name;
  };
  const Case cases[] = {{Tensor::from_vector(pos, {s}), {}, "1-D i64"},
                        {Tensor::from_vector(pos_f, {s}), {}, "1-D f32"},
                        {Tensor::from_vector(pos3, {3, s}), {24, 20, 20}, "M-RoPE"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor cos = Tensor::empty({s, d}, DType::F32), sin = Tensor::empty({s, d}, DType::F32);
    ops::rope_tables(c.positions, d, 1000000.0, c.section, cos, sin);
    Tensor gcos = Tensor::empty({s, d}, DType::F32, gpu()), gsin = Tensor::empty({s, d}, DType::F32, gpu());
    ops::rope_tables(c.positions.to(gpu()), d, 1000000.0, c.section, gcos, gsin);
    // Same fp32 angles, cos/sin in double rounded once: agreement to an ulp or two.
    EXPECT_TRUE(close_to(gcos, cos, 1e-6));
    EXPECT_TRUE(close_to(gsin, sin, 1e-6));
  }
  Tensor gcos = Tensor::empty({s, d}, DType::F32, gpu()), gsin = Tensor::empty({s, d}, DType::F32, gpu());
  EXPECT_THROW(ops::rope_tables(Tensor::from_vector(pos3, {3, s}).to(gpu()), d, 1e6, {}, gcos, gsin), Error);
  EXPECT_THROW(ops::rope_tables(Tensor::from_vector(pos, {s}).to(gpu()), 127, 1e6, {}, gcos, gsin), Error);
}

TEST_F(CudaLayers, RopeApplyAndInverseMatchCpu) {
  std::mt19937 rng(23);
  const int64_t s = 33, h = 3, d = 64;
  std::vector<int64_t> pos(s);
  for (int64_t i = 0; i < s; ++i) pos[static_cast<size_t>(i)] = 5 * i;
  Tensor cos = Tensor::empty({s, d}, DType::F32), sin = Tensor::empty({s, d}, DType::F32);
  ops::rope_tables(Tensor::from_vector(pos, {s}), d, 10000.0, {}, cos, sin);
  for (DType dtype : float_dtypes())
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(fmt::format("{} inverse {}", dtype_name(dtype), inverse));
      const Tensor x = representable(random_f32({s, h, d}, rng), dtype);
      Tensor want = x.clone();
      ops::rope_apply(want, cos, sin, inverse);
      Tensor got = to_gpu(x, dtype);
      ops::rope_apply(got, cos.to(gpu()), sin.to(gpu()), inverse);
      EXPECT_TRUE(close_to(got, want, rtol_for(dtype)));
    }
  Tensor x = Tensor::zeros({s, h, d}, DType::BF16, gpu());
  EXPECT_THROW(ops::rope_apply(x, cos.to(gpu()).to_dtype(DType::F32), sin, false), Error);  // sin on the CPU
}

// ---------------------------------------------------------------- SwiGLU

TEST_F(CudaLayers, SwigluSplitAndFusedMatchCpu) {
  std::mt19937 rng(24);
  const int64_t n = 19, i = 77;
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    const double rtol = rtol_for(dtype);
    const Tensor gate = representable(random_f32({n, i}, rng, -6.0f, 6.0f), dtype);
    const Tensor up = representable(random_f32({n, i}, rng), dtype);
    const Tensor dout = representable(random_f32({n, i}, rng), dtype);
    Tensor out = Tensor::empty({n, i}, DType::F32), dgate = out.clone(), dup = out.clone();
    ops::swiglu_forward(gate, up, out);
    ops::swiglu_backward(dout, gate, up, dgate, dup);
    Tensor gout = Tensor::empty({n, i}, dtype, gpu()), gdgate = gout.clone(), gdup = gout.clone();
    const Tensor ggate = to_gpu(gate, dtype), gup = to_gpu(up, dtype), gdout = to_gpu(dout, dtype);
    ops::swiglu_forward(ggate, gup, gout);
    ops::swiglu_backward(gdout, ggate, gup, gdgate, gdup);
    EXPECT_TRUE(close_to(gout, out, rtol));
    EXPECT_TRUE(close_to(gdgate, dgate, rtol));
    EXPECT_TRUE(close_to(gdup, dup, rtol));

    // Fused layout [N, 2I]: gate in the first half of each row.
    Tensor gate_up = Tensor::empty({n, 2 * i}, DType::F32);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < i; ++c) {
        gate_up.data<float>()[r * 2 * i + c] = gate.data<float>()[r * i + c];
        gate_up.data<float>()[r * 2 * i + i + c] = up.data<float>()[r * i + c];
      }
    Tensor fout = Tensor::empty({n, i}, DType::F32), fgrad = Tensor::empty({n, 2 * i}, DType::F32);
    ops::swiglu_fused_forward(gate_up, fout);
    ops::swiglu_fused_backward(dout, gate_up, fgrad);
    Tensor gfout = Tensor::empty({n, i}, dtype, gpu()), gfgrad = Tensor::empty({n, 2 * i}, dtype, gpu());
    const Tensor ggate_up = to_gpu(gate_up, dtype);
    ops::swiglu_fused_forward(ggate_up, gfout);
    ops::swiglu_fused_backward(gdout, ggate_up, gfgrad);
    EXPECT_TRUE(close_to(gfout, fout, rtol));
    EXPECT_TRUE(close_to(gfgrad, fgrad, rtol));
  }
  Tensor odd = Tensor::zeros({2, 5}, DType::F32, gpu()), half = Tensor::zeros({2, 2}, DType::F32, gpu());
  EXPECT_THROW(ops::swiglu_fused_forward(odd, half), Error);
}

// ---------------------------------------------------------------- cross-entropy

void check_cross_entropy(int64_t n, int64_t v, DType dtype, bool in_place, bool with_grad, std::mt19937& rng,
                         DType grad_dtype = DType::Bool) {
  if (grad_dtype == DType::Bool) grad_dtype = dtype;
  SCOPED_TRACE(fmt::format("n {} v {} {} in_place {} grad {} {}", n, v, dtype_name(dtype), in_place, with_grad,
                           dtype_name(grad_dtype)));
  const int64_t ignore = -100;
  const Tensor logits = representable(random_f32({n, v}, rng, -8.0f, 8.0f), dtype);
  std::vector<int64_t> y(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> pick(0, v - 1);
  for (int64_t r = 0; r < n; ++r) y[static_cast<size_t>(r)] = r % 5 == 3 ? ignore : pick(rng);
  if (n > 1) y[1] = v - 1;
  const Tensor labels = Tensor::from_vector(y, {n});
  const float scale = 1.0f / static_cast<float>(n);
  Tensor losses = Tensor::empty({n}, DType::F32), grad = Tensor::empty({n, v}, DType::F32);
  ops::cross_entropy(logits, labels, ignore, scale, losses, grad);

  Tensor glogits = to_gpu(logits, dtype);
  Tensor glosses = Tensor::full<float>({n}, NAN).to(gpu());
  Tensor ggrad;
  if (with_grad) ggrad = in_place ? glogits : Tensor::empty({n, v}, grad_dtype, gpu());
  ops::cross_entropy(glogits, labels.to(gpu()), ignore, scale, glosses, ggrad);
  // Losses are fp32 on both sides (the row sums in fp32 on the GPU, double on the CPU).
  EXPECT_TRUE(close_to(glosses, losses, kF32Rtol));
  if (with_grad) {
    EXPECT_TRUE(close_to(ggrad, grad, rtol_for(grad_dtype)));
  }
}

TEST_F(CudaLayers, CrossEntropyMatchesCpu) {
  std::mt19937 rng(25);
  for (DType dtype : float_dtypes()) {
    check_cross_entropy(37, 1000, dtype, false, true, rng);
    check_cross_entropy(37, 1000, dtype, true, true, rng);
    check_cross_entropy(6, 1, dtype, false, true, rng);
    check_cross_entropy(4, 151936, dtype, true, true, rng);  // Qwen3's vocabulary
    check_cross_entropy(9, 8193, dtype, false, false, rng);
    check_cross_entropy(9, 8193, dtype, false, true, rng);
  }
  // The gradient in another dtype than the logits (vectorised and element-wise paths).
  check_cross_entropy(7, 4096, DType::BF16, false, true, rng, DType::F32);
  check_cross_entropy(7, 4096, DType::F32, false, true, rng, DType::BF16);
  check_cross_entropy(7, 4097, DType::BF16, false, true, rng, DType::F32);
}

TEST_F(CudaLayers, CrossEntropyRejectsLabelsOutsideTheVocabulary) {
  const Tensor logits = Tensor::zeros({3, 10}, DType::BF16, gpu());
  Tensor losses = Tensor::empty({3}, DType::F32, gpu()), grad = Tensor::empty({3, 10}, DType::BF16, gpu());
  for (int64_t bad : {int64_t{10}, int64_t{-1}, int64_t{1} << 40}) {
    const Tensor labels = Tensor::from_vector<int64_t>({0, bad, 3}, {3}).to(gpu());
    try {
      ops::cross_entropy(logits, labels, -100, 1.0f, losses, grad);
      ADD_FAILURE() << "label " << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("labels[1] = {}", bad)), std::string::npos) << e.what();
    }
  }
  const Tensor ok = Tensor::from_vector<int64_t>({0, -100, 9}, {3}).to(gpu());
  EXPECT_NO_THROW(ops::cross_entropy(logits, ok, -100, 1.0f, losses, grad));
  EXPECT_THROW(ops::cross_entropy(logits, ok, -100, 1.0f, losses, losses), Error);  // dlogits of the wrong shape
}

// ---------------------------------------------------------------- embedding

TEST_F(CudaLayers, EmbeddingForwardAndDeterministicBackwardMatchCpu) {
  std::mt19937 rng(26);
  const int64_t vocab = 1000, hidden = 72, n = 517;
  std::vector<int64_t> id(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> pick(0, 30);  // many repeats
  for (auto& v : id) v = pick(rng) * 31;
  id[0] = vocab - 1;
  const Tensor ids = Tensor::from_vector(id, {n});
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor table = representable(random_f32({vocab, hidden}, rng), dtype);
    const Tensor dout = representable(random_f32({n, hidden}, rng), dtype);
    const Tensor dtable0 = random_f32({vocab, hidden}, rng);
    Tensor out = Tensor::empty({n, hidden}, DType::F32), dtable = dtable0.clone();
    ops::embedding_forward(ids, table, out);
    ops::embedding_backward(ids, dout, dtable);

    const Tensor gids = ids.to(gpu());
    Tensor gout = Tensor::empty({n, hidden}, dtype, gpu());
    ops::embedding_forward(gids, to_gpu(table, dtype), gout);
    EXPECT_TRUE(bitwise_equal(to_host(gout), out));  // a gather is exact
    Tensor g1 = to_gpu(dtable0), g2 = to_gpu(dtable0);  // the table gradient is f32
    ops::embedding_backward(gids, to_gpu(dout, dtype), g1);
    ops::embedding_backward(gids, to_gpu(dout, dtype), g2);
    EXPECT_TRUE(close_to(g1, dtable, kF32Rtol));
    EXPECT_TRUE(bitwise_equal(g1, g2));
  }
}

TEST_F(CudaLayers, EmbeddingRejectsIdsOutsideTheTable) {
  const Tensor table = Tensor::zeros({10, 4}, DType::BF16, gpu());
  Tensor out = Tensor::empty({3, 4}, DType::BF16, gpu());
  Tensor dtable = Tensor::zeros({10, 4}, DType::F32, gpu());
  for (int64_t bad : {int64_t{10}, int64_t{-3}}) {
    const Tensor ids = Tensor::from_vector<int64_t>({1, 2, bad}, {3}).to(gpu());
    EXPECT_THROW(ops::embedding_forward(ids, table, out), InputError);
    EXPECT_THROW(ops::embedding_backward(ids, out, dtable), InputError);
  }
  const Tensor ids_i32 = Tensor::from_vector<int32_t>({1, 2, 3}, {3}).to(gpu());
  EXPECT_THROW(ops::embedding_forward(ids_i32, table, out), Error);
}

}  // namespace
