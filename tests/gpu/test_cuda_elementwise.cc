// GPU tests of the elementwise ops, reductions, casts and AdamW against their CPU twins, at sizes that are not
// multiples of the vector width and on slices whose data is not 16-byte aligned.
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaElementwise : public CudaTest {};

const int64_t kSizes[] = {1, 7, 4099, 1000003};

TEST_F(CudaElementwise, SumAndSumSquaresMatchCpuInDouble) {
  std::mt19937 rng(41);
  for (DType dtype : float_dtypes())
    for (int64_t n : kSizes) {
      SCOPED_TRACE(fmt::format("{} n {}", dtype_name(dtype), n));
      const Tensor x = representable(random_f32({n + 1}, rng, -1.0f, 3.0f), dtype);
      const Tensor gx = to_gpu(x, dtype);
      for (int64_t first : {0, 1}) {  // slice(1, ...) breaks 16-byte alignment
        const Tensor cx = x.slice(first, first + n), gs = gx.slice(first, first + n);
        // Both accumulate in double; only the order differs.
        EXPECT_NEAR(ops::sum(gs), ops::sum(cx), 1e-12 * static_cast<double>(n) * 3.0);
        EXPECT_NEAR(ops::sum_squares(gs), ops::sum_squares(cx), 1e-12 * static_cast<double>(n) * 9.0);
      }
      // Deterministic: the same double twice.
      EXPECT_EQ(ops::sum_squares(gx), ops::sum_squares(gx));
    }
  EXPECT_EQ(ops::sum(Tensor::empty({0}, DType::F32, gpu())), 0.0);
}

TEST_F(CudaElementwise, AddScaleFillMatchCpu) {
  std::mt19937 rng(42);
  for (DType dtype : float_dtypes())
    for (int64_t n : kSizes) {
      SCOPED_TRACE(fmt::format("{} n {}", dtype_name(dtype), n));
      const Tensor a = representable(random_f32({n + 1}, rng), dtype);
      const Tensor b = representable(random_f32({n + 1}, rng), dtype);
      for (int64_t first : {0, 1}) {
        Tensor want = a.slice(first, first + n).clone();
        ops::add_(want, b.slice(first, first + n), -0.5f);
        ops::scale_(want, 3.0f);
        Tensor ga = to_gpu(a, dtype), gb = to_gpu(b, dtype);
        Tensor got = ga.slice(first, first + n);
        ops::add_(got, gb.slice(first, first + n), -0.5f);
        ops::scale_(got, 3.0f);
        EXPECT_TRUE(close_to(got, want, rtol_for(dtype)));
        // Elements outside the slice are untouched.
        if (first == 1) {
          EXPECT_EQ(to_host(ga.slice(0, 1)).data<float>()[0], a.data<float>()[0]);
        }
      }
      Tensor filled = Tensor::empty({n}, dtype, gpu());
      ops::fill_(filled, 0.375f);
      EXPECT_TRUE(close_to(filled, Tensor::full<float>({n}, 0.375f), 0.0));
    }
  Tensor f32 = Tensor::zeros({4}, DType::F32, gpu());
  EXPECT_THROW(ops::add_(f32, Tensor::zeros({5}, DType::F32, gpu()), 1.0f), Error);
  EXPECT_THROW(ops::add_(f32, Tensor::zeros({4}, DType::I32, gpu()), 1.0f), Error);
}

TEST_F(CudaElementwise, AddMixesDtypes) {
  std::mt19937 rng(45);
  for (const auto& [dst_type, src_type] : {std::pair{DType::F32, DType::BF16}, std::pair{DType::BF16, DType::F32}})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(fmt::format("{} += {} n {}", dtype_name(dst_type), dtype_name(src_type), n));
      const Tensor dst = representable(random_f32({n}, rng), dst_type);
      const Tensor src = representable(random_f32({n}, rng), src_type);
      Tensor want = dst.clone();
      ops::add_(want, src, 0.25f);
      Tensor got = to_gpu(dst, dst_type);
      ops::add_(got, to_gpu(src, src_type), 0.25f);
      EXPECT_TRUE(close_to(got, want, rtol_for(dst_type)));  // an f32 accumulator keeps f32 precision
    }
}

