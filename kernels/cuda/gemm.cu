// CUDA GEMMs through cuBLASLt: row-major matmul with transposes and alpha/beta, and the grouped expert GEMMs (no
// padding to capacity) as one cublasGemmGroupedBatchedEx call where cuBLAS takes the dtypes, else one cuBLASLt call
// per non-empty group. Inputs bf16 or f32 with fp32 accumulation (exact fp32 math, no TF32, for f32 inputs); output
// f32 or bf16. cuBLASLt wants A and B of one dtype and no bf16 output from f32 inputs: those mixes go through f32
// buffers.
//
// Algorithm choice (autotuning, opt-in with VEOMNI_GEMM_AUTOTUNE=1). Like torch.backends.cudnn.benchmark, the first
// call of each plan key on the plain matmul path can time up to kCandidates of the heuristic's results on its real
// operands (kernels/cuda/gemm_autotune.cc) and keep the fastest with the plan; later calls pay nothing. It is off by
// default: on an H100 the timed pick ran 0.88-1.11x the speed of the heuristic's first pick on the 16 shapes
// bench/kernels_cuda.cc times (the 0.6B layer and head GEMMs, the 30B-A3B q_proj and lm_head) and the end-to-end
// step did not change (an earlier profile that suggested a
// poor NT pick had measured warm-up calls), while timing makes runs choose differently and differ in the last bits.
// The trials never leave a trace in the result: a GEMM that reads its output (beta != 0) or whose output overlaps an
// input runs its trials into a scratch D (cuBLASLt allows C != D), and one that overwrites its output is then run
// for real. The grouped GEMMs see a new row count per expert and step, so timing each key would never end: they take
// the heuristic's first pick, or a timed choice where the exact key was timed by a plain matmul.
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/gemm_autotune.h"
#include "kernels/cuda/gemm_skinny.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

// One row-major GEMM: c[m, n] = alpha * op(a) @ op(b) + beta * c, op(a) [m, k], op(b) [k, n]; leading dimensions
// are the row strides of the stored matrices.
struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  bool trans_a = false;
  const void* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  void* c = nullptr;
  int64_t ldc = 0;
  const void* c_in = nullptr;  // what beta multiplies when it is not c (an addend of c's layout); null: c itself
  cudaDataType_t input_type = CUDA_R_32F;  // a and b
  cudaDataType_t output_type = CUDA_R_32F;
  float alpha = 1.0f;
  float beta = 0.0f;
  Device device;  // of the operands (where autotuning's scratch output goes)
};

// Largest power of two (up to 256) dividing the address: what cuBLASLt's kernels may assume about alignment.
uint32_t alignment_of(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  return v == 0 ? 256u : static_cast<uint32_t>(std::min<uintptr_t>(v & (~v + 1), 256));
}

// Everything the descriptors and the algorithm choice depend on. `accumulates` (beta != 0: the output is read too)
// changes no descriptor, but it changes the memory traffic, so the timed choice may differ.
struct PlanKey {
  int64_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b;
  cudaDataType_t input_type, output_type;
  uint32_t align_a, align_b, align_c;
  bool accumulates;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const {
    size_t h = 1469598103934665603ull;
    const auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<uint64_t>(key.m));
    mix(static_cast<uint64_t>(key.n));
    mix(static_cast<uint64_t>(key.k));
    mix(static_cast<uint64_t>(key.lda));
    mix(static_cast<uint64_t>(key.ldb));
    mix(static_cast<uint64_t>(key.ldc));
    mix((key.trans_a ? 1u : 0u) | (key.trans_b ? 2u : 0u) | (key.accumulates ? 4u : 0u));
    mix(static_cast<uint64_t>(key.input_type) << 8 | static_cast<uint64_t>(key.output_type));
    mix(static_cast<uint64_t>(key.align_a) << 32 | static_cast<uint64_t>(key.align_b) << 16 | key.align_c);
    return h;
  }
};

// Heuristic results asked for (and timed, when autotuning); the ranking's tail is rarely the fastest.
constexpr int kCandidates = 8;

