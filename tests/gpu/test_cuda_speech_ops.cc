// GPU tests of the speech ops against their CPU twins (conv1d, transposed conv1d, SnakeBeta, layer scale, SiLU,
// gated add, clamp, sliding-window attention) in f32 and bf16 (tolerances of gpu_test_util.h), and code2wav's whole
// forward on the GPU against the CPU reference.
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/ops.h"
#include "model/code2wav/code2wav.h"
#include "tests/unit/speech_test_util.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaSpeechOps : public CudaTest {};

Tensor gpu_empty(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, gpu()); }

}  // namespace

TEST_F(CudaSpeechOps, Conv1dAndTransposedConv1dMatchCpu) {
  std::mt19937 rng(71);
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    // Causal dilated, depthwise, strided grouped.
    struct Case {
      int64_t len, cin, cout, kernel, stride, dilation, groups, left, right;
    };
    for (const Case& c : {Case{40, 16, 8, 7, 1, 9, 1, 54, 0}, Case{33, 12, 12, 7, 1, 1, 12, 6, 0},
                          Case{17, 6, 9, 3, 2, 2, 3, 3, 1}}) {
      const Tensor x = representable(random_f32({c.len, c.cin}, rng), dtype);
      const Tensor w = representable(random_f32({c.cout, c.cin / c.groups, c.kernel}, rng), dtype);
      const Tensor b = representable(random_f32({c.cout}, rng), dtype);
      const int64_t out_len = (c.len + c.left + c.right - c.dilation * (c.kernel - 1) - 1) / c.stride + 1;
      Tensor want = Tensor::empty({out_len, c.cout}, DType::F32);
      ops::conv1d_forward(x, w, b, c.stride, c.dilation, c.groups, c.left, c.right, want);
      Tensor got = gpu_empty({out_len, c.cout}, dtype);
      ops::conv1d_forward(to_gpu(x, dtype), to_gpu(w, dtype), to_gpu(b, dtype), c.stride, c.dilation, c.groups, c.left,
                          c.right, got);
      EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "conv1d len " << c.len;
    }
    for (const auto& [len, cin, cout, kernel, stride, trim] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>{9, 24, 12, 16, 8, 8}, {7, 8, 8, 2, 2, 0}}) {
      const Tensor x = representable(random_f32({len, cin}, rng), dtype);
      const Tensor w = representable(random_f32({cin, cout, kernel}, rng), dtype);
      const Tensor b = representable(random_f32({cout}, rng), dtype);
      const int64_t out_len = (len - 1) * stride + kernel - 2 * trim;
      Tensor want = Tensor::empty({out_len, cout}, DType::F32);
      ops::conv_transpose1d_forward(x, w, b, stride, trim, want);
      Tensor got = gpu_empty({out_len, cout}, dtype);
      ops::conv_transpose1d_forward(to_gpu(x, dtype), to_gpu(w, dtype), to_gpu(b, dtype), stride, trim, got);
      EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "conv_transpose1d kernel " << kernel;
    }
  }
}

TEST_F(CudaSpeechOps, ElementwiseOpsMatchCpu) {
  std::mt19937 rng(73);
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = representable(random_f32({37, 24}, rng, -3.0f, 3.0f), dtype);
    const Tensor a = representable(random_f32({24}, rng), dtype), b = representable(random_f32({24}, rng), dtype);
    Tensor want = Tensor::empty({37, 24}, DType::F32), got = gpu_empty({37, 24}, dtype);
    ops::snake_beta_forward(x, a, b, want);
    ops::snake_beta_forward(to_gpu(x, dtype), to_gpu(a, dtype), to_gpu(b, dtype), got);
    EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "snake_beta";
    ops::silu_forward(x, want);
    ops::silu_forward(to_gpu(x, dtype), got);
    EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "silu";
    want = x.clone();
    got = to_gpu(x, dtype);
    ops::scale_columns_(want, a);
    ops::scale_columns_(got, to_gpu(a, dtype));
    EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "scale_columns_";
    const Tensor gate = representable(random_f32({37, 1}, rng, -2.0f, 2.0f), dtype);
    const Tensor src = representable(random_f32({37, 24}, rng), dtype);
    want = x.clone();
    got = to_gpu(x, dtype);
    ops::sigmoid_gated_add_(want, gate, src);
    ops::sigmoid_gated_add_(got, to_gpu(gate, dtype), to_gpu(src, dtype));
    EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "sigmoid_gated_add_";
    want = x.clone();
    got = to_gpu(x, dtype);
    ops::clamp_(want, -1.0f, 1.0f);
    ops::clamp_(got, -1.0f, 1.0f);
    EXPECT_TRUE(bitwise_equal(to_host(got), want)) << "clamp_";
  }
}

TEST_F(CudaSpeechOps, SlidingWindowAttentionMatchesCpu) {
  std::mt19937 rng(79);
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t s = 90, hq = 4, hkv = 2, d = 64;
    const Tensor q = representable(random_f32({s, hq, d}, rng), dtype);
    const Tensor k = representable(random_f32({s, hkv, d}, rng), dtype);
    const Tensor v = representable(random_f32({s, hkv, d}, rng), dtype);
    for (int64_t window : {1, 72, 200}) {
      Tensor want = Tensor::empty({s, hq, d}, DType::F32), got = gpu_empty({s, hq, d}, dtype);
      ops::sliding_window_attention_forward(q, k, v, window, 0.125f, want);
      ops::sliding_window_attention_forward(to_gpu(q, dtype), to_gpu(k, dtype), to_gpu(v, dtype), window, 0.125f,
                                            got);
      EXPECT_TRUE(close_to(got, want, rtol_for(dtype))) << "window " << window;
    }
  }
}

TEST_F(CudaSpeechOps, Code2WavForwardMatchesCpu) {
  Code2WavConfig c = speech_test::tiny_code2wav_config();
  c.num_key_value_heads = c.num_attention_heads;  // as the real code2wav: one key/value head per query head
  Code2Wav cpu_model(c);
  Code2Wav gpu_model(c, {.device = gpu(), .compute_dtype = DType::F32});
  std::mt19937 rng(83);
  for (const auto& p : cpu_model.store().all()) {
    const Tensor value = random_f32(p->shape, rng, -0.5f, 0.5f);
    p->value.copy_from(value);
    gpu_model.store().at(p->name).value.copy_from(value);
  }
  std::vector<int64_t> codes(7 * 3);
  for (int64_t& code : codes) code = static_cast<int64_t>(rng() % 10);
  const Tensor want = cpu_model.forward(codes);
  EXPECT_TRUE(close_to(gpu_model.forward(codes), want, 1e-4));
}
