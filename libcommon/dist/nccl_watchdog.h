// Private to dist/nccl_communicator.cc: a thread that watches one NCCL communicator's collectives and ends the run
// when one has not completed within the collective timeout (a peer stopped answering) or NCCL reports an error.
#pragma once
#ifdef VEOMNI_WITH_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace veomni {

class NcclWatchdog {
 public:
  // group: the communicator's name; members: the world rank of each of its ranks; self: this process's world rank.
  NcclWatchdog(std::string group, std::vector<int> members, int self);
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // Host-side phase that waits for every member (ncclCommInitRank): watched from begin to end.
  void begin_host_phase(const char* op);
  void end_host_phase();
  // From now on a timeout aborts `comm` and asynchronous errors on it are watched.
  void attach(ncclComm_t comm);
  // Call after queueing collective `op` on `stream`: an event recorded there marks its completion.
  void issued(const char* op, cudaStream_t stream);

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    const char* op;
    int64_t seq;
    cudaEvent_t done;  // nullptr for a host phase
    Clock::time_point issued;
  };
  void run();
  // Drops the completed collectives at the front; returns false when the device is in a sticky error (then the
  // thread that waits on it reports it).
  bool retire_completed();
  [[noreturn]] void fail(const std::string& what);
  std::string peers() const;

  std::string group_;
  std::vector<int> members_;
  int self_;
  int device_ = 0;
  double timeout_;
  ncclComm_t comm_ = nullptr;
  int64_t seq_ = 0;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace veomni
#endif
