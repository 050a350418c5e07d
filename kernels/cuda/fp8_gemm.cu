// The CUDA FP8 GEMM: out = diag(a_scales) (a b^T) diag(b_scales) (+ beta out) on E4M3 operands with f32
// accumulation. Where cuBLASLt offers its outer-vector scale mode (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: one
// f32 per row of each operand, applied to the accumulator before the output is rounded) it is one call. Where it
// does not (cuBLAS 13.1 on Hopper rejects the mode), the unscaled product goes to an f32 buffer and one elementwise
// pass applies both scales and beta, rounding once. Plans (descriptors and the heuristic's pick) are kept per shape
// as in kernels/cuda/gemm.cu.
#include <cublasLt.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace veomni::ops::cuda {
namespace {

// align_*: the largest power of two (up to 256) dividing each operand's address, what the kernels may assume.
struct Fp8PlanKey {
  int64_t m, n, k;
  cudaDataType_t output_type;
  bool accumulates;
  uint32_t align_a, align_b, align_out;
  bool operator==(const Fp8PlanKey&) const = default;
};

uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  return v == 0 ? 256u : static_cast<uint32_t>(std::min<uintptr_t>(v & (~v + 1), 256));
}

struct Fp8PlanKeyHash {
  size_t operator()(const Fp8PlanKey& key) const {
    size_t h = 1469598103934665603ull;
    for (const uint64_t v : {static_cast<uint64_t>(key.m), static_cast<uint64_t>(key.n), static_cast<uint64_t>(key.k),
                             static_cast<uint64_t>(key.output_type) << 1 | (key.accumulates ? 1u : 0u),
                             static_cast<uint64_t>(key.align_a) << 32 | static_cast<uint64_t>(key.align_b) << 16 |
                                 key.align_out})
      h = (h ^ v) * 1099511628211ull;
    return h;
  }
};

struct Fp8Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool scaled = true;  // false: the unscaled product into an f32 [m, n] buffer (layout_c), then scale_rows_cols

  Fp8Plan() = default;
  Fp8Plan(const Fp8Plan&) = delete;
  Fp8Plan& operator=(const Fp8Plan&) = delete;
  ~Fp8Plan() {
    if (layout_c) (void)cublasLtMatrixLayoutDestroy(layout_c);
    if (layout_b) (void)cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a) (void)cublasLtMatrixLayoutDestroy(layout_a);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

// The scale pointers are attributes of the descriptor, set on each call: the lock covers setting them and queueing
// the matmul, so that a plan is never changed between the two.
constexpr size_t kMaxFp8Plans = 4096;
std::mutex g_fp8_mutex;
std::unordered_map<Fp8PlanKey, std::unique_ptr<Fp8Plan>, Fp8PlanKeyHash> g_fp8_plans;

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

// The heuristic's first pick for a plan whose descriptor and layouts are set, or false when there is none.
bool pick_algo(const Fp8PlanKey& key, Fp8Plan& plan, cublasStatus_t* status_out) {
  cublasLtMatmulPreference_t pref = nullptr;
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t workspace_bytes = 0;
  cuda_rt::cublas_workspace(&workspace_bytes);
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &workspace_bytes, sizeof workspace_bytes);
  // cuBLASLt's A is our b, its B our a (see make_fp8_plan). The unscaled product goes to a fresh buffer (aligned).
  const uint32_t align_out = plan.scaled ? key.align_out : 256u;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_out}};
  for (const auto& [attribute, bytes] : alignments)
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes, sizeof bytes);
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(cuda_rt::cublaslt(), plan.desc, plan.layout_a, plan.layout_b,
                                            plan.layout_c, plan.layout_c, pref, 1, &result, &found);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  *status_out = status;
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  plan.algo = result.algo;
  return true;
}

