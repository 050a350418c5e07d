// The NCCL watchdog thread: polls the completion events of issued collectives (and NCCL's asynchronous error) a few
// times a second; a collective pending past the timeout aborts the communicator and ends the process with a message
// naming the group, the collective and the peers it waits for.
#include "dist/nccl_watchdog.h"

#ifdef VEOMNI_WITH_CUDA
#include "core/error.h"
#include "core/tool.h"
#include "dist/collective_timeout.h"

namespace veomni {

namespace {

// How often the thread looks: a stuck collective is reported at most this much after its deadline.
constexpr auto kPollInterval = std::chrono::milliseconds(200);

}  // namespace

NcclWatchdog::NcclWatchdog(std::string group, std::vector<int> members, int self)
    : group_(std::move(group)), members_(std::move(members)), self_(self), timeout_(collective_timeout_seconds()) {
  cudaGetDevice(&device_);
  thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (const Pending& p : pending_)
    if (p.done) cudaEventDestroy(p.done);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
}

void NcclWatchdog::begin_host_phase(const char* op) {
  std::lock_guard<std::mutex> guard(mutex_);
  pending_.push_back({op, ++seq_, nullptr, Clock::now()});
}

void NcclWatchdog::end_host_phase() {
  std::lock_guard<std::mutex> guard(mutex_);
  std::erase_if(pending_, [](const Pending& p) { return p.done == nullptr; });
}

void NcclWatchdog::attach(ncclComm_t comm) {
  std::lock_guard<std::mutex> guard(mutex_);
  comm_ = comm;
}

void NcclWatchdog::issued(const char* op, cudaStream_t stream) {
  std::lock_guard<std::mutex> guard(mutex_);
  cudaEvent_t done = nullptr;
  if (!spare_events_.empty()) {
    done = spare_events_.back();
    spare_events_.pop_back();
  } else if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) {
    return;  // the device is failing: the next CUDA call on the main thread reports it
  }
  if (cudaEventRecord(done, stream) != cudaSuccess) {
    spare_events_.push_back(done);
    return;
  }
  pending_.push_back({op, ++seq_, done, Clock::now()});
}

bool NcclWatchdog::retire_completed() {
  while (!pending_.empty() && pending_.front().done) {
    const cudaError_t state = cudaEventQuery(pending_.front().done);
    if (state == cudaErrorNotReady) return true;
    if (state != cudaSuccess) return false;
    spare_events_.push_back(pending_.front().done);
    pending_.pop_front();
  }
  return true;
}

std::string NcclWatchdog::peers() const {
  std::string out;
  for (int m : members_)
    if (m != self_) out += (out.empty() ? "" : ", ") + describe_world_rank(m);
  return out;
}

void NcclWatchdog::fail(const std::string& what) {
  // Aborting the communicator makes the kernels that wait for the missing peer return, so nothing keeps the GPU.
  if (comm_) ncclCommAbort(comm_);
  abort_process(what, kExitCheckFailed);
}

void NcclWatchdog::run() {
  cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kPollInterval, [this] { return stop_; });
    if (stop_) return;
    if (!retire_completed()) return;
    if (comm_) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        fail(fmt::format("NCCL reported an asynchronous error on group '{}': {} ({}); peers: {}", group_,
                         ncclGetErrorString(async), ncclGetLastError(comm_), peers()));
    }
    if (timeout_ <= 0) continue;
    for (const Pending& p : pending_) {
      const double waited = std::chrono::duration<double>(Clock::now() - p.issued).count();
      if (waited > timeout_)
        fail(fmt::format("collective {} #{} on group '{}' timed out after {:g} s (NCCL, counted from when it was "
                         "issued): waiting for {} (one of them did not arrive: stopped, dead or stuck). Hint: {} or "
                         "train.accelerator.dist_timeout sets the timeout in seconds",
                         p.op, p.seq, group_, timeout_, peers(), kCollectiveTimeoutEnv));
    }
  }
}

}  // namespace veomni
#endif
