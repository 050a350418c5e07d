// Autotuning of the cuBLASLt GEMMs: the VEOMNI_GEMM_AUTOTUNE switch and the timing of the heuristic's candidates.
#include "kernels/cuda/gemm_autotune.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kWarmupRuns = 1;
constexpr int kTimedRuns = 3;

constexpr int kModeUnread = -1;
std::atomic<int> g_mode{kModeUnread};  // 0 off, 1 on
std::atomic<size_t> g_keys_tuned{0};
std::atomic<size_t> g_candidates_timed{0};

// A start/stop pair of timing events, destroyed with the object (also when a check throws).
class EventPair {
 public:
  EventPair() {
    VEOMNI_CUDA_CHECK(cudaEventCreate(&start_));
    const cudaError_t status = cudaEventCreate(&stop_);
    if (status != cudaSuccess) (void)cudaEventDestroy(start_);
    VEOMNI_CUDA_CHECK(status);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    (void)cudaEventDestroy(stop_);
    (void)cudaEventDestroy(start_);
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

cublasStatus_t launch(const MatmulTrial& t, void* d, const cublasLtMatmulAlgo_t& algo) {
  return cublasLtMatmul(cuda_rt::cublaslt(), t.desc, t.alpha, t.a, t.layout_a, t.b, t.layout_b, t.beta, t.c,
                        t.layout_c, d, t.layout_c, &algo, t.workspace, t.workspace_bytes, t.stream);
}

// Queues the warm-up and the timed runs of one candidate between the events; false when cuBLASLt rejects it.
bool queue_runs(const MatmulTrial& t, void* d, const cublasLtMatmulAlgo_t& algo, const EventPair& events) {
  for (int r = 0; r < kWarmupRuns; ++r)
    if (launch(t, d, algo) != CUBLAS_STATUS_SUCCESS) return false;
  VEOMNI_CUDA_CHECK(cudaEventRecord(events.start(), t.stream));
  for (int r = 0; r < kTimedRuns; ++r)
    if (launch(t, d, algo) != CUBLAS_STATUS_SUCCESS) return false;
  VEOMNI_CUDA_CHECK(cudaEventRecord(events.stop(), t.stream));
  return true;
}

// "algo 21 tile 18 stages 3": enough to tell the candidates apart in a log.
std::string algo_name(const cublasLtMatmulAlgo_t& algo) {
  int32_t id = -1;
  uint32_t tile = 0, stages = 0;
  size_t written = 0;
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written);
  (void)cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &written);
  return fmt::format("algo {} tile {} stages {}", id, tile, stages);
}

void log_choice(std::string_view what, std::span<const cublasLtMatmulHeuristicResult_t> candidates,
                const std::vector<float>& ms, size_t best) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  std::string all;
  for (size_t i = 0; i < candidates.size(); ++i)
    all += fmt::format("{}#{} {}: {}", i ? "; " : "", i, algo_name(candidates[i].algo),
                       ms[i] < 0.0f ? std::string("rejected") : fmt::format("{:.4f} ms", ms[i]));
  const std::string versus_first =
      ms[0] < 0.0f ? std::string("the heuristic's first pick was rejected")
                   : fmt::format("{:.2f}x the heuristic's first pick", static_cast<double>(ms[0] / ms[best]));
  spdlog::debug("GEMM autotune {}: candidate #{} of {} wins at {:.4f} ms, {} ({})", what, best, candidates.size(),
                ms[best], versus_first, all);
}

}  // namespace

bool gemm_autotune_from_env_value(const char* value) {
  if (value == nullptr || *value == '\0' || std::strcmp(value, "0") == 0) return false;
  if (std::strcmp(value, "1") == 0) return true;
  spdlog::warn("VEOMNI_GEMM_AUTOTUNE={} is neither 0 nor 1: GEMM autotuning stays off", value);
  return false;
}

bool gemm_autotune_enabled() {
  int mode = g_mode.load(std::memory_order_relaxed);
  if (mode == kModeUnread) {
    const int from_env = gemm_autotune_from_env_value(std::getenv("VEOMNI_GEMM_AUTOTUNE")) ? 1 : 0;
    // A concurrent set_gemm_autotune() wins over the environment.
    if (!g_mode.compare_exchange_strong(mode, from_env, std::memory_order_relaxed)) return mode == 1;
    return from_env == 1;
  }
  return mode == 1;
}

void set_gemm_autotune(bool enabled) { g_mode.store(enabled ? 1 : 0, std::memory_order_relaxed); }

GemmAutotuneStats gemm_autotune_stats() {
  return {g_keys_tuned.load(std::memory_order_relaxed), g_candidates_timed.load(std::memory_order_relaxed)};
}

size_t fastest_candidate(const MatmulTrial& trial, std::span<const cublasLtMatmulHeuristicResult_t> candidates,
                         std::string_view what) {
  g_keys_tuned.fetch_add(1, std::memory_order_relaxed);
  if (candidates.size() <= 1) return 0;
  // Trials that would read what they write (accumulation, aliasing) go to a scratch D, freed on return: every
  // trial is on `trial.stream`, and later work that reuses the block is queued after them.
  Tensor scratch;
  void* d = trial.d;
  if (d == nullptr) {
    try {
      scratch = Tensor::empty({static_cast<int64_t>(trial.scratch_bytes)}, DType::U8, trial.device);
    } catch (const Error& e) {
      spdlog::warn("GEMM autotune {}: no memory for the trials' output ({}); keeping the heuristic's first pick",
                   what, e.what());
      return 0;
    }
    d = scratch.raw_data();
  }
  std::vector<EventPair> events(candidates.size());
  std::vector<bool> ran(candidates.size(), false);
  for (size_t i = 0; i < candidates.size(); ++i) {
    ran[i] = queue_runs(trial, d, candidates[i].algo, events[i]);
    // A rejected launch may leave a (non-sticky) launch error behind: clear it so no later check reports it.
    if (!ran[i]) (void)cudaGetLastError();
  }
  std::vector<float> ms(candidates.size(), -1.0f);
  size_t best = candidates.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!ran[i]) continue;
    VEOMNI_CUDA_CHECK(cudaEventSynchronize(events[i].stop()));
    float elapsed = 0.0f;
    VEOMNI_CUDA_CHECK(cudaEventElapsedTime(&elapsed, events[i].start(), events[i].stop()));
    ms[i] = elapsed / kTimedRuns;
    g_candidates_timed.fetch_add(1, std::memory_order_relaxed);
    if (best == candidates.size() || ms[i] < ms[best]) best = i;
  }
  if (best == candidates.size()) {
    spdlog::warn("GEMM autotune {}: cuBLASLt rejected all {} candidates; keeping the heuristic's first pick", what,
                 candidates.size());
    return 0;
  }
  log_choice(what, candidates, ms, best);
  return best;
}

}  // namespace veomni::ops::cuda
