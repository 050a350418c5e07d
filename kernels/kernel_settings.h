// The kernel switches a run sets from its config (train.kernels, train.op_profile): attention backend, GEMM
// autotuning, grouped-GEMM mode, device debug checks and op profiling, in one call on every backend.
#pragma once
#include <string>

namespace veomni {

struct KernelSettings {
  std::string attention_backend = "auto";  // auto | cudnn | native (CUDA builds)
  bool gemm_autotune = false;              // CUDA builds
  bool grouped_gemm_loop = false;          // CUDA builds: one GEMM call per group
  bool debug_checks = false;               // CUDA builds: range checks of ids and labels on the device (each waits)
  bool profile_ops = false;
  std::string profile_ops_out;  // "" = the table on rank 0's stderr only
};

// Applies the settings for the rest of the process, replacing what the VEOMNI_* variables set at load time. A CPU
// build ignores the CUDA switches (they change how a GPU computes, not what). Throws InputError on an unknown
// attention backend.
void apply_kernel_settings(const KernelSettings& settings);

}  // namespace veomni