// cuBLASLt descriptors and the algorithm choice of one problem shape. The heuristic costs microseconds per query,
// so plans are kept. Grouped GEMMs see a new row count per expert and step, but only a few thousand distinct ones
// (rows per expert x the model's GEMM shapes), so after the first steps every lookup hits; the bound (a few KiB of
// host memory per plan) only guards against unbounded growth.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;
  // The heuristic's ranking, best first, and how many of them there are (at least one). Fixed arrays, not standard
  // containers: nvcc 13 fails an internal assertion destroying containers of cuBLASLt's anonymous structs.
  cublasLtMatmulHeuristicResult_t candidates[kCandidates] = {};
  size_t candidate_count = 0;
  bool timed = false;                 // autotuned: timed_algo is the fastest candidate
  cublasLtMatmulAlgo_t timed_algo{};

  // What a call uses now: the timed choice while autotuning is on, else the heuristic's first pick.
  const cublasLtMatmulAlgo_t& algo() const {
    return timed && gemm_autotune_enabled() ? timed_algo : candidates[0].algo;
  }

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Destroy calls only free host memory; their status is of no use in a destructor.
    if (layout_c) (void)cublasLtMatrixLayoutDestroy(layout_c);
    if (layout_b) (void)cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a) (void)cublasLtMatrixLayoutDestroy(layout_a);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

constexpr size_t kMaxPlans = size_t{1} << 15;

std::mutex g_plans_mutex;
std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> g_plans;

// cuBLASLt is column-major: a row-major [r, c] matrix with row stride ld is the column-major [c, r] one. So
// c^T = op(b)^T op(a)^T is computed with cuBLASLt's A := b and B := a, and their transposes kept.
std::shared_ptr<Plan> make_plan(const PlanKey& key) {
  auto plan = std::make_shared<Plan>();
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  // Stored shapes, column-major: b is [n, k] (or [k, n] transposed), a is [k, m] (or [m, k]), c is [n, m].
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  VEOMNI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_a, key.input_type, key.trans_b ? u(key.k) : u(key.n),
                                                 key.trans_b ? u(key.n) : u(key.k), key.ldb));
  VEOMNI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_b, key.input_type, key.trans_a ? u(key.m) : u(key.k),
                                                 key.trans_a ? u(key.k) : u(key.m), key.lda));
  VEOMNI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_c, key.output_type, u(key.n), u(key.m), key.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  VEOMNI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t workspace_bytes = 0;
  cuda_rt::cublas_workspace(&workspace_bytes);
  const auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t size) {
    const cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size);
    if (status != CUBLAS_STATUS_SUCCESS) {
      (void)cublasLtMatmulPreferenceDestroy(pref);
      VEOMNI_CUBLAS_CHECK(status);
    }
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align_b, sizeof key.align_b);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align_a, sizeof key.align_a);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align_c, sizeof key.align_c);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align_c, sizeof key.align_c);
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(cuda_rt::cublaslt(), plan->desc, plan->layout_a, plan->layout_b, plan->layout_c,
                                     plan->layout_c, pref, kCandidates, results, &found);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  for (int i = 0; status == CUBLAS_STATUS_SUCCESS && i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->candidates[plan->candidate_count++] = results[i];
  if (plan->candidate_count == 0)
    throw Error(fmt::format("cuBLASLt has no algorithm for a GEMM of m={} n={} k={} (lda {} ldb {} ldc {}, trans {}/{}, "
                            "input type {}, output type {}): {}",
                            key.m, key.n, key.k, key.lda, key.ldb, key.ldc, key.trans_a, key.trans_b,
                            static_cast<int>(key.input_type), static_cast<int>(key.output_type),
                            cublasLtGetStatusString(status)));
  return plan;
}

// Where a GEMM runs: a stream and the cuBLASLt workspace that belongs to it.
struct Lane {
  cudaStream_t stream;
  void* workspace;
  size_t workspace_bytes;
};

Lane main_lane() {
  Lane lane{cuda_rt::stream(), nullptr, 0};
  lane.workspace = cuda_rt::cublas_workspace(&lane.workspace_bytes);
  return lane;
}

// Spreads independent GEMMs (the groups of a grouped GEMM) over the compute stream and the side streams, so that
// several small ones run at once. Joined back into the compute stream by join() (or, when an exception unwinds, by
// the destructor).
class Lanes {
 public:
  explicit Lanes(size_t jobs) : spread_(jobs > 1) {
    if (spread_) cuda_rt::fork_side_streams();
  }
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;
  ~Lanes() {
    if (!spread_) return;
    try {
      cuda_rt::join_side_streams();
    } catch (const Error&) {
      // Already unwinding from the error that stopped the GEMMs; that one is reported.
    }
  }

