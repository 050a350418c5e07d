// CUDA qkv_norm_rope_forward and qkv_norm_rope_backward against the CPU reference (f32 and bf16 activations, f32 and
// bf16 gains, head_dim 64 and 128, GQA), and a head_dim the CUDA kernels do not take.
#include <tuple>

#include "gpu_test_util.h"
#include "kernels/ops.h"

namespace veomni {
namespace {

using namespace gpu_test;

class CudaQkvNormRope : public CudaTest {};

struct Shapes {
  int64_t s, hq, hkv, d;
};

TEST_F(CudaQkvNormRope, ForwardAndBackwardMatchCpu) {
  for (const Shapes& shape : {Shapes{37, 16, 8, 128}, Shapes{5, 4, 1, 64}}) {
    for (DType dtype : float_dtypes()) {
      for (DType gain_dtype : float_dtypes()) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << shape.d << ", " << dtype_name(dtype) << " activations, "
                                          << dtype_name(gain_dtype) << " gains");
        const int64_t s = shape.s, hq = shape.hq, hkv = shape.hkv, d = shape.d, width = (hq + 2 * hkv) * d;
        std::mt19937 rng(51);
        const Tensor qkv = representable(random_f32({s, width}, rng, -2.0f, 2.0f), dtype);
        const Tensor q_norm = representable(random_f32({d}, rng, 0.5f, 1.5f), gain_dtype);
        const Tensor k_norm = representable(random_f32({d}, rng, 0.5f, 1.5f), gain_dtype);
        std::vector<int64_t> positions(static_cast<size_t>(s));
        for (int64_t t = 0; t < s; ++t) positions[static_cast<size_t>(t)] = 7 * t + 3;
        const Tensor pos = Tensor::from_vector(positions, {s});
        Tensor cos = Tensor::empty({s, d}, DType::F32), sin = Tensor::empty({s, d}, DType::F32);
        ops::rope_tables(pos, d, 1e6, {}, cos, sin);
        const Tensor dq = representable(random_f32({s, hq, d}, rng), dtype);
        const Tensor dk = representable(random_f32({s, hkv, d}, rng), dtype);
        const Tensor dv = representable(random_f32({s, hkv, d}, rng), dtype);

        // CPU reference (f32).
        Tensor q = Tensor::empty({s, hq, d}, DType::F32), k = Tensor::empty({s, hkv, d}, DType::F32);
        Tensor v = Tensor::empty({s, hkv, d}, DType::F32);
        Tensor q_rstd = Tensor::empty({s * hq}, DType::F32), k_rstd = Tensor::empty({s * hkv}, DType::F32);
        ops::qkv_norm_rope_forward(qkv, q_norm, k_norm, 1e-6f, cos, sin, q, k, v, q_rstd, k_rstd);
        Tensor dqkv = Tensor::empty({s, width}, DType::F32);
        ops::qkv_norm_rope_backward(dq, dk, dv, qkv, q_norm, k_norm, q_rstd, k_rstd, cos, sin, dqkv);

        const Tensor g_qkv = to_gpu(qkv, dtype), g_qn = to_gpu(q_norm, gain_dtype), g_kn = to_gpu(k_norm, gain_dtype);
        const Tensor g_cos = to_gpu(cos), g_sin = to_gpu(sin);
        Tensor g_q = Tensor::empty(q.shape(), dtype, gpu()), g_k = Tensor::empty(k.shape(), dtype, gpu());
        Tensor g_v = Tensor::empty(v.shape(), dtype, gpu());
        Tensor g_q_rstd = Tensor::empty(q_rstd.shape(), DType::F32, gpu());
        Tensor g_k_rstd = Tensor::empty(k_rstd.shape(), DType::F32, gpu());
        ops::qkv_norm_rope_forward(g_qkv, g_qn, g_kn, 1e-6f, g_cos, g_sin, g_q, g_k, g_v, g_q_rstd, g_k_rstd);
        const double rtol = rtol_for(dtype);
        EXPECT_TRUE(close_to(g_q, q, rtol));
        EXPECT_TRUE(close_to(g_k, k, rtol));
        EXPECT_TRUE(bitwise_equal(to_host(g_v), v));  // a copy: representable values stay exact
        EXPECT_TRUE(close_to(g_q_rstd, q_rstd, kF32Rtol));
        EXPECT_TRUE(close_to(g_k_rstd, k_rstd, kF32Rtol));

        // The backward from the CPU's rstd, so that it is judged alone.
        Tensor g_dqkv = Tensor::empty({s, width}, dtype, gpu());
        ops::qkv_norm_rope_backward(to_gpu(dq, dtype), to_gpu(dk, dtype), to_gpu(dv, dtype), g_qkv, g_qn, g_kn,
                                    to_gpu(q_rstd), to_gpu(k_rstd), g_cos, g_sin, g_dqkv);
        EXPECT_TRUE(close_to(g_dqkv, dqkv, rtol));
      }
    }
  }
}

TEST_F(CudaQkvNormRope, RejectsAHeadDimItsKernelsDoNotTake) {
  const int64_t s = 2, d = 48;
  Tensor qkv = Tensor::zeros({s, 4 * d}, DType::BF16, gpu());
  Tensor gain = Tensor::zeros({d}, DType::BF16, gpu());
  Tensor cos = Tensor::zeros({s, d}, DType::F32, gpu()), sin = Tensor::zeros({s, d}, DType::F32, gpu());
  Tensor q = Tensor::empty({s, 2, d}, DType::BF16, gpu()), k = Tensor::empty({s, 1, d}, DType::BF16, gpu());
  Tensor v = Tensor::empty({s, 1, d}, DType::BF16, gpu());
  Tensor q_rstd = Tensor::empty({s * 2}, DType::F32, gpu()), k_rstd = Tensor::empty({s}, DType::F32, gpu());
  EXPECT_THROW(ops::qkv_norm_rope_forward(qkv, gain, gain, 1e-6f, cos, sin, q, k, v, q_rstd, k_rstd), Error);
}

}  // namespace
}  // namespace veomni
