// CUDA attention of decoded tokens over a per-sequence KV cache: one block per (row, query head); each warp runs an
// online softmax over every kWarps-th cached key (lanes split the head dimension), then the warps' partial results
// are merged in shared memory in a fixed order. f32 or bf16 q, cache and out; fp32 softmax and accumulation.
#include <cmath>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDimPerLane = 8;  // head_dim up to 256

struct KvCacheArgs {
  ConstFloats q, k, v;
  Floats out;
  const int32_t* rows;  // [2, N]: slots, then kv_lens
  int64_t n, hq, hkv, d, cache_len;
  float scale;
};

__global__ void attention_kv_cache_kernel(KvCacheArgs a) {
  __shared__ float warp_max_score[kWarps];
  __shared__ float warp_denominator[kWarps];
  __shared__ float warp_acc[kWarps][kMaxDimPerLane * kWarp];
  const int64_t row = blockIdx.x, head = blockIdx.y;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t kv_head = head / (a.hq / a.hkv);
  const int64_t slot = a.rows[row], len = a.rows[a.n + row];

  float q[kMaxDimPerLane], acc[kMaxDimPerLane];
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int64_t dim = lane + i * kWarp;
    q[i] = dim < a.d ? a.q[(row * a.hq + head) * a.d + dim] * a.scale : 0.0f;
    acc[i] = 0.0f;
  }
  float max_score = -INFINITY, denominator = 0.0f;
  for (int64_t j = warp; j < len; j += kWarps) {
    const int64_t base = ((slot * a.cache_len + j) * a.hkv + kv_head) * a.d;
    float dot = 0.0f;
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int64_t dim = lane + i * kWarp;
      if (dim < a.d) dot += q[i] * a.k[base + dim];
    }
    const float score = warp_sum(dot);
    const float new_max = fmaxf(max_score, score);
    const float rescale = __expf(max_score - new_max);
    const float p = __expf(score - new_max);
    denominator = denominator * rescale + p;
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int64_t dim = lane + i * kWarp;
      if (dim < a.d) acc[i] = acc[i] * rescale + p * a.v[base + dim];
    }
    max_score = new_max;
  }
  if (lane == 0) {
    warp_max_score[warp] = max_score;
    warp_denominator[warp] = denominator;
  }
  for (int i = 0; i < kMaxDimPerLane; ++i) warp_acc[warp][lane + i * kWarp] = acc[i];
  __syncthreads();

  float total_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, warp_max_score[w]);
  float total_denominator = 0.0f;
  float weights[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    // A warp that saw no key (len < kWarps) holds -inf and weighs nothing.
    weights[w] = warp_max_score[w] == -INFINITY ? 0.0f : __expf(warp_max_score[w] - total_max);
    total_denominator += warp_denominator[w] * weights[w];
  }
  for (int64_t dim = threadIdx.x; dim < a.d; dim += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += warp_acc[w][dim] * weights[w];
    a.out.store((row * a.hq + head) * a.d + dim, sum / total_denominator);
  }
}

}  // namespace

void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const std::vector<int32_t>& slots, const std::vector<int32_t>& kv_lens, float scale,
                        Tensor& out) {
  const int64_t n = q.dim(0);
  if (n == 0) return;
  VEOMNI_CHECK(q.dim(2) <= kMaxDimPerLane * kWarp, "attention_kv_cache: head_dim {} is above {}", q.dim(2),
               kMaxDimPerLane * kWarp);
  std::vector<int32_t> rows(slots);
  rows.insert(rows.end(), kv_lens.begin(), kv_lens.end());
  Tensor rows_device = Tensor::empty({2 * n}, DType::I32, q.device());
  cuda_rt::upload_from_host(rows_device.raw_data(), rows.data(), rows.size() * sizeof(int32_t));
  KvCacheArgs args{floats_of(q), floats_of(k_cache), floats_of(v_cache), floats_of(out),
                   data_of<const int32_t>(rows_device), n, q.dim(1), k_cache.dim(2), q.dim(2), k_cache.dim(1), scale};
  attention_kv_cache_kernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(q.dim(1))), kWarps * kWarp, 0,
                              cuda_rt::stream()>>>(args);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