  Lane at(size_t job) const {
    const int slot = spread_ ? static_cast<int>(job % (cuda_rt::kSideStreams + 1)) : 0;
    if (slot == 0) return main_lane();
    Lane lane{cuda_rt::side_stream(slot - 1), nullptr, 0};
    lane.workspace = cuda_rt::side_cublas_workspace(slot - 1, &lane.workspace_bytes);
    return lane;
  }

  void join() {
    if (!spread_) return;
    spread_ = false;
    cuda_rt::join_side_streams();
  }

 private:
  bool spread_;
};

cudaDataType_t cuda_type(DType dtype) { return dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

size_t elem_size(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }

const char* type_name(cudaDataType_t type) { return type == CUDA_R_16BF ? "bf16" : "f32"; }

// The bytes [first, last) of a stored row-major matrix: `rows` rows of `cols` elements, `ld` elements apart.
struct Span {
  uintptr_t first, last;
  size_t bytes() const { return last - first; }
  bool overlaps(const Span& other) const { return first < other.last && other.first < last; }
};

Span span_of(const void* p, int64_t rows, int64_t cols, int64_t ld, cudaDataType_t type) {
  const auto first = reinterpret_cast<uintptr_t>(p);
  return {first, first + static_cast<uintptr_t>((rows - 1) * ld + cols) * elem_size(type)};
}

Span output_span(const Gemm& g) { return span_of(g.c, g.m, g.n, g.ldc, g.output_type); }

bool output_overlaps_inputs(const Gemm& g) {
  const Span a = g.trans_a ? span_of(g.a, g.k, g.m, g.lda, g.input_type) : span_of(g.a, g.m, g.k, g.lda, g.input_type);
  const Span b = g.trans_b ? span_of(g.b, g.n, g.k, g.ldb, g.input_type) : span_of(g.b, g.k, g.n, g.ldb, g.input_type);
  const Span c = output_span(g);
  return c.overlaps(a) || c.overlaps(b);
}

// Times the plan's candidates on g's own operands and keeps the fastest. A GEMM that overwrites its output runs the
// trials in place (its real call then writes the result); one that reads its output or overlaps an input runs them
// into a scratch D of the output's extent.
void time_candidates(Plan& plan, const Gemm& g, const Lane& lane) {
  const bool in_place = (g.beta == 0.0f || g.c_in) && !output_overlaps_inputs(g);
  // cuBLASLt's A and B are our b and a (see make_plan).
  const MatmulTrial trial{.desc = plan.desc,
                          .alpha = &g.alpha,
                          .a = g.b,
                          .layout_a = plan.layout_a,
                          .b = g.a,
                          .layout_b = plan.layout_b,
                          .beta = &g.beta,
                          .c = g.c_in ? g.c_in : g.c,
                          .layout_c = plan.layout_c,
                          .d = in_place ? g.c : nullptr,
                          .scratch_bytes = in_place ? 0 : output_span(g).bytes(),
                          .device = g.device,
                          .workspace = lane.workspace,
                          .workspace_bytes = lane.workspace_bytes,
                          .stream = lane.stream};
  const std::string what = fmt::format("{}{} m={} n={} k={} {}->{}{}", g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N',
                                       g.m, g.n, g.k, type_name(g.input_type), type_name(g.output_type),
                                       g.beta != 0.0f ? " accumulating" : "");
  const std::span<const cublasLtMatmulHeuristicResult_t> candidates(plan.candidates, plan.candidate_count);
  plan.timed_algo = candidates[fastest_candidate(trial, candidates, what)].algo;
  plan.timed = true;
}

// Makes room in the plan cache: an untimed plan costs microseconds to make again, a timed one a round of trials.
void forget_untimed_plans() {
  std::erase_if(g_plans, [](const auto& entry) { return !entry.second->timed; });
  if (g_plans.size() >= kMaxPlans) g_plans.clear();
}

// Whether the first call of a plan key may time its candidates: plain matmuls may, grouped GEMMs only reuse a choice
// timed for the exact key (see the file comment).
enum class Autotune { allowed, reuse_only };

std::shared_ptr<const Plan> plan_for(const PlanKey& key, const Gemm& g, const Lane& lane, Autotune autotune) {
  const bool time_now = autotune == Autotune::allowed && gemm_autotune_enabled();
  std::lock_guard lock(g_plans_mutex);
  const auto it = g_plans.find(key);
  if (it != g_plans.end() && (it->second->timed || !time_now)) return it->second;
  // A key known only untimed (from a grouped GEMM, or while autotuning was off) gets a new plan: published plans are
  // immutable, as calls on other threads may hold them.
  std::shared_ptr<Plan> plan = make_plan(key);
  if (time_now) time_candidates(*plan, g, lane);
  if (g_plans.size() >= kMaxPlans) forget_untimed_plans();
  g_plans[key] = plan;
  return plan;
}

void run(const Gemm& g, const Lane& lane, Autotune autotune) {
  if (g.m == 0 || g.n == 0) return;
  const PlanKey key{.m = g.m,
                    .n = g.n,
                    .k = g.k,
                    .lda = g.lda,
                    .ldb = g.ldb,
                    .ldc = g.ldc,
                    .trans_a = g.trans_a,
                    .trans_b = g.trans_b,
                    .input_type = g.input_type,
                    .output_type = g.output_type,
                    .align_a = alignment_of(g.a),
                    .align_b = alignment_of(g.b),
                    .align_c = std::min(alignment_of(g.c), alignment_of(g.c_in ? g.c_in : g.c)),
                    .accumulates = g.beta != 0.0f};
  const std::shared_ptr<const Plan> plan = plan_for(key, g, lane, autotune);
  VEOMNI_CUBLAS_CHECK(cublasLtMatmul(cuda_rt::cublaslt(), plan->desc, &g.alpha, g.b, plan->layout_a, g.a,
                                     plan->layout_b, &g.beta, g.c_in ? g.c_in : g.c, plan->layout_c, g.c,
                                     plan->layout_c, &plan->algo(),
                                     lane.workspace, lane.workspace_bytes, lane.stream));
}

void* offset(void* p, int64_t elements, cudaDataType_t type) {
  return static_cast<char*>(p) + elements * static_cast<int64_t>(elem_size(type));
}

Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor f = Tensor::empty(t.shape(), DType::F32, t.device());
  cast(t, f);
  return f;
}

