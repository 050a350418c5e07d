// CPU elementwise ops. Reductions sum fixed-size chunks in double and then the chunk sums in order, so the result is
// the same for any thread count.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/float_element.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

constexpr int64_t kElementwiseChunk = 1 << 14;

int64_t chunk_count(int64_t n) { return (n + kElementwiseChunk - 1) / kElementwiseChunk; }

// body(begin, len) over [0, n) in chunks of kElementwiseChunk, in parallel.
template <typename Body>
void for_chunks(int64_t n, int64_t work_per_element, const Body& body) {
  parallel_for(chunk_count(n), work_per_element * kElementwiseChunk, [&](int64_t c) {
    const int64_t begin = c * kElementwiseChunk;
    body(begin, std::min(kElementwiseChunk, n - begin));
  });
}

double sum_chunk(int64_t n, const float* __restrict x) {
  double part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) part[l] += static_cast<double>(x[i + l]);
  double total = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) total += part[l];
  for (; i < n; ++i) total += static_cast<double>(x[i]);
  return total;
}

template <typename ChunkSum>
double reduce(const Tensor& x, const ChunkSum& chunk_sum) {
  const int64_t n = x.numel();
  const float* p = x.data<float>();
  std::vector<double> partial(static_cast<size_t>(chunk_count(n)));
  for_chunks(n, 2, [&](int64_t begin, int64_t len) {
    partial[static_cast<size_t>(begin / kElementwiseChunk)] = chunk_sum(len, p + begin);
  });
  double total = 0.0;
  for (double v : partial) total += v;
  return total;
}

void fill_chunk(int64_t n, float value, float* __restrict x) {
  for_each_lane(n, [&](int64_t i) { x[i] = value; });
}

template <typename Src, typename Dst>
void convert(const Tensor& src, Tensor& dst) {
  const Src* s = src.data<Src>();
  Dst* d = dst.data<Dst>();
  for_chunks(src.numel(), 4, [&](int64_t begin, int64_t len) {
    for (int64_t i = begin; i < begin + len; ++i) d[i] = from_float<Dst>(to_float(s[i]));
  });
}

template <typename Src>
void convert_from(const Tensor& src, Tensor& dst) {
  switch (dst.dtype()) {
    case DType::F32:
      return convert<Src, float>(src, dst);
    case DType::BF16:
      return convert<Src, bf16>(src, dst);
    default:
      return convert<Src, f16>(src, dst);
  }
}

}  // namespace

double sum(const Tensor& x) { return reduce(x, sum_chunk); }

double sum_squares(const Tensor& x) {
  return reduce(x, [](int64_t n, const float* p) { return dot_f64(n, p, p); });
}

void add_(Tensor& dst, const Tensor& src, float alpha) {
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  for_chunks(dst.numel(), 2, [&](int64_t begin, int64_t len) { axpy(len, alpha, s + begin, d + begin); });
}

void scale_(Tensor& x, float factor) {
  float* p = x.data<float>();
  for_chunks(x.numel(), 1, [&](int64_t begin, int64_t len) { scale_in_place(len, factor, p + begin); });
}

void fill_(Tensor& x, float value) {
  float* p = x.data<float>();
  for_chunks(x.numel(), 1, [&](int64_t begin, int64_t len) { fill_chunk(len, value, p + begin); });
}

void cast(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  switch (src.dtype()) {
    case DType::F32:
      return convert_from<float>(src, dst);
    case DType::BF16:
      return convert_from<bf16>(src, dst);
    default:
      return convert_from<f16>(src, dst);
  }
}

double sum_squares_multi(const std::vector<const Tensor*>& xs) {
  double total = 0.0;
  for (const Tensor* x : xs) total += sum_squares(*x);
  return total;
}

void cast_multi(const std::vector<const Tensor*>& src, const std::vector<Tensor*>& dst) {
  for (size_t i = 0; i < src.size(); ++i) cast(*src[i], *dst[i]);
}

}  // namespace veomni::ops::cpu
