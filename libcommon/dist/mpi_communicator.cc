// MPI backend of Communicator for CPU tensors; large messages are split so MPI's int counts never overflow.
#include <mpi.h>

#include <algorithm>
#include <climits>

#include "dist/communicator.h"

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

// Largest element count sent in one MPI call (counts are int).
constexpr int64_t kChunk = int64_t{1} << 30;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, bool owned) : comm_(comm), name_(std::move(name)), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
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
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, p + done * esize, n, mpi_type(t.dtype()), MPI_SUM, comm_), "allreduce", name_);
    }
  }
  void allreduce_sum(std::vector<double>& v) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM, comm_),
              "allreduce", name_);
  }
  void allreduce_sum(std::vector<int64_t>& v) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_SUM, comm_),
              "allreduce", name_);
  }
  void allreduce_max(std::vector<double>& v) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, comm_),
              "allreduce", name_);
  }

  void allgather(const Tensor& local, Tensor& out) override {
    require_cpu(local, "allgather");
    require_cpu(out, "allgather");
    VEOMNI_CHECK(out.numel() == local.numel() * size_ && out.dtype() == local.dtype(), "allgather {} into {}",
                 local.describe(), out.describe());
    VEOMNI_CHECK(local.numel() <= kChunk, "allgather of {} elements per rank exceeds one MPI message",
                 local.numel());
    check_mpi(MPI_Allgather(local.raw_data(), static_cast<int>(local.numel()), mpi_type(local.dtype()), out.raw_data(),
                            static_cast<int>(local.numel()), mpi_type(local.dtype()), comm_),
              "allgather", name_);
  }
  void allgather(const std::vector<int64_t>& local, std::vector<int64_t>& out) override {
    out.assign(local.size() * static_cast<size_t>(size_), 0);
    check_mpi(MPI_Allgather(local.data(), static_cast<int>(local.size()), MPI_INT64_T, out.data(),
                            static_cast<int>(local.size()), MPI_INT64_T, comm_),
              "allgather", name_);
  }

  void reduce_scatter_sum(const Tensor& in, Tensor& out) override {
    require_cpu(in, "reduce_scatter");
    require_cpu(out, "reduce_scatter");
    VEOMNI_CHECK(in.numel() == out.numel() * size_ && in.dtype() == out.dtype() && in.dtype() == DType::F32,
                 "reduce_scatter {} into {}", in.describe(), out.describe());
    VEOMNI_CHECK(out.numel() <= kChunk, "reduce_scatter of {} elements per rank exceeds one MPI message", out.numel());
    check_mpi(MPI_Reduce_scatter_block(in.raw_data(), out.raw_data(), static_cast<int>(out.numel()), MPI_FLOAT,
                                       MPI_SUM, comm_),
              "reduce_scatter", name_);
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
    check_mpi(MPI_Alltoallv(sp, scounts.data(), sdispls.data(), MPI_BYTE, rp, rcounts.data(), rdispls.data(), MPI_BYTE,
                            comm_),
              "all_to_all", name_);
  }

  void broadcast(Tensor& t, int root) override {
    require_cpu(t, "broadcast");
    char* p = static_cast<char*>(t.raw_data());
    const size_t esize = dtype_size(t.dtype());
    for (int64_t done = 0; done < t.numel(); done += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, t.numel() - done));
      check_mpi(MPI_Bcast(p + done * esize, n, mpi_type(t.dtype()), root, comm_), "broadcast", name_);
    }
  }
  void broadcast(std::string& text, int root) override {
    int64_t length = static_cast<int64_t>(text.size());
    check_mpi(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm_), "broadcast", name_);
    text.resize(static_cast<size_t>(length));
    if (length) check_mpi(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm_), "broadcast", name_);
  }
  void barrier() override { check_mpi(MPI_Barrier(comm_), "barrier", name_); }

 private:
  void require_cpu(const Tensor& t, const char* op) const {
    VEOMNI_CHECK(t.is_cpu(), "MPI {} on group '{}' needs CPU tensors, got {}", op, name_, t.describe());
  }
  MPI_Comm comm_;
  std::string name_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
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
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
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