// Row-major out [m, n] is column-major [n, m]: cuBLASLt computes it as A^T B with A := b (column-major [k, n],
// transposed) and B := a (column-major [k, m]): the "TN" layout Hopper's FP8 GEMMs require. cuBLASLt's outer
// vectors then have n (A's) and m (B's) elements.
std::unique_ptr<Fp8Plan> make_fp8_plan(const Fp8PlanKey& key, bool scaled) {
  auto plan = std::make_unique<Fp8Plan>();
  plan->scaled = scaled;
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (scaled) {
    const int32_t outer_vector = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, outer_vector);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, outer_vector);
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  VEOMNI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_a, CUDA_R_8F_E4M3, u(key.k), u(key.n), key.k));
  VEOMNI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_b, CUDA_R_8F_E4M3, u(key.k), u(key.m), key.k));
  VEOMNI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_c, scaled ? key.output_type : CUDA_R_32F, u(key.n),
                                                 u(key.m), key.n));
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  if (pick_algo(key, *plan, &status)) return plan;
  if (scaled) return make_fp8_plan(key, false);
  throw Error(fmt::format("cuBLASLt has no FP8 GEMM for m={} n={} k={}: {}; it needs a GPU with FP8 tensor cores "
                          "(Hopper or later)",
                          key.m, key.n, key.k, cublasLtGetStatusString(status)));
}

// out[r, c] = a_scales[r] * b_scales[c] * product[r, c] + beta * out[r, c], rounded once into out's dtype.
__global__ void scale_rows_cols(const float* product, const float* a_scales, const float* b_scales, Floats out,
                                int64_t m, int64_t n, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float scaled = a_scales[i / n] * b_scales[i % n] * product[i];
    out.store(i, beta == 0.0f ? scaled : scaled + beta * out[i]);
  }
}

}  // namespace

void matmul_fp8_tn(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales, Tensor& out,
                   float beta) {
  const Fp8PlanKey key{.m = a.dim(0),
                       .n = b.dim(0),
                       .k = a.dim(1),
                       .output_type = out.dtype() == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F,
                       .accumulates = beta != 0.0f,
                       .align_a = alignment_of(a.raw_data()),
                       .align_b = alignment_of(b.raw_data()),
                       .align_out = alignment_of(out.raw_data())};
  if (key.m == 0 || key.n == 0) return;
  const float alpha = 1.0f;
  size_t workspace_bytes = 0;
  void* workspace = cuda_rt::cublas_workspace(&workspace_bytes);
  std::lock_guard lock(g_fp8_mutex);
  auto it = g_fp8_plans.find(key);
  if (it == g_fp8_plans.end()) {
    if (g_fp8_plans.size() >= kMaxFp8Plans) g_fp8_plans.clear();  // a bound against unbounded growth only
    it = g_fp8_plans.emplace(key, make_fp8_plan(key, true)).first;
  }
  const Fp8Plan& plan = *it->second;
  if (!plan.scaled) {
    Tensor product = Tensor::empty({key.m, key.n}, DType::F32, out.device());
    const float zero = 0.0f;
    VEOMNI_CUBLAS_CHECK(cublasLtMatmul(cuda_rt::cublaslt(), plan.desc, &alpha, b.raw_data(), plan.layout_a,
                                       a.raw_data(), plan.layout_b, &zero, product.raw_data(), plan.layout_c,
                                       product.raw_data(), plan.layout_c, &plan.algo, workspace, workspace_bytes,
                                       cuda_rt::stream()));
    constexpr int kThreads = 256;
    scale_rows_cols<<<grid_for(key.m * key.n, kThreads), kThreads, 0, cuda_rt::stream()>>>(
        data_of<const float>(product), data_of<const float>(a_scales), data_of<const float>(b_scales),
        floats_of(out), key.m, key.n, beta);
    VEOMNI_CUDA_LAUNCH_CHECK();
    return;
  }
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scales.raw_data());
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scales.raw_data());
  VEOMNI_CUBLAS_CHECK(cublasLtMatmul(cuda_rt::cublaslt(), plan.desc, &alpha, b.raw_data(), plan.layout_a,
                                     a.raw_data(), plan.layout_b, &beta, out.raw_data(), plan.layout_c,
                                     out.raw_data(), plan.layout_c, &plan.algo, workspace, workspace_bytes,
                                     cuda_rt::stream()));
}

}  // namespace veomni::ops::cuda
