// NCCL communicator: device collectives through NCCL (blocking ones on the compute stream, asynchronous ones on the
// communication stream), host ones delegated to MPI.
#include "dist/nccl_communicator.h"

#include <cstring>
#include <optional>

#ifdef VEOMNI_WITH_CUDA
#include <mpi.h>
#include <nccl.h>

#include "dist/nccl_watchdog.h"
#include "kernels/cuda/runtime.h"
#include "kernels/op_profiler.h"
#endif

namespace veomni {

#ifdef VEOMNI_WITH_CUDA

namespace {

void check_nccl(ncclResult_t code, const char* what, const std::string& group) {
  if (code == ncclSuccess) return;
  throw Error(fmt::format("NCCL {} failed on group '{}': {} ({})", what, group, ncclGetErrorString(code),
                          ncclGetLastError(nullptr) ? ncclGetLastError(nullptr) : ""));
}

// The profiler's key of one collective: split by element count, with the bytes one rank sends or receives.
OpKey collective_key(const char* op, const Tensor& t, double bytes) {
  return {op, {t.numel(), 0, 0, 0}, 1, 0.0, bytes};
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: case DType::Bool: return ncclUint8;
  }
  return ncclUint8;
}

// The handle of collectives just queued on the communication stream: an event recorded there after them, which the
// compute stream waits on (rule (b) in kernels/cuda/runtime.h), and the tensors they use, held until then (rule (c)).
CollectiveHandle completion_on_comm_stream(std::vector<Tensor> held) {
  cudaEvent_t done = cuda_rt::acquire_event();
  cuda_rt::record_event(done, cuda_rt::comm_stream());
  return CollectiveHandle(std::move(held), [done] {
    cuda_rt::stream_wait_event(cuda_rt::stream(), done);
    cuda_rt::release_event(done);
  });
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<Communicator> mpi)
      : mpi_(std::move(mpi)), watchdog_(mpi_->name() + "/nccl", member_world_ranks(*mpi_), world_rank()) {
    ncclUniqueId id{};
    std::string bytes(sizeof(id), '\0');
    if (mpi_->rank() == 0) {
      check_nccl(ncclGetUniqueId(&id), "get_unique_id", mpi_->name());
      std::memcpy(bytes.data(), &id, sizeof(id));
    }
    mpi_->broadcast(bytes, 0);
    std::memcpy(&id, bytes.data(), sizeof(id));
    watchdog_.begin_host_phase("init");
    check_nccl(ncclCommInitRank(&comm_, mpi_->size(), id, mpi_->rank()), "init", mpi_->name());
    watchdog_.end_host_phase();
    watchdog_.attach(comm_);
  }
  ~NcclCommunicator() override {
    watchdog_.attach(nullptr);  // it must not query a destroyed communicator
    if (comm_) ncclCommDestroy(comm_);
  }
  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  std::string name() const override { return mpi_->name() + "/nccl"; }

