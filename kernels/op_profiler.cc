// Op-level profiler: the per-key table, the pooled CUDA event pairs resolved lazily, the text report and the exit hook.
#include "kernels/op_profiler.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "io/atomic_file.h"

#ifdef VEOMNI_WITH_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace veomni {

namespace {

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

}  // namespace

namespace op_profiler_detail {
bool g_enabled = env_flag("VEOMNI_PROFILE_OPS");
}  // namespace op_profiler_detail

namespace {

// Whether the report is printed at exit and where every rank also writes it: the environment's at load time, a
// run's config once op_profile_configure says so (before the first op).
bool g_report_at_exit = op_profiler_detail::g_enabled;
std::string g_report_path = [] {
  const char* path = std::getenv("VEOMNI_PROFILE_OPS_OUT");
  return std::string(path ? path : "");
}();

}  // namespace

namespace {

// Resolve the completed prefix of the pending CUDA calls every this many calls (non-blocking).
constexpr size_t kSweepEvery = 256;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A row's identity: the key's name and shape class, and whether it ran on the GPU.
struct RowId {
  std::string_view op;
  std::array<int64_t, 4> dims;
  int ndims;
  bool cuda;
  bool operator==(const RowId&) const = default;
};

struct RowIdHash {
  size_t operator()(const RowId& id) const {
    size_t h = std::hash<std::string_view>{}(id.op) ^ (id.cuda ? 0x9e3779b97f4a7c15ULL : 0);
    for (int i = 0; i < id.ndims; ++i) h = h * 1000003u ^ std::hash<int64_t>{}(id.dims[static_cast<size_t>(i)]);
    return h;
  }
};

struct Row {
  OpKey key;
  bool cuda = false;
  int64_t calls = 0;
  double total_ms = 0.0;
};

// First op start to last op end, per device kind.
struct Span {
  bool started = false;
  double ms = 0.0;
  int64_t cpu_first_ns = 0;
};

#ifdef VEOMNI_WITH_CUDA
struct EventPair {
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
};
struct PendingCall {
  int slot;
  size_t row;
};
#endif

struct State {
  std::mutex mutex;
  std::vector<Row> rows;
  std::unordered_map<RowId, size_t, RowIdHash> index;
  Span cpu_span, cuda_span;
#ifdef VEOMNI_WITH_CUDA
  std::vector<EventPair> pairs;
  std::vector<int> free_slots;
  std::deque<PendingCall> pending;
  cudaEvent_t span_start = nullptr;
#endif
};

// Never destroyed: the exit report may run after other static objects are gone.
State& state() {
  static State* s = new State;
  return *s;
}

size_t row_for(State& s, const OpKey& key, bool cuda) {
  const RowId id{key.op, key.dims, key.ndims, cuda};
  const auto found = s.index.find(id);
  if (found != s.index.end()) return found->second;
  s.rows.push_back(Row{key, cuda, 0, 0.0});
  s.index.emplace(id, s.rows.size() - 1);
  return s.rows.size() - 1;
}

void add_call(Row& row, double ms) {
  row.calls += 1;
  row.total_ms += ms;
}

#ifdef VEOMNI_WITH_CUDA

int acquire_slot(State& s) {
  if (!s.free_slots.empty()) {
    const int slot = s.free_slots.back();
    s.free_slots.pop_back();
    return slot;
  }
  EventPair pair;
  VEOMNI_CUDA_CHECK(cudaEventCreate(&pair.start));
  VEOMNI_CUDA_CHECK(cudaEventCreate(&pair.end));
  s.pairs.push_back(pair);
  return static_cast<int>(s.pairs.size()) - 1;
}

// Folds the pending calls into the table in order, stopping at the first one not yet finished unless `wait`.
void resolve_pending(State& s, bool wait) {
  while (!s.pending.empty()) {
    const PendingCall call = s.pending.front();
    const EventPair& pair = s.pairs[static_cast<size_t>(call.slot)];
    if (wait) {
      VEOMNI_CUDA_CHECK(cudaEventSynchronize(pair.end));
    } else {
      const cudaError_t status = cudaEventQuery(pair.end);
      if (status == cudaErrorNotReady) return;
      VEOMNI_CUDA_CHECK(status);
    }
    float ms = 0.0f;
    VEOMNI_CUDA_CHECK(cudaEventElapsedTime(&ms, pair.start, pair.end));
    add_call(s.rows[call.row], ms);
    float since_start = 0.0f;
    VEOMNI_CUDA_CHECK(cudaEventElapsedTime(&since_start, s.span_start, pair.end));
    s.cuda_span.ms = std::max(s.cuda_span.ms, static_cast<double>(since_start));
    s.free_slots.push_back(call.slot);
    s.pending.pop_front();
  }
}

int begin_cuda(State& s) {
  if (!s.cuda_span.started) {
    if (s.span_start == nullptr) VEOMNI_CUDA_CHECK(cudaEventCreate(&s.span_start));
    VEOMNI_CUDA_CHECK(cudaEventRecord(s.span_start, cuda_rt::stream()));
    s.cuda_span.started = true;
  }
  const int slot = acquire_slot(s);
  VEOMNI_CUDA_CHECK(cudaEventRecord(s.pairs[static_cast<size_t>(slot)].start, cuda_rt::stream()));
  return slot;
}

void end_cuda(State& s, int slot, size_t row) {
  VEOMNI_CUDA_CHECK(cudaEventRecord(s.pairs[static_cast<size_t>(slot)].end, cuda_rt::stream()));
  s.pending.push_back({slot, row});
  if (s.pending.size() % kSweepEvery == 0) resolve_pending(s, false);
}

void flush_locked(State& s) { resolve_pending(s, true); }

#else

void flush_locked(State&) {}

#endif

void reset_locked(State& s) {
  flush_locked(s);
  s.rows.clear();
  s.index.clear();
  s.cpu_span = Span{};
  s.cuda_span = Span{};
}

std::string row_name(const OpKey& key) {
  if (key.ndims == 0) return key.op;
  return fmt::format("{} {}", key.op, fmt::join(key.dims.begin(), key.dims.begin() + key.ndims, "x"));
}

std::vector<OpProfileRow> rows_locked(State& s, std::vector<bool>* cuda = nullptr) {
  flush_locked(s);
  std::vector<size_t> order(s.rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.rows[a].total_ms > s.rows[b].total_ms; });
  std::vector<OpProfileRow> out;
  for (size_t i : order) {
    const Row& r = s.rows[i];
    out.push_back({row_name(r.key), r.calls, r.total_ms, r.key.flops * static_cast<double>(r.calls),
                   r.key.bytes * static_cast<double>(r.calls)});
    if (cuda) cuda->push_back(r.cuda);
  }
  return out;
}

