// Helpers of the op tests: random tensors, comparisons against double references, finite differences, threads.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/threads.h"

namespace veomni::test_ops {

using Doubles = std::vector<double>;

inline Tensor random_f32(const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

inline Doubles to_doubles(const Tensor& t) {
  Doubles out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.item_as_double(i);
  return out;
}

// |got - want| <= atol + rtol * |want| everywhere; reports the worst element.
inline ::testing::AssertionResult all_close(const Tensor& got, const Doubles& want, double rtol, double atol) {
  if (static_cast<size_t>(got.numel()) != want.size())
    return ::testing::AssertionFailure() << got.describe() << " vs " << want.size() << " reference values";
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.item_as_double(static_cast<int64_t>(i));
    const double excess = std::fabs(g - want[i]) - (atol + rtol * std::fabs(want[i]));
    if (!(excess <= worst) || std::isnan(g)) {
      worst = std::isnan(g) ? INFINITY : excess;
      worst_i = i;
    }
  }
  if (worst <= 0.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst_i << ": got " << got.item_as_double(worst_i) << ", want "
                                       << want[worst_i] << " (rtol " << rtol << ", atol " << atol << ")";
}

inline ::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.nbytes() != b.nbytes() || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0)
    return ::testing::AssertionFailure() << a.describe() << " and " << b.describe() << " differ bitwise";
  return ::testing::AssertionSuccess();
}

inline double max_abs(const Doubles& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Runs fn with the kernels' thread count set to n, then restores it.
template <typename Fn>
void with_threads(int n, Fn&& fn) {
  const int before = ops::cpu::num_threads();
  ops::cpu::set_num_threads(n);
  fn();
  ops::cpu::set_num_threads(before);
}

// Sum of w[i] * t[i] in double: a scalar loss whose gradient with respect to t is w.
inline double project(const Tensor& t, const Tensor& w) {
  double s = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.item_as_double(i) * w.item_as_double(i);
  return s;
}

// Checks grad against central differences of loss() with respect to the f32 tensor x: every element when x is small,
// else `samples` random ones. The step is the f32 difference actually applied. Tolerance:
// |fd - grad| <= tol * (max|grad| + |grad_i|) -- loose on purpose, f32 forward passes limit the precision.
inline void expect_gradient(const char* what, Tensor& x, const Tensor& grad, const std::function<double()>& loss,
                            float step = 1e-2f, double tol = 2e-3, int samples = 48, unsigned seed = 7) {
  ASSERT_EQ(x.numel(), grad.numel()) << what;
  const Doubles g = to_doubles(grad);
  const double scale = max_abs(g) + 1e-12;
  std::vector<int64_t> idx(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) idx[static_cast<size_t>(i)] = i;
  if (x.numel() > samples) {
    std::mt19937 rng(seed);
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(static_cast<size_t>(samples));
  }
  float* p = x.data<float>();
  for (int64_t i : idx) {
    const float orig = p[i];
    const float h = step * std::max(1.0f, std::fabs(orig));
    p[i] = orig + h;
    const double up = loss();
    const float up_x = p[i];
    p[i] = orig - h;
    const double down = loss();
    const float down_x = p[i];
    p[i] = orig;
    const double fd = (up - down) / (static_cast<double>(up_x) - static_cast<double>(down_x));
    const double gi = g[static_cast<size_t>(i)];
    EXPECT_LE(std::fabs(fd - gi), tol * (scale + std::fabs(gi)))
        << what << " element " << i << ": finite difference " << fd << ", backward " << gi;
  }
}

// The label ignore_index marks: the loss skips its row.
inline constexpr int64_t kIgnore = -100;

// n labels drawn uniformly from [0, v).
inline std::vector<int64_t> random_labels(int64_t n, int64_t v, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> dist(0, v - 1);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (auto& l : labels) l = dist(rng);
  return labels;
}

}  // namespace veomni::test_ops
