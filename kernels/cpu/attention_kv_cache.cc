// CPU ops over a per-sequence KV cache, the references of the CUDA kernels: the attention of decoded tokens (per
// (row, query head) the scores over the cached keys, a max-subtracted softmax and the weighted sum of the values, all
// in fp32) and the write of a step's keys or values into their cache rows.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {

void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                        float scale, Tensor& out) {
  const int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2);
  const int32_t* slots = cache_rows.data<int32_t>();
  const int32_t* kv_lens = slots + n;
  const int64_t cache_len = k_cache.dim(1), hkv = k_cache.dim(2);
  const int64_t group = hq / hkv;
  const float* qp = q.data<float>();
  const float* kp = k_cache.data<float>();
  const float* vp = v_cache.data<float>();
  float* op = out.data<float>();
  parallel_for(n * hq, 4 * cache_len * d, [&](int64_t item) {
    const int64_t row = item / hq, head = item % hq, kv_head = head / group;
    const int64_t len = kv_lens[row];
    const int64_t base = static_cast<int64_t>(slots[row]) * cache_len;
    const float* qrow = qp + (row * hq + head) * d;
    std::vector<float> scores(static_cast<size_t>(len));
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len; ++j) {
      const float* krow = kp + ((base + j) * hkv + kv_head) * d;
      float dot = 0.0f;
      for (int64_t i = 0; i < d; ++i) dot += qrow[i] * krow[i];
      scores[static_cast<size_t>(j)] = dot * scale;
      max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
    }
    float denominator = 0.0f;
    for (float& s : scores) {
      s = std::exp(s - max_score);
      denominator += s;
    }
    float* orow = op + (row * hq + head) * d;
    std::fill(orow, orow + d, 0.0f);
    for (int64_t j = 0; j < len; ++j) {
      const float* vrow = vp + ((base + j) * hkv + kv_head) * d;
      const float p = scores[static_cast<size_t>(j)] / denominator;
      for (int64_t i = 0; i < d; ++i) orow[i] += p * vrow[i];
    }
  });
}

void kv_cache_write(const Tensor& rows, const Tensor& dest, Tensor& cache) {
  const int64_t width = cache.dim(2) * cache.dim(3);
  const int32_t* flat = dest.data<int32_t>();
  const float* src = rows.data<float>();
  float* dst = cache.data<float>();
  for (int64_t s = 0; s < rows.dim(0); ++s) std::copy_n(src + s * width, width, dst + flat[s] * width);
}

}  // namespace veomni::ops::cpu
