// Collective communication on a group of ranks; MPI for CPU tensors now, NCCL for GPU tensors behind the same API.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace veomni {

// A collective that may still be running after the call that issued it returned (NCCL: on the communication
// stream). It keeps every tensor the collective reads or writes referenced until wait(), so that their memory cannot
// be handed to other work while the collective may still use it. Move-only; destroying a pending handle waits.
class CollectiveHandle {
 public:
  CollectiveHandle() = default;  // a collective that has already completed
  // order_after: makes the compute stream's later work wait for the collective (it must not block the host).
  CollectiveHandle(std::vector<Tensor> held, std::function<void()> order_after)
      : held_(std::move(held)), order_after_(std::move(order_after)) {}
  CollectiveHandle(CollectiveHandle&& other) noexcept
      : held_(std::move(other.held_)), order_after_(std::exchange(other.order_after_, nullptr)) {}
  CollectiveHandle& operator=(CollectiveHandle&& other) {
    if (this != &other) {
      wait();
      held_ = std::move(other.held_);
      order_after_ = std::exchange(other.order_after_, nullptr);
    }
    return *this;
  }
  CollectiveHandle(const CollectiveHandle&) = delete;
  CollectiveHandle& operator=(const CollectiveHandle&) = delete;
  ~CollectiveHandle() {
    try {
      wait();
    } catch (...) {  // reported by whoever uses the device next; the buffers were abandoned, not freed
    }
  }

  bool pending() const { return static_cast<bool>(order_after_); }
  // Orders the work queued on the compute stream from now on after the collective (the host does not block), then
  // drops the references to its tensors. Idempotent.
  void wait() {
    if (!order_after_) return;
    const std::function<void()> order_after = std::exchange(order_after_, nullptr);
    try {
      order_after();
    } catch (...) {
      abandon();
      throw;
    }
    held_.clear();
  }

 private:
  // Without the ordering the collective may still write these blocks: leak them rather than let them be reused.
  void abandon() { static_cast<void>(new std::vector<Tensor>(std::move(held_))); }

  std::vector<Tensor> held_;
  std::function<void()> order_after_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "world", "sp", "ep", ... for error messages

  // In-place sum over the group (f32 or f64 tensors).
  virtual void allreduce_sum(Tensor& tensor) = 0;
  // In-place sum of a small host vector (metrics, counts).
  virtual void allreduce_sum(std::vector<double>& values) = 0;
  virtual void allreduce_sum(std::vector<int64_t>& values) = 0;
  virtual void allreduce_max(std::vector<double>& values) = 0;
  // out = concatenation of every rank's `local` in rank order (flat; out.numel() == size * local.numel()).
  virtual void allgather(const Tensor& local, Tensor& out) = 0;
  virtual void allgather(const std::vector<int64_t>& local, std::vector<int64_t>& out) = 0;
  // out = this rank's block of the element-wise sum of every rank's `in` (in.numel() == size * out.numel()).
  virtual void reduce_scatter_sum(const Tensor& in, Tensor& out) = 0;
  // Asynchronous forms (FSDP overlaps them with compute): the collectives may still run when the call returns (NCCL:
  // on the communication stream, ordered after the work queued on the compute stream so far, so the inputs may have
  // been produced there and the outputs freshly allocated); wait() on the handle before reading an output. Every
  // rank must issue them in the same order, interleaved with the blocking collectives in the same way.
  // allgather_async: allgather(locals[i], outs[i]) for every i, as one batch. The defaults run the blocking forms,
  // so the handle they return has completed.
  virtual CollectiveHandle allgather_async(const std::vector<Tensor>& locals, const std::vector<Tensor>& outs) {
    VEOMNI_CHECK(locals.size() == outs.size(), "allgather_async of {} tensors into {}", locals.size(), outs.size());
    for (size_t i = 0; i < locals.size(); ++i) {
      Tensor out = outs[i];
      allgather(locals[i], out);
    }
    return {};
  }
  virtual CollectiveHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out) {
    Tensor o = out;
    reduce_scatter_sum(in, o);
    return {};
  }
  // Variable all-to-all along dim 0 of 2-D row tensors: rank r sends send_rows[d] rows to rank d (rows consecutive
  // in d order) and receives recv_rows[s] rows from rank s into recv (also consecutive in s order).
  virtual void all_to_all_rows(const Tensor& send, const std::vector<int64_t>& send_rows, Tensor& recv,
                               const std::vector<int64_t>& recv_rows) = 0;
  virtual void broadcast(Tensor& tensor, int root) = 0;
  virtual void broadcast(std::string& text, int root) = 0;
  virtual void barrier() = 0;
};

// The MPI world, initialised once per process (MPI_Init_thread with funneled threads). Safe to call repeatedly.
void mpi_initialize(int* argc, char*** argv);
void mpi_finalize();
bool mpi_is_initialized();

// Communicator over MPI_COMM_WORLD.
std::shared_ptr<Communicator> mpi_world();
// This process's rank among the processes on its node (collective over the world): which GPU it drives.
int mpi_local_rank();
// Sub-group: ranks of `parent` with the same color, ordered by key (MPI_Comm_split).
std::shared_ptr<Communicator> mpi_split(const Communicator& parent, int color, int key, const std::string& name);

}  // namespace veomni
