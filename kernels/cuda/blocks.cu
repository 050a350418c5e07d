// CUDA place_blocks and add_blocks: one launch for up to 8 blocks, the blocks' shapes and places passed by value.
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/cuda/runtime.h"

namespace veomni::ops::cuda {
namespace {

constexpr int kMaxBlocks = 8;
constexpr int kThreads = 256;

struct Blocks {
  const void* data[kMaxBlocks];  // place_blocks: the parts; add_blocks: the destinations
  int64_t rows[kMaxBlocks], columns[kMaxBlocks];      // shape of each block
  int64_t row0[kMaxBlocks], column0[kMaxBlocks];      // its place in the big matrix
  int count;
};

Blocks blocks_of(const std::vector<const Tensor*>& tensors, const std::vector<int64_t>& rows,
                 const std::vector<int64_t>& columns) {
  VEOMNI_CHECK(tensors.size() <= static_cast<size_t>(kMaxBlocks), "{} blocks; at most {}", tensors.size(), kMaxBlocks);
  Blocks b{};
  b.count = static_cast<int>(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    b.data[i] = tensors[i]->raw_data();
    b.rows[i] = tensors[i]->dim(0);
    b.columns[i] = tensors[i]->dim(1);
    b.row0[i] = rows[i];
    b.column0[i] = columns[i];
  }
  return b;
}

// Every element of out: its block's value, or zero outside the blocks.
__global__ void place_kernel(Blocks b, Floats out, int64_t height, int64_t width, bool bf16) {
  const int64_t n = height * width;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / width, c = e % width;
    float value = 0.0f;
    for (int i = 0; i < b.count; ++i) {
      const int64_t br = r - b.row0[i], bc = c - b.column0[i];
      if (br >= 0 && br < b.rows[i] && bc >= 0 && bc < b.columns[i]) {
        value = ConstFloats{b.data[i], bf16}[br * b.columns[i] + bc];
        break;
      }
    }
    out.store(e, value);
  }
}

// Block blockIdx.y: dst += its block of src.
__global__ void add_kernel(Blocks b, const float* src, int64_t width) {
  const int i = static_cast<int>(blockIdx.y);
  float* dst = static_cast<float*>(const_cast<void*>(b.data[i]));
  const int64_t n = b.rows[i] * b.columns[i];
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / b.columns[i], c = e % b.columns[i];
    dst[e] += src[(b.row0[i] + r) * width + b.column0[i] + c];
  }
}

}  // namespace

void place_blocks(const std::vector<Tensor>& parts, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& columns, Tensor& out) {
  if (out.numel() == 0) return;
  std::vector<const Tensor*> tensors;
  for (const Tensor& part : parts) tensors.push_back(&part);
  place_kernel<<<grid_for(out.numel(), kThreads), kThreads, 0, cuda_rt::stream()>>>(
      blocks_of(tensors, rows, columns), floats_of(out), out.dim(0), out.dim(1), out.dtype() == DType::BF16);
  VEOMNI_CUDA_LAUNCH_CHECK();
}

void add_blocks(const Tensor& src, const std::vector<int64_t>& rows, const std::vector<int64_t>& columns,
                const std::vector<Tensor*>& dsts) {
  if (dsts.empty()) return;
  std::vector<const Tensor*> tensors(dsts.begin(), dsts.end());
  int64_t largest = 0;
  for (const Tensor* t : tensors) largest = std::max(largest, t->numel());
  if (largest == 0) return;
  const dim3 grid(grid_for(largest, kThreads), static_cast<unsigned>(dsts.size()));
  add_kernel<<<grid, kThreads, 0, cuda_rt::stream()>>>(blocks_of(tensors, rows, columns), data_of<const float>(src),
                                                       src.dim(1));
  VEOMNI_CUDA_LAUNCH_CHECK();
}

}  // namespace veomni::ops::cuda
