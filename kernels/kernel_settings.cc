// One entry point for the kernel switches of a run, on CPU and CUDA builds.
#include "kernels/kernel_settings.h"

#include "core/error.h"
#include "kernels/op_profiler.h"

#ifdef VEOMNI_WITH_CUDA
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/cuda/index_checks.h"
#include "kernels/cuda/ops_cuda.h"
#endif

namespace veomni {

void apply_kernel_settings(const KernelSettings& settings) {
  VEOMNI_INPUT_CHECK(settings.attention_backend == "auto" || settings.attention_backend == "cudnn" ||
                         settings.attention_backend == "native",
                     "attention backend '{}': expected auto, cudnn or native", settings.attention_backend);
#ifdef VEOMNI_WITH_CUDA
  ops::cuda::set_attention_backend(ops::cuda::parse_attention_backend(settings.attention_backend, "attention backend"));
  ops::cuda::set_gemm_autotune(settings.gemm_autotune);
  ops::cuda::set_grouped_gemm_loop(settings.grouped_gemm_loop);
  ops::cuda::set_debug_checks(settings.debug_checks);
#endif
  op_profile_configure(settings.profile_ops, settings.profile_ops_out);
}

}  // namespace veomni
