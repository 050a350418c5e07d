// Multi-tensor reductions and casts: the gradient norm over every parameter with one host read, and all of a
// parameter group's fp32 -> bf16 casts in one launch.
#include <vector>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kThreads = 256;

struct SquaresEntry {
  const float* x;
  int64_t n;
};

// partial[chunk] = sum of x^2 over the chunk, in f64; the tree is fixed, so the sum is the same run to run.
__global__ void chunk_squares(TableView<SquaresEntry> table, double* partial) {
  __shared__ double scratch[kWarp];
  const ChunkRange r = chunk_range(table.first_chunk, table.num_tensors, blockIdx.x);
  const SquaresEntry e = table.entries[r.tensor];
  const int64_t end = r.end < e.n ? r.end : e.n;
  double acc = 0.0;
  for (int64_t i = r.begin + threadIdx.x; i < end; i += blockDim.x) {
    const double d = e.x[i];
    acc += d * d;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

struct CastEntry {
  const void* src;
  void* dst;
  int64_t n;
  bool src_bf16;
  bool dst_bf16;
};

__global__ void chunk_cast(TableView<CastEntry> table) {
  const ChunkRange r = chunk_range(table.first_chunk, table.num_tensors, blockIdx.x);
  const CastEntry e = table.entries[r.tensor];
  const int64_t end = r.end < e.n ? r.end : e.n;
  const ConstFloats src{e.src, e.src_bf16};
  const Floats dst{e.dst, e.dst_bf16};
  for (int64_t i = r.begin + threadIdx.x; i < end; i += blockDim.x) dst.store(i, src[i]);
}

unsigned grid_of(int64_t chunks, const char* op) {
  VEOMNI_CHECK(chunks <= INT32_MAX, "{}: {} chunks exceed the grid", op, chunks);
  return static_cast<unsigned>(chunks);
}

}  // namespace

double sum_squares_multi(const std::vector<const Tensor*>& xs) {
  std::vector<SquaresEntry> entries;
  std::vector<int64_t> sizes;
  for (const Tensor* x : xs) {
    entries.push_back({data_of<float>(*x), x->numel()});
    sizes.push_back(x->numel());
  }
  const Device device = xs.front()->device();
  const DeviceTable<SquaresEntry> table = upload_table(entries, sizes, device);
  if (table.num_chunks == 0) return 0.0;
  // Partials, then the total, as doubles (8-byte elements).
  const Tensor partial = Tensor::empty({table.num_chunks + 1}, DType::I64, device);
  double* partial_p = data_of<double>(partial);
  const cudaStream_t stream = cuda_rt::stream();
  chunk_squares<<<grid_of(table.num_chunks, "sum_squares_multi"), kThreads, 0, stream>>>(table.view(), partial_p);
  VEOMNI_CUDA_LAUNCH_CHECK();
  sum_of_partials<double><<<1, 1024, 0, stream>>>(partial_p, table.num_chunks, partial_p + table.num_chunks);
  VEOMNI_CUDA_LAUNCH_CHECK();
  double total = 0.0;
  cuda_rt::copy_to_host(&total, partial_p + table.num_chunks, sizeof total);
  return total;
}

void cast_multi(const std::vector<const Tensor*>& src, const std::vector<Tensor*>& dst) {
  std::vector<CastEntry> entries;
  std::vector<int64_t> sizes;
  const auto f32_or_bf16 = [](DType d) { return d == DType::F32 || d == DType::BF16; };
  for (size_t i = 0; i < src.size(); ++i) {
    // Copies and f16 keep the single-tensor path (a memcpy, or a dtype the table's views do not read).
    if (src[i]->dtype() == dst[i]->dtype() || !f32_or_bf16(src[i]->dtype()) || !f32_or_bf16(dst[i]->dtype())) {
      cast(*src[i], *dst[i]);
      continue;
    }
    entries.push_back({src[i]->raw_data(), dst[i]->raw_data(), src[i]->numel(), src[i]->dtype() == DType::BF16,
                       dst[i]->dtype() == DType::BF16});
    sizes.push_back(src[i]->numel());
  }
  if (entries.empty()) return;
  const DeviceTable<CastEntry> table = upload_table(entries, sizes, src.front()->device());
  if (table.num_chunks == 0) return;
  chunk_cast<<<grid_of(table.num_chunks, "cast_multi"), kThreads, 0, cuda_rt::stream()>>>(table.view());
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