TEST_F(CudaElementwise, CastsRoundLikeTheCpu) {
  std::mt19937 rng(43);
  const DType types[] = {DType::F32, DType::BF16, DType::F16};
  for (int64_t n : kSizes) {
    Tensor x = random_f32({n + 1}, rng, -70000.0f, 70000.0f);  // beyond f16's range: inf on both sides
    for (int64_t i = 0; i < std::min<int64_t>(n, 5); ++i) x.data<float>()[i] = std::ldexp(1.0f, -20 - i);  // tiny
    for (DType from : types)
      for (DType to : types) {
        SCOPED_TRACE(fmt::format("n {} {} -> {}", n, dtype_name(from), dtype_name(to)));
        const Tensor src = x.to_dtype(from);
        for (int64_t first : {0, 1}) {
          const Tensor want = src.slice(first, first + n).to_dtype(to);
          Tensor got = Tensor::empty({n}, to, gpu());
          ops::cast(src.to(gpu()).slice(first, first + n), got);
          EXPECT_TRUE(bitwise_equal(got, want));  // round to nearest even everywhere: exact
        }
      }
  }
  Tensor i32 = Tensor::zeros({4}, DType::I32, gpu());
  EXPECT_THROW(ops::cast(Tensor::zeros({4}, DType::F32, gpu()), i32), Error);
}

// Activation-sized maps (3M elements and an odd tail): each thread of the vector loop takes two vectors (the second
// missing for some when the vector count is odd), then the tail goes one by one; shift 1 takes the element-wise path.
TEST_F(CudaElementwise, LargeCastsAndAddsMatchCpu) {
  std::mt19937 rng(48);
  const int64_t n = 3 * 1024 * 1024 + 5;
  const Tensor x = random_f32({n + 1}, rng, -3.0f, 3.0f);
  const Tensor y = random_f32({n + 1}, rng, -3.0f, 3.0f);
  for (const auto& [from, to] : {std::pair{DType::F32, DType::BF16}, std::pair{DType::BF16, DType::F32}})
    for (int64_t shift : {0, 1}) {
      SCOPED_TRACE(fmt::format("{} -> {} shift {}", dtype_name(from), dtype_name(to), shift));
      const Tensor src = x.to_dtype(from).slice(shift, shift + n);
      Tensor got = Tensor::empty({n}, to, gpu());
      ops::cast(x.to_dtype(from).to(gpu()).slice(shift, shift + n), got);
      EXPECT_TRUE(bitwise_equal(got, src.to_dtype(to)));

      // dst (in `to`) += 0.75 * src (in `from`), both `shift` elements into their buffers.
      const Tensor dst = representable(y, to).slice(shift, shift + n);
      Tensor want = dst.clone();
      ops::add_(want, src.to_dtype(DType::F32), 0.75f);
      Tensor gdst_buffer = y.to_dtype(to).to(gpu());
      Tensor gdst = gdst_buffer.slice(shift, shift + n);
      ops::add_(gdst, x.to_dtype(from).to(gpu()).slice(shift, shift + n), 0.75f);
      EXPECT_TRUE(close_to(gdst, want, rtol_for(to)));
    }
}

