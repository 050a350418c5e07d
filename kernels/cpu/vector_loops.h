// Element loops shaped so GCC vectorises them at -O2: its cheap cost model skips loops of unknown trip count, so the
// work is cut into fixed chunks of kLanes (vectorised) plus a scalar tail. Callers pass __restrict pointers so no
// runtime alias checks are needed.
#pragma once
#include <cstdint>

namespace veomni::ops::cpu {

inline constexpr int64_t kLanes = 8;

// f(i) for i in [0, n) in chunks of kLanes; f should be a lambda over __restrict parameters of the caller.
template <typename F>
inline void for_each_lane(int64_t n, const F& f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) f(i + l);
  for (; i < n; ++i) f(i);
}

// y += a * x
inline void axpy(int64_t n, float a, const float* __restrict x, float* __restrict y) {
  for_each_lane(n, [&](int64_t i) { y[i] += a * x[i]; });
}

// y *= a
inline void scale_in_place(int64_t n, float a, float* __restrict y) {
  for_each_lane(n, [&](int64_t i) { y[i] *= a; });
}

// Sum of x[i] * y[i] in double, in a fixed order (kLanes partial sums, then those in order).
inline double dot_f64(int64_t n, const float* __restrict x, const float* __restrict y) {
  double part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) part[l] += static_cast<double>(x[i + l]) * static_cast<double>(y[i + l]);
  double total = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) total += part[l];
  for (; i < n; ++i) total += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  return total;
}

}  // namespace veomni::ops::cpu