std::string rate_text(const OpProfileRow& row) {
  const double seconds = row.total_ms * 1e-3;
  if (seconds <= 0.0) return "";
  if (row.flops > 0.0) {
    const double per_second = row.flops / seconds;
    return per_second >= 1e12 ? fmt::format("{:.1f} TFLOP/s", per_second / 1e12)
                              : fmt::format("{:.2f} GFLOP/s", per_second / 1e9);
  }
  if (row.bytes > 0.0) return fmt::format("{:.1f} GB/s", row.bytes / seconds / 1e9);
  return "";
}

void append_table(std::string& out, const std::vector<OpProfileRow>& rows, const std::vector<bool>& cuda, bool on_cuda,
                  const Span& span) {
  double op_ms = 0.0;
  int64_t calls = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (cuda[i] == on_cuda) {
      op_ms += rows[i].total_ms;
      calls += rows[i].calls;
    }
  if (calls == 0) return;
  const char* device = on_cuda ? "cuda" : "cpu";
  out += fmt::format("op profile ({}, {} timings)\n", device, on_cuda ? "CUDA event" : "steady_clock");
  out += fmt::format("{:<44} {:>9} {:>12} {:>7} {:>11}  {}\n", "op", "calls", "total ms", "%", "mean us", "rate");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (cuda[i] != on_cuda) continue;
    const OpProfileRow& r = rows[i];
    out += fmt::format("{:<44} {:>9} {:>12.3f} {:>6.2f}% {:>11.2f}  {}\n", r.name, r.calls, r.total_ms,
                       op_ms > 0.0 ? 100.0 * r.total_ms / op_ms : 0.0, 1e3 * r.total_ms / static_cast<double>(r.calls),
                       rate_text(r));
  }
  const double gap = span.ms - op_ms;
  out += fmt::format(
      "{}: {} calls; profiled span {:.3f} ms (first op start to last op end), op time {:.3f} ms ({:.1f}% busy), "
      "gap {:.3f} ms (host overhead, launch gaps, unprofiled work)\n",
      device, calls, span.ms, op_ms, span.ms > 0.0 ? 100.0 * op_ms / span.ms : 0.0, gap);
}

