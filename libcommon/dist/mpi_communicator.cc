// MPI backend of Communicator for CPU tensors; large messages are split so MPI's int counts never overflow. Every
// collective is non-blocking underneath and waited for with a deadline (dist/mpi_collective_wait.h).
#include <mpi.h>

#include <algorithm>
#include <climits>

#include "dist/communicator.h"
#include "dist/mpi_collective_wait.h"

namespace veomni {

namespace {

void check_mpi(int code, const char* what, const std::string& group) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(fmt::format("MPI {} failed on group '{}': {}", what, group, std::string(text, static_cast<size_t>(length))));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8: case DType::Bool: return MPI_UINT8_T;
    case DType::BF16: case DType::F16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

// The world rank of each of the `size` ranks of `comm`, in group-rank order.
std::vector<int> world_ranks_of(MPI_Comm comm, int size) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(size)), out(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

// Largest element count sent in one MPI call (counts are int).
constexpr int64_t kChunk = int64_t{1} << 30;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, bool owned) : comm_(comm), name_(std::move(name)), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    members_ = world_ranks_of(comm_, size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  MPI_Comm comm() const { return comm_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  void allreduce_sum(Tensor& t) override {
    require_cpu(t, "allreduce");
    VEOMNI_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::I64 || t.dtype() == DType::I32,
                 "allreduce_sum of {}", t.describe());
    char* p = static_cast<char*>(t.raw_data());
    const size_t esize = dtype_size(t.dtype());
    for (int64_t done = 0; done < t.numel(); done += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, t.numel() - done));
      run("allreduce", [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, p + done * esize, n, mpi_type(t.dtype()), MPI_SUM, comm_, r);
      });
    }
  }
  void allreduce_sum(std::vector<double>& v) override {
    run("allreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, comm_, r);
    });
  }
  void allreduce_sum(std::vector<int64_t>& v) override {
    run("allreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_SUM, comm_, r);
    });
  }
  void allreduce_max(std::vector<double>& v) override {
    run("allreduce_max", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, comm_, r);
    });
  }

  void allgather(const Tensor& local, Tensor& out) override {
    require_cpu(local, "allgather");
    require_cpu(out, "allgather");
    VEOMNI_CHECK(out.numel() == local.numel() * size_ && out.dtype() == local.dtype(), "allgather {} into {}",
                 local.describe(), out.describe());
    VEOMNI_CHECK(local.numel() <= kChunk, "allgather of {} elements per rank exceeds one MPI message",
                 local.numel());
    run("allgather", [&](MPI_Request* r) {
      return MPI_Iallgather(local.raw_data(), static_cast<int>(local.numel()), mpi_type(local.dtype()), out.raw_data(),
                            static_cast<int>(local.numel()), mpi_type(local.dtype()), comm_, r);
    });
  }
  void allgather(const std::vector<int64_t>& local, std::vector<int64_t>& out) override {
    out.assign(local.size() * static_cast<size_t>(size_), 0);
    run("allgather", [&](MPI_Request* r) {
      return MPI_Iallgather(local.data(), static_cast<int>(local.size()), MPI_INT64_T, out.data(),
                            static_cast<int>(local.size()), MPI_INT64_T, comm_, r);
    });
  }

  void reduce_scatter_sum(const Tensor& in, Tensor& out) override {
    require_cpu(in, "reduce_scatter");
    require_cpu(out, "reduce_scatter");
    VEOMNI_CHECK(in.numel() == out.numel() * size_ && in.dtype() == out.dtype() && in.dtype() == DType::F32,
                 "reduce_scatter {} into {}", in.describe(), out.describe());
    VEOMNI_CHECK(out.numel() <= kChunk, "reduce_scatter of {} elements per rank exceeds one MPI message", out.numel());
    run("reduce_scatter", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(in.raw_data(), out.raw_data(), static_cast<int>(out.numel()), MPI_FLOAT, MPI_SUM,
                                       comm_, r);
    });
  }

  void all_to_all_rows(const Tensor& send, const std::vector<int64_t>& send_rows, Tensor& recv,
                       const std::vector<int64_t>& recv_rows) override {
    require_cpu(send, "all_to_all");
    require_cpu(recv, "all_to_all");
    VEOMNI_CHECK(static_cast<int>(send_rows.size()) == size_ && static_cast<int>(recv_rows.size()) == size_,
                 "all_to_all counts of size {}/{} for group size {}", send_rows.size(), recv_rows.size(), size_);
    const int64_t row_bytes = send.ndim() == 0 || send.dim(0) == 0
                                  ? (recv.ndim() > 0 && recv.dim(0) > 0 ? static_cast<int64_t>(recv.nbytes()) / recv.dim(0) : 0)
                                  : static_cast<int64_t>(send.nbytes()) / send.dim(0);
    std::vector<int> scounts(size_), sdispls(size_), rcounts(size_), rdispls(size_);
    int64_t soff = 0, roff = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t sb = send_rows[r] * row_bytes, rb = recv_rows[r] * row_bytes;
      VEOMNI_CHECK(soff + sb <= INT_MAX && roff + rb <= INT_MAX, "all_to_all message exceeds 2 GiB");
      scounts[r] = static_cast<int>(sb);
      sdispls[r] = static_cast<int>(soff);
      rcounts[r] = static_cast<int>(rb);
      rdispls[r] = static_cast<int>(roff);
      soff += sb;
      roff += rb;
    }
    VEOMNI_CHECK(soff == static_cast<int64_t>(send.nbytes()) && roff == static_cast<int64_t>(recv.nbytes()),
                 "all_to_all row counts do not match tensors {} / {}", send.describe(), recv.describe());
    const void* sp = send.numel() ? send.raw_data() : nullptr;
    void* rp = recv.numel() ? recv.raw_data() : nullptr;
    run("all_to_all", [&](MPI_Request* r) {
      return MPI_Ialltoallv(sp, scounts.data(), sdispls.data(), MPI_BYTE, rp, rcounts.data(), rdispls.data(), MPI_BYTE,
                            comm_, r);
    });
  }

  void broadcast(Tensor& t, int root) override {
    require_cpu(t, "broadcast");
    char* p = static_cast<char*>(t.raw_data());
    const size_t esize = dtype_size(t.dtype());
    for (int64_t done = 0; done < t.numel(); done += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, t.numel() - done));
      run("broadcast", [&](MPI_Request* r) {
        return MPI_Ibcast(p + done * esize, n, mpi_type(t.dtype()), root, comm_, r);
      });
    }
  }
  void broadcast(std::string& text, int root) override {
    int64_t length = static_cast<int64_t>(text.size());
    run("broadcast", [&](MPI_Request* r) { return MPI_Ibcast(&length, 1, MPI_INT64_T, root, comm_, r); });
    text.resize(static_cast<size_t>(length));
    if (length)
      run("broadcast", [&](MPI_Request* r) {
        return MPI_Ibcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm_, r);
      });
  }
  void barrier() override {
    run("barrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }

 private:
  // Issues one non-blocking collective and waits for it with the deadline; `issue` fills the request.
  template <typename Issue>
  void run(const char* op, Issue&& issue) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(issue(&request), op, name_);
    check_mpi(mpi_detail::wait_collective(request, {op, name_, ++seq_}, members_), op, name_);
  }
  void require_cpu(const Tensor& t, const char* op) const {
    VEOMNI_CHECK(t.is_cpu(), "MPI {} on group '{}' needs CPU tensors, got {}", op, name_, t.describe());
  }
  MPI_Comm comm_;
  std::string name_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> members_;  // world rank of each rank of the group
  int64_t seq_ = 0;           // collectives issued on this group so far (the same on every member)
};

}  // namespace

void mpi_initialize(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  // Errors come back as codes so that we can report them with context and abort every rank ourselves.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  mpi_detail::start_census();
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  mpi_detail::stop_census();
  MPI_Finalize();
}

bool mpi_is_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

std::shared_ptr<Communicator> mpi_world() {
  VEOMNI_CHECK(mpi_is_initialized(), "mpi_world() before mpi_initialize()");
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD, "world", false);
}

int mpi_local_rank() {
  VEOMNI_CHECK(mpi_is_initialized(), "mpi_local_rank() before mpi_initialize()");
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "comm_split_type",
            "world");
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

std::shared_ptr<Communicator> mpi_split(const Communicator& parent, int color, int key, const std::string& name) {
  const auto* mpi_parent = dynamic_cast<const MpiCommunicator*>(&parent);
  VEOMNI_CHECK(mpi_parent, "mpi_split of a non-MPI communicator '{}'", parent.name());
  MPI_Comm child;
  check_mpi(MPI_Comm_split(mpi_parent->comm(), color, key, &child), "comm_split", parent.name());
  return std::make_shared<MpiCommunicator>(child, name, true);
}

}  // namespace veomni
