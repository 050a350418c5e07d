// Parallel loops for the CPU kernels: each item is computed whole by one thread, so results never depend on the
// thread count (no shared accumulators, no atomics). Bodies must not throw: validate before the loop.
#pragma once
#include <cstdint>

// OpenMP pragmas that vanish (instead of warning) when the build has no OpenMP.
#ifdef _OPENMP
#define VEOMNI_OMP_STRINGIFY(...) #__VA_ARGS__
#define VEOMNI_OMP(...) _Pragma(VEOMNI_OMP_STRINGIFY(omp __VA_ARGS__))
#else
#define VEOMNI_OMP(...)
#endif

namespace veomni::ops::cpu {

// Below this much work (roughly in flops) a loop stays on the calling thread: waking the team costs more.
inline constexpr int64_t kMinParallelWork = int64_t{1} << 17;

// body(i) for i in [0, n), split into equal static chunks; work_per_item estimates the cost of one item.
template <typename Body>
void parallel_for(int64_t n, int64_t work_per_item, const Body& body) {
  [[maybe_unused]] const bool worth_it = n > 1 && n * work_per_item >= kMinParallelWork;
  VEOMNI_OMP(parallel for schedule(static) if (worth_it))
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Same, handing out items one at a time: for items of uneven cost (causal attention blocks, expert groups).
template <typename Body>
void parallel_for_dynamic(int64_t n, int64_t work_per_item, const Body& body) {
  [[maybe_unused]] const bool worth_it = n > 1 && n * work_per_item >= kMinParallelWork;
  VEOMNI_OMP(parallel for schedule(dynamic, 1) if (worth_it))
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace veomni::ops::cpu