// This process's rank as mpirun tells it (0 when not run under Open MPI).
int mpi_rank() {
  const char* value = std::getenv("OMPI_COMM_WORLD_RANK");
  return value ? std::atoi(value) : 0;
}

void report_at_exit() {
  try {
    const std::string report = op_profile_report();
    const int rank = mpi_rank();
    if (rank == 0) std::fputs(report.c_str(), stderr);
    if (!g_report_path.empty()) write_file_atomic(fmt::format("{}.rank{}", g_report_path, rank), report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "veomni op profiler: no report at exit: %s\n", e.what());
  }
}

// The exit report is installed at the first timed call, after the CUDA runtime has initialised, so that it runs
// before the runtime's own exit teardown (atexit handlers run in reverse order of registration).
void install_exit_report_once() {
  static const bool installed = g_report_at_exit && std::atexit(report_at_exit) == 0;
  (void)installed;
}

}  // namespace

OpTimer::OpTimer(const OpKey& key, Device device) : key_(key) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  install_exit_report_once();
#ifdef VEOMNI_WITH_CUDA
  if (device.is_cuda()) {
    slot_ = begin_cuda(s);
    return;
  }
#else
  (void)device;
#endif
  cpu_start_ns_ = now_ns();
  if (!s.cpu_span.started) {
    s.cpu_span.started = true;
    s.cpu_span.cpu_first_ns = cpu_start_ns_;
  }
}

OpTimer::~OpTimer() {
  const int64_t end_ns = now_ns();
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  try {
#ifdef VEOMNI_WITH_CUDA
    if (slot_ >= 0) {
      end_cuda(s, slot_, row_for(s, key_, true));
      return;
    }
#endif
    add_call(s.rows[row_for(s, key_, false)], static_cast<double>(end_ns - cpu_start_ns_) * 1e-6);
    s.cpu_span.ms = static_cast<double>(end_ns - s.cpu_span.cpu_first_ns) * 1e-6;
  } catch (const std::exception& e) {
    // A destructor must not throw; a failed event record loses this one timing.
    std::fprintf(stderr, "veomni op profiler: %s: %s\n", key_.op, e.what());
  }
}

void op_profile_flush() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  flush_locked(s);
}

std::vector<OpProfileRow> op_profile_rows() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return rows_locked(s);
}

std::string op_profile_report() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<bool> cuda;
  const std::vector<OpProfileRow> rows = rows_locked(s, &cuda);
  std::string out;
  append_table(out, rows, cuda, true, s.cuda_span);
  append_table(out, rows, cuda, false, s.cpu_span);
  if (out.empty()) out = "op profile: no op calls recorded\n";
  return out;
}

void op_profile_reset() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  reset_locked(s);
}

void op_profile_set_enabled_for_testing(bool enabled) { op_profiler_detail::g_enabled = enabled; }

void op_profile_configure(bool enabled, const std::string& report_path) {
  op_profiler_detail::g_enabled = enabled;
  g_report_at_exit = enabled;
  g_report_path = report_path;
}

}  // namespace veomni