// The two inputs in one dtype cuBLASLt multiplies together: as they are when they agree, else both f32.
struct Inputs {
  Tensor a, b;
  cudaDataType_t type;
};

// The dtype common_inputs gives a and b.
cudaDataType_t common_input_type(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() ? cuda_type(a.dtype()) : CUDA_R_32F;
}

Inputs common_inputs(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return {a, b, cuda_type(a.dtype())};
  return {as_f32(a), as_f32(b), CUDA_R_32F};
}

// Whether Output writes through an f32 stand-in: f32 inputs meeting a bf16 output.
bool output_is_staged(cudaDataType_t input_type, const Tensor& out) {
  return input_type == CUDA_R_32F && out.dtype() == DType::BF16;
}

// Where cuBLASLt writes: the output itself, or an f32 stand-in when f32 inputs meet a bf16 output (then the old
// values are brought in first when they are read, and the result is cast back by finish()).
class Output {
 public:
  Output(Tensor& out, cudaDataType_t input_type, bool reads_old) : out_(out) {
    staged_ = output_is_staged(input_type, out);
    if (!staged_) {
      target_ = out;
      return;
    }
    target_ = Tensor::empty(out.shape(), DType::F32, out.device());
    if (reads_old) cast(out, target_);
  }
  void* data() const { return target_.raw_data(); }
  cudaDataType_t type() const { return cuda_type(target_.dtype()); }
  void finish() {
    if (staged_) cast(target_, out_);
  }

 private:
  Tensor& out_;
  Tensor target_;
  bool staged_ = false;
};

