// cuBLAS and cuBLASLt, loaded on first use: the entry points we call, resolved from the libraries with dlopen.
//
// Linked normally, libcublasLt is mapped and relocated at every process start (half a second and 200 MB on our
// machines), so every CPU-only tool run and test paid for a GPU library it never touched. The definitions below carry
// the headers' own declarations, so the compiler checks each signature against the toolkit we build with.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace veomni::cuda_rt {
namespace {

void* open_cuda_library(const char* stem) {
  const std::string soname = std::string(stem) + ".so." + std::to_string(CUBLAS_VER_MAJOR);
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL)) return handle;
  const std::string first_error = dlerror();
  // The toolkit's directory at build time, for machines whose loader path does not list it.
  const std::string built_with = std::string(VEOMNI_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* handle = dlopen(built_with.c_str(), RTLD_NOW | RTLD_GLOBAL)) return handle;
  throw Error(fmt::format("cannot load {}: {} (also tried {}: {}); install the CUDA toolkit's cuBLAS or add its lib "
                          "directory to LD_LIBRARY_PATH",
                          soname, first_error, built_with, dlerror()));
}

void* cublaslt_library() {
  static void* const handle = open_cuda_library("libcublasLt");
  return handle;
}

void* cublas_library() {
  static void* const handle = [] {
    cublaslt_library();  // libcublas needs libcublasLt's symbols
    return open_cuda_library("libcublas");
  }();
  return handle;
}

template <typename Fn>
Fn resolve(void* library, const char* name) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) throw Error(fmt::format("the CUDA library loaded has no {}: {}", name, dlerror()));
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace
}  // namespace veomni::cuda_rt

// One forwarding definition per entry point; the pointer is looked up once, on the first call.
#define VEOMNI_CUBLAS_FORWARD(library, ret, name, params, args)                                          \
  extern "C" ret CUBLASWINAPI name params {                                                             \
    static const auto fn = veomni::cuda_rt::resolve<ret(*) params>(veomni::cuda_rt::library(), #name); \
    return fn args;                                                                                     \
  }

#define VEOMNI_LT(ret, name, params, args) VEOMNI_CUBLAS_FORWARD(cublaslt_library, ret, name, params, args)
#define VEOMNI_BLAS(ret, name, params, args) VEOMNI_CUBLAS_FORWARD(cublas_library, ret, name, params, args)

VEOMNI_LT(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
VEOMNI_LT(const char*, cublasLtGetStatusName, (cublasStatus_t status), (status))
VEOMNI_LT(const char*, cublasLtGetStatusString, (cublasStatus_t status), (status))
VEOMNI_LT(cublasStatus_t, cublasLtMatrixLayoutCreate,
          (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
          (layout, type, rows, cols, ld))
VEOMNI_LT(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulDescCreate,
          (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale), (desc, compute, scale))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulDescSetAttribute,
          (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t bytes),
          (desc, attr, buf, bytes))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
          (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t bytes),
          (pref, attr, buf, bytes))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulAlgoConfigGetAttribute,
          (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t bytes,
           size_t* written),
          (algo, attr, buf, bytes, written))
VEOMNI_LT(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
          (cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
           cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
           cublasLtMatmulHeuristicResult_t results[], int* returned),
          (handle, op, a, b, c, d, pref, requested, results, returned))
VEOMNI_LT(cublasStatus_t, cublasLtMatmul,
          (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
           cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout, const void* beta,
           const void* c, cublasLtMatrixLayout_t c_layout, void* d, cublasLtMatrixLayout_t d_layout,
           const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream),
          (handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout, algo, workspace,
           workspace_bytes, stream))

VEOMNI_BLAS(cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
VEOMNI_BLAS(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
VEOMNI_BLAS(cublasStatus_t, cublasSetWorkspace_v2, (cublasHandle_t handle, void* workspace, size_t bytes),
            (handle, workspace, bytes))
VEOMNI_BLAS(cublasStatus_t, cublasGemmGroupedBatchedEx_64,
            (cublasHandle_t handle, const cublasOperation_t transa[], const cublasOperation_t transb[],
             const int64_t m[], const int64_t n[], const int64_t k[], const void* alpha, const void* const a[],
             cudaDataType_t a_type, const int64_t lda[], const void* const b[], cudaDataType_t b_type,
             const int64_t ldb[], const void* beta, void* const c[], cudaDataType_t c_type, const int64_t ldc[],
             int64_t group_count, const int64_t group_size[], cublasComputeType_t compute),
            (handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, group_count,
             group_size, compute))
