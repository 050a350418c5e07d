// GPU tests of the per-layer ops against their CPU twins: RMSNorm, RoPE (tables and rotation), SwiGLU (split and
// fused), cross-entropy and embedding, in f32 and bf16 with the f32 statistics, tables and weight gradients the
// models use, at awkward sizes, on both the 16-byte vector paths and their scalar fallbacks, and their error paths.
#include <cmath>
#include <tuple>

#include "gpu_test_util.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaLayers : public CudaTest {};

// A GPU copy of a CPU f32 tensor, in `dtype`, whose data starts `shift` elements into its buffer: shift 1 puts it off
// the 16-byte boundary the vector paths need, so the op takes its scalar fallback.
Tensor to_gpu_shifted(const Tensor& cpu_f32, DType dtype, int64_t shift) {
  const Tensor buffer = Tensor::zeros({cpu_f32.numel() + shift}, dtype, gpu());
  Tensor t = buffer.slice(shift, shift + cpu_f32.numel()).view(cpu_f32.shape());
  t.copy_from(cpu_f32.to_dtype(dtype));
  return t;
}

Tensor empty_gpu_shifted(const Shape& shape, DType dtype, int64_t shift) {
  return to_gpu_shifted(Tensor::zeros(shape, DType::F32), dtype, shift);
}

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

// One RMSNorm forward + backward against the CPU: activations (x, dy) in `act`, outputs (y, dx) in `out`, the
// weight in `weight`, the activations `shift` elements off their buffers' start.
struct NormCase {
  int64_t n, d;
  DType act, weight, out;
  int64_t shift;
};

void check_rmsnorm(const NormCase& c, std::mt19937& rng) {
  SCOPED_TRACE(fmt::format("n {} d {} act {} weight {} out {} shift {}", c.n, c.d, dtype_name(c.act),
                           dtype_name(c.weight), dtype_name(c.out), c.shift));
  const Tensor x = representable(random_f32({c.n, c.d}, rng, -2.0f, 2.0f), c.act);
  const Tensor w = representable(random_f32({c.d}, rng, 0.5f, 1.5f), c.weight);
  const Tensor dy = representable(random_f32({c.n, c.d}, rng), c.act);
  const Tensor dw0 = random_f32({c.d}, rng);
  Tensor y = Tensor::empty({c.n, c.d}, DType::F32), rstd = Tensor::empty({c.n}, DType::F32);
  Tensor dx = Tensor::empty({c.n, c.d}, DType::F32), dw = dw0.clone();
  ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
  ops::rmsnorm_backward(dy, x, w, rstd, dx, dw);

  const Tensor gx = to_gpu_shifted(x, c.act, c.shift), gdy = to_gpu_shifted(dy, c.act, c.shift);
  const Tensor gw = to_gpu(w, c.weight);
  Tensor gy = empty_gpu_shifted({c.n, c.d}, c.out, c.shift), grstd = Tensor::empty({c.n}, DType::F32, gpu());
  Tensor gdx = empty_gpu_shifted({c.n, c.d}, c.out, c.shift), gdw = to_gpu(dw0);
  ops::rmsnorm_forward(gx, gw, 1e-6f, gy, grstd);
  ops::rmsnorm_backward(gdy, gx, gw, grstd, gdx, gdw);
  EXPECT_TRUE(close_to(grstd, rstd, kF32Rtol));
  EXPECT_TRUE(close_to(gy, y, rtol_for(c.out)));
  EXPECT_TRUE(close_to(gdx, dx, rtol_for(c.out)));
  EXPECT_TRUE(close_to(gdw, dw, kF32Rtol));
}

