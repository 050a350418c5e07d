// Timing of CUDA work for the benchmarks: median of CUDA-event intervals on the compute stream.
#pragma once
#ifdef VEOMNI_WITH_CUDA
#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace veomni::benchmarking {

// Median milliseconds of `reps` runs on the compute stream, after one warm-up run.
inline double time_ms(int reps, const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  VEOMNI_CUDA_CHECK(cudaEventCreate(&start));
  VEOMNI_CUDA_CHECK(cudaEventCreate(&stop));
  fn();
  std::vector<double> runs;
  for (int r = 0; r < reps; ++r) {
    VEOMNI_CUDA_CHECK(cudaEventRecord(start, cuda_rt::stream()));
    fn();
    VEOMNI_CUDA_CHECK(cudaEventRecord(stop, cuda_rt::stream()));
    VEOMNI_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    VEOMNI_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    runs.push_back(ms);
  }
  VEOMNI_CUDA_CHECK(cudaEventDestroy(start));
  VEOMNI_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace veomni::benchmarking
#endif