  void allreduce_sum(Tensor& t) override {
    if (t.is_cpu()) return mpi_->allreduce_sum(t);
    op_profile_timed(
        t.device(), [&] { return collective_key("nccl_allreduce", t, static_cast<double>(t.nbytes())); },
        [&] {
          check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                   ncclSum, comm_, cuda_rt::stream()),
                     "allreduce", name());
          watchdog_.issued("allreduce", cuda_rt::stream());
        });
  }
  void allreduce_sum(std::vector<double>& v) override { mpi_->allreduce_sum(v); }
  void allreduce_sum(std::vector<int64_t>& v) override { mpi_->allreduce_sum(v); }
  void allreduce_max(std::vector<double>& v) override { mpi_->allreduce_max(v); }

  void allgather(const Tensor& local, Tensor& out) override {
    if (local.is_cpu()) return mpi_->allgather(local, out);
    VEOMNI_CHECK(out.numel() == local.numel() * size() && out.dtype() == local.dtype() && !out.is_cpu(),
                 "allgather {} into {}", local.describe(), out.describe());
    op_profile_timed(
        local.device(), [&] { return collective_key("nccl_allgather", out, static_cast<double>(out.nbytes())); },
        [&] {
          check_nccl(ncclAllGather(local.raw_data(), out.raw_data(), static_cast<size_t>(local.numel()),
                                   nccl_type(local.dtype()), comm_, cuda_rt::stream()),
                     "allgather", name());
          watchdog_.issued("allgather", cuda_rt::stream());
        });
  }
  void allgather(const std::vector<int64_t>& local, std::vector<int64_t>& out) override { mpi_->allgather(local, out); }

  void reduce_scatter_sum(const Tensor& in, Tensor& out) override {
    if (in.is_cpu()) return mpi_->reduce_scatter_sum(in, out);
    VEOMNI_CHECK(in.numel() == out.numel() * size() && in.dtype() == out.dtype() && !out.is_cpu(),
                 "reduce_scatter {} into {}", in.describe(), out.describe());
    op_profile_timed(
        in.device(), [&] { return collective_key("nccl_reduce_scatter", in, static_cast<double>(in.nbytes())); },
        [&] {
          check_nccl(ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                       nccl_type(in.dtype()), ncclSum, comm_, cuda_rt::stream()),
                     "reduce_scatter", name());
          watchdog_.issued("reduce_scatter", cuda_rt::stream());
        });
  }

  // Not in the op profile: its timers bracket work on the compute stream, and these run beside it.
  CollectiveHandle allgather_async(const std::vector<Tensor>& locals, const std::vector<Tensor>& outs) override {
    VEOMNI_CHECK(locals.size() == outs.size(), "allgather_async of {} tensors into {}", locals.size(), outs.size());
    if (locals.empty() || locals.front().is_cpu()) return Communicator::allgather_async(locals, outs);
    std::vector<Tensor> held;
    for (size_t i = 0; i < locals.size(); ++i) {
      VEOMNI_CHECK(!locals[i].is_cpu() && !outs[i].is_cpu() && outs[i].numel() == locals[i].numel() * size() &&
                       outs[i].dtype() == locals[i].dtype(),
                   "allgather_async {} into {}", locals[i].describe(), outs[i].describe());
      held.push_back(locals[i]);
      held.push_back(outs[i]);
    }
    const cudaStream_t comm = cuda_rt::comm_stream();
    cuda_rt::stream_wait_stream(comm, cuda_rt::stream());  // rule (a)
    // One group: NCCL launches the gathers together (they are copies, so grouping changes no value).
    check_nccl(ncclGroupStart(), "group_start", name());
    for (size_t i = 0; i < locals.size(); ++i)
      check_nccl(ncclAllGather(locals[i].raw_data(), outs[i].raw_data(), static_cast<size_t>(locals[i].numel()),
                               nccl_type(locals[i].dtype()), comm_, comm),
                 "allgather", name());
    check_nccl(ncclGroupEnd(), "group_end", name());
    watchdog_.issued("allgather", comm);
    return completion_on_comm_stream(std::move(held));
  }

  CollectiveHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out) override {
    if (in.is_cpu()) return Communicator::reduce_scatter_sum_async(in, out);
    VEOMNI_CHECK(in.numel() == out.numel() * size() && in.dtype() == out.dtype() && !out.is_cpu(),
                 "reduce_scatter_async {} into {}", in.describe(), out.describe());
    const cudaStream_t comm = cuda_rt::comm_stream();
    cuda_rt::stream_wait_stream(comm, cuda_rt::stream());  // rule (a)
    // The same call as reduce_scatter_sum on another stream: NCCL chooses its algorithm (and so the order of the sum)
    // from the call's size and the communicator's topology, not from the stream, so the result is the same bits.
    check_nccl(ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                 nccl_type(in.dtype()), ncclSum, comm_, comm),
               "reduce_scatter", name());
    watchdog_.issued("reduce_scatter", comm);
    return completion_on_comm_stream({in, out});
  }

  void all_to_all_rows(const Tensor& send, const std::vector<int64_t>& send_rows, Tensor& recv,
                       const std::vector<int64_t>& recv_rows) override {
    if (send.is_cpu()) return mpi_->all_to_all_rows(send, send_rows, recv, recv_rows);
    const int p = size();
    VEOMNI_CHECK(static_cast<int>(send_rows.size()) == p && static_cast<int>(recv_rows.size()) == p,
                 "all_to_all counts for group size {}", p);
    const size_t row_bytes =
        send.dim(0) > 0 ? send.nbytes() / static_cast<size_t>(send.dim(0))
                        : (recv.dim(0) > 0 ? recv.nbytes() / static_cast<size_t>(recv.dim(0)) : 0);
    const auto* sp = static_cast<const char*>(send.numel() ? send.raw_data() : nullptr);
    auto* rp = static_cast<char*>(recv.numel() ? recv.raw_data() : nullptr);
    size_t soff = 0, roff = 0;
    std::optional<OpTimer> timer;  // brackets the whole group on the stream when profiling
    if (op_profile_enabled())
      timer.emplace(OpKey{.op = "nccl_all_to_all", .bytes = static_cast<double>(send.nbytes() + recv.nbytes())},
                    send.device());  // not split by size: the row counts change every step
    check_nccl(ncclGroupStart(), "group_start", name());
    for (int r = 0; r < p; ++r) {
      const size_t sb = static_cast<size_t>(send_rows[r]) * row_bytes, rb = static_cast<size_t>(recv_rows[r]) * row_bytes;
      if (sb) check_nccl(ncclSend(sp + soff, sb, ncclUint8, r, comm_, cuda_rt::stream()), "send", name());
      if (rb) check_nccl(ncclRecv(rp + roff, rb, ncclUint8, r, comm_, cuda_rt::stream()), "recv", name());
      soff += sb;
      roff += rb;
    }
    check_nccl(ncclGroupEnd(), "group_end", name());
    watchdog_.issued("all_to_all", cuda_rt::stream());
    VEOMNI_CHECK(soff == send.nbytes() && roff == recv.nbytes(), "all_to_all row counts do not match {} / {}",
                 send.describe(), recv.describe());
  }

  void broadcast(Tensor& t, int root) override {
    if (t.is_cpu()) return mpi_->broadcast(t, root);
    op_profile_timed(
        t.device(), [&] { return collective_key("nccl_broadcast", t, static_cast<double>(t.nbytes())); },
        [&] {
          check_nccl(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                   root, comm_, cuda_rt::stream()),
                     "broadcast", name());
          watchdog_.issued("broadcast", cuda_rt::stream());
        });
  }
  void broadcast(std::string& text, int root) override { mpi_->broadcast(text, root); }
  void barrier() override {
    cuda_rt::synchronize();
    mpi_->barrier();
  }

 private:
  static int world_rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  // The world rank of each rank of `group`, for the watchdog's messages (collective over the group).
  static std::vector<int> member_world_ranks(Communicator& group) {
    std::vector<int64_t> mine{world_rank()}, all;
    group.allgather(mine, all);
    return std::vector<int>(all.begin(), all.end());
  }

  std::shared_ptr<Communicator> mpi_;
  NcclWatchdog watchdog_;  // watches comm_ from init on (a peer that never joins is a timeout too)
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_available() { return true; }

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> mpi_group) {
  return std::make_shared<NcclCommunicator>(std::move(mpi_group));
}

#else

bool nccl_available() { return false; }

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> mpi_group) {
  throw Error(fmt::format("NCCL communicator requested for group '{}' but this build has no CUDA backend",
                          mpi_group->name()));
}

#endif

DeviceMesh with_nccl_groups(const DeviceMesh& mesh) {
  DeviceMesh out = mesh;
  // Every rank creates the groups in the same order: NCCL initialisation is collective within each group.
  out.world = make_nccl_communicator(mesh.world);
  out.sp = make_nccl_communicator(mesh.sp);
  out.ep = make_nccl_communicator(mesh.ep);
  out.ep_fsdp = make_nccl_communicator(mesh.ep_fsdp);
  return out;
}

}  // namespace veomni
