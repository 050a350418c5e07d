// Autotuning of the cuBLASLt GEMMs (gemm.cu): the VEOMNI_GEMM_AUTOTUNE switch and the timing of candidate algorithms.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "core/device.h"

namespace veomni::ops::cuda {

// Whether a GEMM times cuBLASLt's candidates on the first use of its plan key. Read once from VEOMNI_GEMM_AUTOTUNE
// ("1": on; unset, empty or "0": off, the heuristic's first pick, the same algorithm every run), unless
// set_gemm_autotune() said otherwise.
bool gemm_autotune_enabled();
// Overrides the environment for the rest of the process (tests, benchmarks). Choices already timed are kept: they are
// used again whenever autotuning is on, and the heuristic's first pick is used while it is off.
void set_gemm_autotune(bool enabled);
// The meaning of one VEOMNI_GEMM_AUTOTUNE value (nullptr when unset); an unknown value warns and leaves it off.
bool gemm_autotune_from_env_value(const char* value);

// Counters since the process started, to show that a call did (or did not) time its candidates.
struct GemmAutotuneStats {
  size_t keys_tuned = 0;        // plan keys whose algorithm was settled by autotuning
  size_t candidates_timed = 0;  // candidate algorithms that ran and were timed
};
GemmAutotuneStats gemm_autotune_stats();

// One cuBLASLt matmul as gemm.cu issues it, all but the algorithm. C is read when beta != 0; the trials write to D.
struct MatmulTrial {
  cublasLtMatmulDesc_t desc;
  const float* alpha;
  const void* a;
  cublasLtMatrixLayout_t layout_a;
  const void* b;
  cublasLtMatrixLayout_t layout_b;
  const float* beta;
  const void* c;
  cublasLtMatrixLayout_t layout_c;  // also D's layout
  void* d;                          // null: D is a scratch buffer of scratch_bytes on `device`
  size_t scratch_bytes;
  Device device;
  void* workspace;
  size_t workspace_bytes;
  cudaStream_t stream;
};

// Runs each candidate (one warm-up and three timed runs, timed with CUDA events on the trial's stream; the host
// waits for them) and returns the index of the fastest; candidates cuBLASLt rejects are skipped. When none runs,
// returns 0 (the heuristic's first pick, whose real call then reports the error). `what` names the GEMM in the debug
// log line that lists every candidate's time.
size_t fastest_candidate(const MatmulTrial& trial, std::span<const cublasLtMatmulHeuristicResult_t> candidates,
                         std::string_view what);

}  // namespace veomni::ops::cuda
