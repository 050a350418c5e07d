// Op-level profiler: times every dispatched op (and NCCL collective) into a per-name table, with CUDA events on the
// compute stream or steady_clock on the CPU; on with VEOMNI_PROFILE_OPS=1, one branch per call when off.
//
// CUDA timings are resolved lazily: event pairs are pooled and read back only once they have completed (a
// non-blocking sweep every few hundred calls) or at op_profile_flush(), so profiling adds no host sync to a step.
// With the variable set, the report is printed to stderr at exit on rank 0 (OMPI_COMM_WORLD_RANK) and written to
// "<VEOMNI_PROFILE_OPS_OUT>.rank<r>" on every rank when that variable names a path.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace veomni {

namespace op_profiler_detail {
// Set once from VEOMNI_PROFILE_OPS at load time (and by the test setter); read on every op call.
extern bool g_enabled;
}  // namespace op_profiler_detail

inline bool op_profile_enabled() { return op_profiler_detail::g_enabled; }

// What one table row is keyed by: the op's name (a string literal), up to four shape numbers that split it into
// shape classes (e.g. a GEMM's m, n, k), and the work one call does, for the rate column.
struct OpKey {
  const char* op = "";
  std::array<int64_t, 4> dims{};
  int ndims = 0;
  double flops = 0.0;  // floating-point operations per call (compute ops), 0 when not modelled
  double bytes = 0.0;  // bytes moved per call (collectives), 0 when not modelled
};

// One row of the table: all calls of one key.
struct OpProfileRow {
  std::string name;  // "matmul NT 4096x3072x1024" (op, then the shape class)
  int64_t calls = 0;
  double total_ms = 0.0;
  double flops = 0.0;  // summed over the calls
  double bytes = 0.0;
};

// The bracket of one op call: starts timing on construction, records the call on destruction.
class OpTimer {
 public:
  OpTimer(const OpKey& key, Device device);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  int slot_ = -1;  // the pending CUDA event pair, or -1 on the CPU
  int64_t cpu_start_ns_ = 0;
  OpKey key_;
};

// Runs `run` bracketed by an OpTimer keyed by make_key() when profiling is on; only the branch otherwise (the key is
// not even built).
template <typename MakeKey, typename Run>
decltype(auto) op_profile_timed(Device device, MakeKey&& make_key, Run&& run) {
  if (!op_profile_enabled()) [[likely]]
    return run();
  const OpTimer timer(make_key(), device);
  return run();
}

// Waits for the pending CUDA timings (one host sync) and folds them into the table.
void op_profile_flush();
// Flushes, then returns the rows sorted by total time, longest first.
std::vector<OpProfileRow> op_profile_rows();
// Flushes, then renders the table: op, calls, total ms, % of the op time, mean us, rate (TFLOP/s or GB/s), followed
// by the profiled span (first op start to last op end) against the summed op time; the difference is host overhead,
// launch gaps and unprofiled device work.
std::string op_profile_report();
// Drops everything recorded so far (e.g. after warm-up steps), waiting for pending CUDA timings first.
void op_profile_reset();
// A run's settings (train.op_profile), replacing the environment's: profiling on or off, the report at exit on rank 0
// and, when report_path is not empty, in <report_path>.rank<r> on every rank. Call before the first op.
void op_profile_configure(bool enabled, const std::string& report_path);
// Turns profiling on or off regardless of VEOMNI_PROFILE_OPS, for tests; does not install the exit report.
void op_profile_set_enabled_for_testing(bool enabled);

}  // namespace veomni