// The vector path's shapes: per-head rows (d = 128: 16 bf16 packs, two rows a warp; an odd row count leaves the last
// warp half empty; enough rows that the backward's groups visit several), rows of 1 to 16 packs a lane, a row that
// leaves most lanes idle, mixed weight dtypes; then the scalar fallbacks: a row length that is not whole packs, a
// view off the 16-byte boundary, outputs in another dtype than the inputs, and a bf16 row too long for the backward's
// registers (d = 4096: the forward keeps the vector path).
TEST_F(CudaLayers, RmsNormVectorAndFallbackPathsMatchCpu) {
  std::mt19937 rng(27);
  const DType bf = DType::BF16, f32 = DType::F32;
  const NormCase cases[] = {
      {20011, 128, bf, bf, bf, 0}, {4099, 128, f32, f32, f32, 0}, {4096, 1024, bf, bf, bf, 0},
      {67, 1024, bf, f32, bf, 0},  {67, 1024, f32, bf, f32, 0},   {9, 2048, bf, bf, bf, 0},
      {5, 4096, bf, bf, bf, 0},    {33, 136, bf, bf, bf, 0},      {70, 96, f32, f32, f32, 0},
      {33, 8, bf, bf, bf, 0},      {33, 4, f32, f32, f32, 0},     {3, 2, f32, f32, f32, 0},
      {37, 130, bf, bf, bf, 0},    {300, 128, bf, bf, bf, 1},     {300, 128, f32, f32, f32, 3},
      {45, 256, bf, bf, f32, 0},   {5, 2048, f32, f32, f32, 0},
  };
  for (const NormCase& c : cases) check_rmsnorm(c, rng);
}

// A frozen weight (dweight undefined) against the CPU's dx: the vector path (now up to 16 packs a lane, so the bf16
// rows of 4096 that the weight-gradient kernel leaves to the scalar path), its dtype mixes, and the scalar fallbacks.
TEST_F(CudaLayers, RmsNormBackwardWithoutWeightGradMatchesCpu) {
  std::mt19937 rng(29);
  const DType bf = DType::BF16, f32 = DType::F32;
  const NormCase cases[] = {{4096, 4096, bf, bf, bf, 0}, {20011, 128, bf, bf, bf, 0}, {67, 1024, bf, f32, bf, 0},
                            {9, 2048, f32, f32, f32, 0}, {33, 8, bf, bf, bf, 0},      {37, 130, bf, bf, bf, 0},
                            {300, 128, bf, bf, bf, 1},   {45, 256, bf, bf, f32, 0},   {5, 8192, bf, bf, bf, 0}};
  for (const NormCase& c : cases) {
    SCOPED_TRACE(fmt::format("n {} d {} act {} weight {} out {} shift {}", c.n, c.d, dtype_name(c.act),
                             dtype_name(c.weight), dtype_name(c.out), c.shift));
    const Tensor x = representable(random_f32({c.n, c.d}, rng, -2.0f, 2.0f), c.act);
    const Tensor w = representable(random_f32({c.d}, rng, 0.5f, 1.5f), c.weight);
    const Tensor dy = representable(random_f32({c.n, c.d}, rng), c.act);
    Tensor y = Tensor::empty({c.n, c.d}, DType::F32), rstd = Tensor::empty({c.n}, DType::F32);
    Tensor dx = Tensor::empty({c.n, c.d}, DType::F32), no_weight_grad;
    ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    ops::rmsnorm_backward(dy, x, w, rstd, dx, no_weight_grad);

    const Tensor gx = to_gpu_shifted(x, c.act, c.shift), gdy = to_gpu_shifted(dy, c.act, c.shift);
    const Tensor gw = to_gpu(w, c.weight);
    Tensor gy = empty_gpu_shifted({c.n, c.d}, c.out, c.shift), grstd = Tensor::empty({c.n}, DType::F32, gpu());
    Tensor gdx = empty_gpu_shifted({c.n, c.d}, c.out, c.shift), g_no_weight_grad;
    ops::rmsnorm_forward(gx, gw, 1e-6f, gy, grstd);
    ops::rmsnorm_backward(gdy, gx, gw, grstd, gdx, g_no_weight_grad);
    EXPECT_TRUE(close_to(gdx, dx, rtol_for(c.out)));
  }
}