// out = beta * out when the inner dimension is empty (cuBLASLt rejects k = 0); beta = 0 overwrites, NaN included.
void scale_output(void* data, int64_t rows, int64_t cols, DType dtype, Device device, float beta) {
  const size_t bytes = static_cast<size_t>(rows * cols) * dtype_size(dtype);
  if (bytes == 0) return;
  if (beta == 0.0f) {
    VEOMNI_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, cuda_rt::stream()));
    return;
  }
  Tensor view = Tensor::from_blob(data, {rows, cols}, dtype, device);
  if (beta != 1.0f) scale_(view, beta);
}

// ---------------------------------------------------------------- many GEMMs at once

// cuBLAS handle of the grouped API (cuBLASLt has none): on the compute stream, sharing its workspace (the two
// libraries' calls are ordered by the stream). Never destroyed, like the runtime.
cublasHandle_t grouped_handle() {
  static std::once_flag once;
  static cublasHandle_t handle = nullptr;
  std::call_once(once, [] {
    VEOMNI_CUBLAS_CHECK(cublasCreate(&handle));
    VEOMNI_CUBLAS_CHECK(cublasSetStream(handle, cuda_rt::stream()));
    size_t bytes = 0;
    void* workspace = cuda_rt::cublas_workspace(&bytes);
    VEOMNI_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, bytes));
  });
  return handle;
}

// The device arrays of A, B and C pointers the grouped API reads, written by a kernel whose parameters carry them
// (no host buffer has to outlive the call).
constexpr int kPointersPerLaunch = 128;
struct PointerChunk {
  const void* a[kPointersPerLaunch];
  const void* b[kPointersPerLaunch];
  void* c[kPointersPerLaunch];
};

__global__ void store_pointers(PointerChunk chunk, int count, const void** a, const void** b, void** c) {
  const int i = threadIdx.x;
  if (i >= count) return;
  a[i] = chunk.a[i];
  b[i] = chunk.b[i];
  c[i] = chunk.c[i];
}

// Input/output dtype pairs the grouped API turned down once: not asked again.
std::mutex g_unsupported_mutex;
std::vector<std::pair<cudaDataType_t, cudaDataType_t>> g_unsupported;

bool known_unsupported(cudaDataType_t in, cudaDataType_t out) {
  std::lock_guard lock(g_unsupported_mutex);
  return std::find(g_unsupported.begin(), g_unsupported.end(), std::pair{in, out}) != g_unsupported.end();
}

// VEOMNI_GROUPED_GEMM=loop (or set_grouped_gemm_loop) runs grouped GEMMs as one cuBLASLt call per group, to compare
// the two in benchmarks.
std::atomic<bool> g_grouped_api{[] {
  const char* mode = std::getenv("VEOMNI_GROUPED_GEMM");
  return !(mode && std::strcmp(mode, "loop") == 0);
}()};

bool grouped_api_enabled() { return g_grouped_api.load(std::memory_order_relaxed); }

// All jobs (one dtype pair) in one cublasGemmGroupedBatchedEx call, each job a group of one problem. Returns false
// when cuBLAS does not take this dtype pair; then nothing was computed.
bool run_grouped_api(const std::vector<Gemm>& jobs, Device device) {
  const cudaDataType_t in = jobs.front().input_type, out = jobs.front().output_type;
  if (!grouped_api_enabled() || known_unsupported(in, out)) return false;
  const int64_t count = static_cast<int64_t>(jobs.size());
  // The same column-major view as run(): cuBLAS's A is our b, its B our a.
  std::vector<cublasOperation_t> op_a(jobs.size()), op_b(jobs.size());
  std::vector<int64_t> m(jobs.size()), n(jobs.size()), k(jobs.size()), lda(jobs.size()), ldb(jobs.size()),
      ldc(jobs.size()), ones(jobs.size(), 1);
  std::vector<float> alpha(jobs.size()), beta(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Gemm& g = jobs[j];
    op_a[j] = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    op_b[j] = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    m[j] = g.n;
    n[j] = g.m;
    k[j] = g.k;
    lda[j] = g.ldb;
    ldb[j] = g.lda;
    ldc[j] = g.ldc;
    alpha[j] = g.alpha;
    beta[j] = g.beta;
  }
  const cudaStream_t stream = cuda_rt::stream();
  const Tensor pointers = Tensor::empty({3, count}, DType::I64, device);
  auto** c_array = static_cast<void**>(pointers.raw_data()) + 2 * count;
  auto** a_array = static_cast<const void**>(pointers.raw_data());
  const void** b_array = a_array + count;
  for (int64_t first = 0; first < count; first += kPointersPerLaunch) {
    PointerChunk chunk{};
    const int in_chunk = static_cast<int>(std::min<int64_t>(kPointersPerLaunch, count - first));
    for (int i = 0; i < in_chunk; ++i) {
      chunk.a[i] = jobs[static_cast<size_t>(first + i)].b;
      chunk.b[i] = jobs[static_cast<size_t>(first + i)].a;
      chunk.c[i] = jobs[static_cast<size_t>(first + i)].c;
    }
    store_pointers<<<1, kPointersPerLaunch, 0, stream>>>(chunk, in_chunk, a_array + first, b_array + first,
                                                          c_array + first);
    VEOMNI_CUDA_LAUNCH_CHECK();
  }
  const cublasStatus_t status = cublasGemmGroupedBatchedEx_64(
      grouped_handle(), op_a.data(), op_b.data(), m.data(), n.data(), k.data(), alpha.data(), a_array, in, lda.data(),
      b_array, in, ldb.data(), beta.data(), c_array, out, ldc.data(), count, ones.data(), CUBLAS_COMPUTE_32F);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    std::lock_guard lock(g_unsupported_mutex);
    g_unsupported.emplace_back(in, out);
    return false;
  }
  VEOMNI_CUBLAS_CHECK(status);
  return true;
}