TEST_F(CudaElementwise, AdamWMatchesCpuBitForBit) {
  std::mt19937 rng(44);
  struct Hyper {
    float lr, beta1, beta2, eps, wd;
  };
  // beta1 = 0.3 takes torch's other lerp branch (weight 0.7 >= 0.5).
  for (const Hyper& hp : {Hyper{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f}, Hyper{3e-2f, 0.3f, 0.95f, 1e-6f, 0.0f}})
    for (int64_t n : {int64_t{1}, int64_t{4099}}) {
      SCOPED_TRACE(fmt::format("n {} beta1 {}", n, hp.beta1));
      Tensor p = random_f32({n}, rng), m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
      Tensor gp = p.to(gpu()), gm = m.to(gpu()), gv = v.to(gpu());
      for (int64_t step = 1; step <= 5; ++step) {
        const Tensor g = random_f32({n}, rng, -0.1f, 0.1f);
        ops::adamw_step(p, g, m, v, hp.lr, hp.beta1, hp.beta2, hp.eps, hp.wd, step);
        ops::adamw_step(gp, g.to(gpu()), gm, gv, hp.lr, hp.beta1, hp.beta2, hp.eps, hp.wd, step);
      }
      // Same operations, each rounded on its own, on both sides.
      EXPECT_TRUE(bitwise_equal(gp, p));
      EXPECT_TRUE(bitwise_equal(gm, m));
      EXPECT_TRUE(bitwise_equal(gv, v));
    }
  Tensor p = Tensor::zeros({4}, DType::F32, gpu());
  Tensor g = Tensor::zeros({4}, DType::F32, gpu()), m = g.clone(), v = g.clone();
  EXPECT_THROW(ops::adamw_step(p, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), Error);  // step starts at 1
  Tensor bf16 = Tensor::zeros({4}, DType::BF16, gpu());
  EXPECT_THROW(ops::adamw_step(bf16, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1), Error);  // states are f32
}

// The multi-tensor ops walk chunks of kMultiTensorChunk (16384) elements: sizes below, at and across a chunk boundary,
// several chunks, an empty tensor, and a slice whose data is not 16-byte aligned.
std::vector<Tensor> multi_tensor_inputs(std::mt19937& rng, float lo, float hi) {
  std::vector<Tensor> xs;
  for (int64_t n : {int64_t{1}, int64_t{0}, int64_t{16384}, int64_t{16385}, int64_t{200003}, int64_t{4099}})
    xs.push_back(random_f32({n}, rng, lo, hi));
  xs.push_back(random_f32({1001}, rng, lo, hi).slice(1, 1001));
  return xs;
}

TEST_F(CudaElementwise, AdamWMultiMatchesCpuSingleStepsBitForBit) {
  std::mt19937 rng(45);
  for (const float grad_scale : {1.0f, 0.3f}) {
    SCOPED_TRACE(fmt::format("grad_scale {}", grad_scale));
    std::vector<Tensor> p = multi_tensor_inputs(rng, -1.0f, 1.0f), gp, m, v, gm, gv;
    for (Tensor& t : p) {
      t = t.clone();
      gp.push_back(t.to(gpu()));
      m.push_back(Tensor::zeros(t.shape(), DType::F32));
      v.push_back(Tensor::zeros(t.shape(), DType::F32));
      gm.push_back(m.back().to(gpu()));
      gv.push_back(v.back().to(gpu()));
    }
    for (int64_t step = 1; step <= 3; ++step) {
      std::vector<Tensor> g = multi_tensor_inputs(rng, -0.1f, 0.1f), gg;
      std::vector<ops::AdamWTensors> slots;
      for (size_t i = 0; i < p.size(); ++i) {
        const double wd = i % 2 == 0 ? 0.01 : 0.0;
        Tensor scaled = g[i].clone();
        ops::scale_(scaled, grad_scale);
        ops::adamw_step(p[i], scaled, m[i], v[i], 1e-3, 0.9, 0.999, 1e-8, wd, step);
        gg.push_back(g[i].to(gpu()));
      }
      for (size_t i = 0; i < p.size(); ++i) slots.push_back({&gp[i], &gg[i], &gm[i], &gv[i], i % 2 == 0 ? 0.01 : 0.0});
      ops::adamw_step_multi(slots, 1e-3, 0.9, 0.999, 1e-8, step, grad_scale);
      for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(bitwise_equal(gg[i], g[i]));  // gradients not rewritten
    }
    for (size_t i = 0; i < p.size(); ++i) {
      SCOPED_TRACE(fmt::format("slot {} ({} elements)", i, p[i].numel()));
      EXPECT_TRUE(bitwise_equal(gp[i], p[i]));
      EXPECT_TRUE(bitwise_equal(gm[i], m[i]));
      EXPECT_TRUE(bitwise_equal(gv[i], v[i]));
    }
  }
}