// A residual added in the backward's pass, against the CPU's dx + residual: the vector path with and without a weight
// gradient (bf16 rows of 4096 and per-head rows of 128) and the scalar path (rows of 130).
TEST_F(CudaLayers, RmsNormBackwardAddsTheResidual) {
  std::mt19937 rng(30);
  const DType bf = DType::BF16, f32 = DType::F32;
  struct Case {
    int64_t n, d;
    DType act;
    bool weight_grad;
  };
  for (const Case& c : {Case{4096, 4096, bf, false}, Case{20011, 128, bf, true}, Case{37, 130, bf, false},
                        Case{9, 2048, f32, true}, Case{33, 131, f32, false}}) {
    SCOPED_TRACE(fmt::format("n {} d {} {} weight grad {}", c.n, c.d, dtype_name(c.act), c.weight_grad));
    const Tensor x = representable(random_f32({c.n, c.d}, rng, -2.0f, 2.0f), c.act);
    const Tensor w = representable(random_f32({c.d}, rng, 0.5f, 1.5f), bf);
    const Tensor dy = representable(random_f32({c.n, c.d}, rng), c.act);
    const Tensor residual = representable(random_f32({c.n, c.d}, rng), c.act);
    Tensor y = Tensor::empty({c.n, c.d}, f32), rstd = Tensor::empty({c.n}, f32);
    Tensor want = Tensor::empty({c.n, c.d}, f32), dw_want = c.weight_grad ? Tensor::zeros({c.d}, f32) : Tensor();
    ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    ops::rmsnorm_backward(dy, x, w, rstd, want, dw_want);
    ops::add_(want, residual);

    const Tensor gx = to_gpu(x, c.act), gdy = to_gpu(dy, c.act), gw = to_gpu(w, bf), gres = to_gpu(residual, c.act);
    Tensor gy = Tensor::empty({c.n, c.d}, c.act, gpu()), grstd = Tensor::empty({c.n}, f32, gpu());
    Tensor gdx = Tensor::empty({c.n, c.d}, c.act, gpu());
    Tensor gdw = c.weight_grad ? Tensor::zeros({c.d}, f32, gpu()) : Tensor();
    ops::rmsnorm_forward(gx, gw, 1e-6f, gy, grstd);
    ops::rmsnorm_backward(gdy, gx, gw, grstd, gdx, gdw, gres);
    EXPECT_TRUE(close_to(gdx, want, rtol_for(c.act)));
    if (c.weight_grad) {
      EXPECT_TRUE(close_to(gdw, dw_want, kF32Rtol));
    }
  }
}

