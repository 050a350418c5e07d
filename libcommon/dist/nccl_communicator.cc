// NCCL communicator: device collectives through NCCL, host ones delegated to MPI.
#include "dist/nccl_communicator.h"

#include <cstring>
#include <optional>

#ifdef VEOMNI_WITH_CUDA
#include <nccl.h>

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

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<Communicator> mpi) : mpi_(std::move(mpi)) {
    ncclUniqueId id{};
    std::string bytes(sizeof(id), '\0');
    if (mpi_->rank() == 0) {
      check_nccl(ncclGetUniqueId(&id), "get_unique_id", mpi_->name());
      std::memcpy(bytes.data(), &id, sizeof(id));
    }
    mpi_->broadcast(bytes, 0);
    std::memcpy(&id, bytes.data(), sizeof(id));
    check_nccl(ncclCommInitRank(&comm_, mpi_->size(), id, mpi_->rank()), "init", mpi_->name());
  }
  ~NcclCommunicator() override {
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
        });
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
        });
  }
  void broadcast(std::string& text, int root) override { mpi_->broadcast(text, root); }
  void barrier() override {
    cuda_rt::synchronize();
    mpi_->barrier();
  }

 private:
  std::shared_ptr<Communicator> mpi_;
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