TEST_F(CudaElementwise, SumSquaresMultiMatchesCpuAndRepeats) {
  std::mt19937 rng(46);
  const std::vector<Tensor> xs = multi_tensor_inputs(rng, -1.0f, 3.0f);
  std::vector<Tensor> gxs;
  std::vector<const Tensor*> cpu_ptrs, gpu_ptrs;
  for (const Tensor& x : xs) gxs.push_back(x.to(gpu()));
  for (size_t i = 0; i < xs.size(); ++i) {
    cpu_ptrs.push_back(&xs[i]);
    gpu_ptrs.push_back(&gxs[i]);
  }
  const double want = ops::sum_squares_multi(cpu_ptrs);
  const double got = ops::sum_squares_multi(gpu_ptrs);
  EXPECT_NEAR(got, want, 1e-12 * want);  // both in double; only the order differs
  EXPECT_EQ(ops::sum_squares_multi(gpu_ptrs), got);  // a fixed order: the same double every time
  EXPECT_GT(want, 0.0);
}

TEST_F(CudaElementwise, CastMultiEqualsCastPerTensor) {
  std::mt19937 rng(47);
  const std::vector<Tensor> xs = multi_tensor_inputs(rng, -2.0f, 2.0f);
  for (DType to : {DType::BF16, DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(to));
    std::vector<Tensor> src, multi, single;
    for (const Tensor& x : xs) {
      src.push_back(x.to(gpu()));
      multi.push_back(Tensor::empty(x.shape(), to, gpu()));
      single.push_back(Tensor::empty(x.shape(), to, gpu()));
    }
    std::vector<const Tensor*> sp;
    std::vector<Tensor*> dp;
    for (size_t i = 0; i < xs.size(); ++i) {
      sp.push_back(&src[i]);
      dp.push_back(&multi[i]);
      ops::cast(src[i], single[i]);
    }
    ops::cast_multi(sp, dp);
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_TRUE(bitwise_equal(multi[i], single[i]));
  }
}

// place_blocks in f32 and bf16 and add_blocks (f32) against the CPU, bit for bit: pure copies and single adds.
TEST_F(CudaElementwise, PlaceAndAddBlocksMatchCpu) {
  std::mt19937 rng(61);
  const Tensor q = random_f32({300, 16}, rng), k = random_f32({70, 16}, rng), v = random_f32({70, 16}, rng);
  const std::vector<int64_t> rows = {0, 300, 370}, columns = {0, 16, 32};
  Tensor cpu = Tensor::empty({440, 48}, DType::F32);
  ops::place_blocks({q, k, v}, rows, columns, cpu);
  for (DType dtype : float_dtypes()) {
    Tensor gpu_out = Tensor::full<float>({440, 48}, 5.0f).to_dtype(dtype).to(gpu());
    ops::place_blocks({to_gpu(q, dtype), to_gpu(k, dtype), to_gpu(v, dtype)}, rows, columns, gpu_out);
    EXPECT_TRUE(bitwise_equal(to_host(gpu_out), representable(cpu, dtype).to_dtype(DType::F32))) << dtype_name(dtype);
  }
  const Tensor src = random_f32({440, 48}, rng);
  std::vector<Tensor> cpu_dsts = {random_f32({300, 16}, rng), random_f32({70, 16}, rng), random_f32({70, 16}, rng)};
  std::vector<Tensor> gpu_dsts;
  std::vector<Tensor*> cpu_ptrs, gpu_ptrs;
  for (Tensor& t : cpu_dsts) gpu_dsts.push_back(to_gpu(t));
  for (size_t i = 0; i < cpu_dsts.size(); ++i) {
    cpu_ptrs.push_back(&cpu_dsts[i]);
    gpu_ptrs.push_back(&gpu_dsts[i]);
  }
  ops::add_blocks(src, rows, columns, cpu_ptrs);
  ops::add_blocks(to_gpu(src), rows, columns, gpu_ptrs);
  for (size_t i = 0; i < cpu_dsts.size(); ++i) EXPECT_TRUE(bitwise_equal(to_host(gpu_dsts[i]), cpu_dsts[i])) << i;
}

}  // namespace
