// Collective communication on a group of ranks; MPI for CPU tensors now, NCCL for GPU tensors behind the same API.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace veomni {

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