TEST_F(CudaLayers, RmsNormWeightGradIsDeterministicOnTheVectorPath) {
  std::mt19937 rng(28);
  for (const auto& [n, d] : {std::pair<int64_t, int64_t>{20011, 128}, {4096, 1024}, {1000, 2048}}) {
    SCOPED_TRACE(fmt::format("n {} d {}", n, d));
    const Tensor x = to_gpu(random_f32({n, d}, rng), DType::BF16), dy = to_gpu(random_f32({n, d}, rng), DType::BF16);
    const Tensor w = to_gpu(random_f32({d}, rng), DType::BF16);
    Tensor y = Tensor::empty({n, d}, DType::BF16, gpu()), rstd = Tensor::empty({n}, DType::F32, gpu());
    ops::rmsnorm_forward(x, w, 1e-6f, y, rstd);
    Tensor dx1 = Tensor::empty({n, d}, DType::BF16, gpu()), dx2 = dx1.clone();
    Tensor dw1 = Tensor::zeros({d}, DType::F32, gpu()), dw2 = Tensor::zeros({d}, DType::F32, gpu());
    ops::rmsnorm_backward(dy, x, w, rstd, dx1, dw1);
    ops::rmsnorm_backward(dy, x, w, rstd, dx2, dw2);
    EXPECT_TRUE(bitwise_equal(dw1, dw2));
    EXPECT_TRUE(bitwise_equal(dx1, dx2));
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

// head_dim 128 (Qwen3) and 64 take the vector path in both dtypes, 72 only in f32 (half = 36: 9 f32 packs, 4.5 bf16
// ones), 6 in neither; shift 1 puts x off the 16-byte boundary.
TEST_F(CudaLayers, RopeApplyVectorAndFallbackPathsMatchCpu) {
  std::mt19937 rng(29);
  const int64_t s = 37;
  std::vector<int64_t> pos(s);
  for (int64_t i = 0; i < s; ++i) pos[static_cast<size_t>(i)] = 7 * i + 3;
  for (const auto& [h, d, shift] : {std::tuple<int64_t, int64_t, int64_t>{16, 128, 0}, {8, 128, 1}, {3, 72, 0},
                                    {2, 6, 0}, {5, 64, 0}}) {
    Tensor cos = Tensor::empty({s, d}, DType::F32), sin = Tensor::empty({s, d}, DType::F32);
    ops::rope_tables(Tensor::from_vector(pos, {s}), d, 1000000.0, {}, cos, sin);
    const Tensor gcos = cos.to(gpu()), gsin = sin.to(gpu());
    for (DType dtype : float_dtypes())
      for (bool inverse : {false, true}) {
        SCOPED_TRACE(fmt::format("h {} d {} shift {} {} inverse {}", h, d, shift, dtype_name(dtype), inverse));
        const Tensor x = representable(random_f32({s, h, d}, rng), dtype);
        Tensor want = x.clone();
        ops::rope_apply(want, cos, sin, inverse);
        Tensor got = to_gpu_shifted(x, dtype, shift);
        ops::rope_apply(got, gcos, gsin, inverse);
        EXPECT_TRUE(close_to(got, want, rtol_for(dtype)));
      }
  }
}

// ---------------------------------------------------------------- SwiGLU

// Split and fused SwiGLU, each against the CPU, with the inputs and outputs `shift` elements off their buffers' start.
void check_swiglu(int64_t n, int64_t i, DType dtype, int64_t shift, std::mt19937& rng) {
  SCOPED_TRACE(fmt::format("n {} i {} {} shift {}", n, i, dtype_name(dtype), shift));
  const double rtol = rtol_for(dtype);
  const Tensor gate = representable(random_f32({n, i}, rng, -6.0f, 6.0f), dtype);
  const Tensor up = representable(random_f32({n, i}, rng), dtype);
  const Tensor dout = representable(random_f32({n, i}, rng), dtype);
  Tensor out = Tensor::empty({n, i}, DType::F32), dgate = out.clone(), dup = out.clone();
  ops::swiglu_forward(gate, up, out);
  ops::swiglu_backward(dout, gate, up, dgate, dup);
  const Tensor ggate = to_gpu_shifted(gate, dtype, shift), gup = to_gpu_shifted(up, dtype, shift);
  const Tensor gdout = to_gpu_shifted(dout, dtype, shift);
  Tensor gout = empty_gpu_shifted({n, i}, dtype, shift), gdgate = empty_gpu_shifted({n, i}, dtype, shift);
  Tensor gdup = empty_gpu_shifted({n, i}, dtype, shift);
  ops::swiglu_forward(ggate, gup, gout);
  ops::swiglu_backward(gdout, ggate, gup, gdgate, gdup);
  EXPECT_TRUE(close_to(gout, out, rtol));
  EXPECT_TRUE(close_to(gdgate, dgate, rtol));
  EXPECT_TRUE(close_to(gdup, dup, rtol));

  Tensor gate_up = Tensor::empty({n, 2 * i}, DType::F32);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < i; ++c) {
      gate_up.data<float>()[r * 2 * i + c] = gate.data<float>()[r * i + c];
      gate_up.data<float>()[r * 2 * i + i + c] = up.data<float>()[r * i + c];
    }
  Tensor fout = Tensor::empty({n, i}, DType::F32), fgrad = Tensor::empty({n, 2 * i}, DType::F32);
  ops::swiglu_fused_forward(gate_up, fout);
  ops::swiglu_fused_backward(dout, gate_up, fgrad);
  const Tensor ggate_up = to_gpu_shifted(gate_up, dtype, shift);
  Tensor gfout = empty_gpu_shifted({n, i}, dtype, shift), gfgrad = empty_gpu_shifted({n, 2 * i}, dtype, shift);
  ops::swiglu_fused_forward(ggate_up, gfout);
  ops::swiglu_fused_backward(gdout, ggate_up, gfgrad);
  EXPECT_TRUE(close_to(gfout, fout, rtol));
  EXPECT_TRUE(close_to(gfgrad, fgrad, rtol));
}

// I = 96 and 3072 (Qwen3-0.6B) are whole packs in both dtypes (vector path), I = 100 only in f32 (12.5 bf16 packs:
// fallback), I = 77 in neither; shift 1 puts every tensor off the 16-byte boundary.
TEST_F(CudaLayers, SwigluVectorAndFallbackPathsMatchCpu) {
  std::mt19937 rng(30);
  for (DType dtype : float_dtypes()) {
    check_swiglu(37, 96, dtype, 0, rng);
    check_swiglu(64, 3072, dtype, 0, rng);
    check_swiglu(13, 100, dtype, 0, rng);
    check_swiglu(13, 77, dtype, 0, rng);
    check_swiglu(21, 96, dtype, 1, rng);
    check_swiglu(1, 8, dtype, 0, rng);
    check_swiglu(19, 77, dtype, 0, rng);
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
  const DebugChecksOn debug_checks;
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
  const DebugChecksOn debug_checks;
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