// Runs independent GEMMs of one dtype pair: through the grouped API where cuBLAS takes it, else one cuBLASLt call
// each, spread over the side streams when `spread` (measured faster for the weight gradients, whose f32 outputs make
// each GEMM memory-bound, and slower for the forward ones).
void run_all(const std::vector<Gemm>& jobs, bool spread, Device device) {
  if (jobs.empty()) return;
  if (jobs.size() > 1 && run_grouped_api(jobs, device)) return;
  Lanes lanes(spread ? jobs.size() : 1);
  for (size_t j = 0; j < jobs.size(); ++j) run(jobs[j], lanes.at(j), Autotune::reuse_only);
  lanes.join();
}

}  // namespace

void set_grouped_gemm_loop(bool loop) { g_grouped_api.store(!loop, std::memory_order_relaxed); }

void matmul_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& out) {
  if (x.dim(0) == 0) return;
  if (skinny_swiglu_applies(x, gate_up, out)) return skinny_swiglu(x, gate_up, out);
  Tensor product = Tensor::empty({x.dim(0), gate_up.dim(0)}, out.dtype(), out.device());
  matmul(x, false, gate_up, true, product, 1.0f, 0.0f, Tensor());
  swiglu_fused_forward(product, out);
}

// The norm's output as rmsnorm_forward writes it, for the paths that run the norm and the GEMM as two ops.
Tensor normalised(const Tensor& x, const Tensor& gain, float eps) {
  Tensor normed = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  rmsnorm_forward(x, gain, eps, normed, rstd);
  return normed;
}

void rmsnorm_matmul(const Tensor& x, const Tensor& gain, float eps, const Tensor& w, Tensor& out) {
  if (x.dim(0) == 0) return;
  if (skinny_matmul_applies(x, false, w, true, out, 1.0f, 0.0f, &gain))
    return skinny_matmul(x, w, out, false, &gain, eps);
  matmul(normalised(x, gain, eps), false, w, true, out, 1.0f, 0.0f, Tensor());
}

void rmsnorm_matmul_swiglu(const Tensor& x, const Tensor& gain, float eps, const Tensor& gate_up, Tensor& out) {
  if (x.dim(0) == 0) return;
  if (skinny_swiglu_applies(x, gate_up, out, &gain)) return skinny_swiglu(x, gate_up, out, &gain, eps);
  matmul_swiglu(normalised(x, gain, eps), gate_up, out);
}

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, float alpha, float beta,
            const Tensor& addend) {
  const int64_t m = out.dim(0), n = out.dim(1), k = trans_a ? a.dim(0) : a.dim(1);
  if (m == 0 || n == 0) return;
  const bool skinny = k != 0 && skinny_matmul_applies(a, trans_a, b, trans_b, out, alpha, beta);
  // cuBLASLt reads an addend as its C (C != D); the paths that read out itself (an empty inner dimension, the skinny
  // kernel, an f32 stand-in for a bf16 output) get it copied into out first.
  const bool staged = output_is_staged(common_input_type(a, b), out);
  const bool addend_as_c = addend.defined() && k != 0 && !skinny && !staged;
  if (addend.defined() && !addend_as_c) out.copy_from(addend);
  if (k == 0) return scale_output(out.raw_data(), m, n, out.dtype(), out.device(), beta);
  if (skinny) return skinny_matmul(a, b, out, beta != 0.0f);
  const Inputs in = common_inputs(a, b);
  Output target(out, in.type, beta != 0.0f && !addend_as_c);
  Gemm g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = in.a.raw_data();
  g.lda = a.dim(1);
  g.trans_a = trans_a;
  g.b = in.b.raw_data();
  g.ldb = b.dim(1);
  g.trans_b = trans_b;
  g.c = target.data();
  g.ldc = n;
  g.c_in = addend_as_c ? addend.raw_data() : nullptr;
  g.input_type = in.type;
  g.output_type = target.type();
  g.alpha = alpha;
  g.beta = beta;
  g.device = out.device();
  run(g, main_lane(), Autotune::allowed);
  target.finish();
}

void grouped_matmul(const Tensor& x, const Tensor& w, bool trans_w, const std::vector<int64_t>& group_sizes,
                    Tensor& out) {
  const int64_t k = x.dim(1), n = out.dim(1);
  if (out.numel() == 0) return;
  if (k == 0) return scale_output(out.raw_data(), out.dim(0), n, out.dtype(), out.device(), 0.0f);
  const Inputs in = common_inputs(x, w);
  Output target(out, in.type, false);
  std::vector<Gemm> jobs;
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes.size(); ++e) {
    const int64_t rows = group_sizes[e];
    if (rows == 0) continue;
    Gemm g;
    g.m = rows;
    g.n = n;
    g.k = k;
    g.a = offset(in.a.raw_data(), row * k, in.type);
    g.lda = k;
    g.b = offset(in.b.raw_data(), static_cast<int64_t>(e) * n * k, in.type);
    g.ldb = trans_w ? k : n;
    g.trans_b = trans_w;
    g.c = offset(target.data(), row * n, target.type());
    g.ldc = n;
    g.input_type = in.type;
    g.output_type = target.type();
    g.device = out.device();
    jobs.push_back(g);
    row += rows;
  }
  run_all(jobs, false, out.device());
  target.finish();
}

void grouped_matmul_weight_grad(const Tensor& dy, const Tensor& x, const std::vector<int64_t>& group_sizes, Tensor& dw,
                                bool accumulate) {
  const int64_t n = dy.dim(1), k = x.dim(1);
  if (dw.numel() == 0) return;
  const Inputs in = common_inputs(dy, x);
  Output target(dw, in.type, accumulate);
  std::vector<Gemm> jobs;
  int64_t row = 0;
  for (size_t e = 0; e < group_sizes.size(); ++e) {
    const int64_t rows = group_sizes[e];
    void* dw_e = offset(target.data(), static_cast<int64_t>(e) * n * k, target.type());
    if (rows == 0) {
      // An expert that got no tokens has a zero gradient (kept as it is when accumulating).
      if (!accumulate)
        VEOMNI_CUDA_CHECK(
            cudaMemsetAsync(dw_e, 0, static_cast<size_t>(n * k) * elem_size(target.type()), cuda_rt::stream()));
      continue;
    }
    Gemm g;  // dw[e] (+)= dy_e^T x_e
    g.m = n;
    g.n = k;
    g.k = rows;
    g.a = offset(in.a.raw_data(), row * n, in.type);
    g.lda = n;
    g.trans_a = true;
    g.b = offset(in.b.raw_data(), row * k, in.type);
    g.ldb = k;
    g.c = dw_e;
    g.ldc = k;
    g.input_type = in.type;
    g.output_type = target.type();
    g.beta = accumulate ? 1.0f : 0.0f;
    g.device = dw.device();
    jobs.push_back(g);
    row += rows;
  }
  run_all(jobs, true, dw.device());
  target.finish();
}

}  // namespace veomni::ops::cuda
