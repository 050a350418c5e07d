// The CUDA multi-tensor sum of squares, replayed on the host: same chunks, same per-thread strides, same shuffle tree.
#include "kernels/cpu/gpu_order_sums.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {
namespace {

// The launch shape of kernels/cuda/multi_tensor.cu and kernel_utils.cuh (tests on a GPU check that they agree).
constexpr int64_t kSumChunk = int64_t{1} << 14;  // kMultiTensorChunk
constexpr size_t kChunkThreads = 256;         // chunk_squares' block
constexpr size_t kPartialThreads = 1024;      // sum_of_partials' block
constexpr size_t kWarp = 32;

using Lanes = std::array<double, kWarp>;

// warp_sum: an xor butterfly; lane l adds lane l^offset's value to its own. Every lane ends with the same bits
// (each step adds the same two numbers in either order); lane 0's is returned.
double warp_sum(Lanes v) {
  for (size_t offset = kWarp / 2; offset > 0; offset /= 2) {
    Lanes next;
    for (size_t l = 0; l < kWarp; ++l) next[l] = v[l] + v[l ^ offset];
    v = next;
  }
  return v[0];
}

// block_sum over one value per thread (a multiple of 32 threads): each warp's sum, then the sum of those by warp 0
// with zeros in the lanes past the last warp.
template <size_t kThreads>
double block_sum(const std::array<double, kThreads>& per_thread) {
  constexpr size_t warps = kThreads / kWarp;
  Lanes scratch{};
  for (size_t w = 0; w < warps; ++w) {
    Lanes lanes;
    for (size_t l = 0; l < kWarp; ++l) lanes[l] = per_thread[w * kWarp + l];
    scratch[w] = warp_sum(lanes);
  }
  return warp_sum(scratch);
}

// chunk_squares for the elements [begin, end) of x: thread t adds x[begin + t + k*256]^2 for k = 0, 1, ...
double chunk_squares(const float* x, int64_t begin, int64_t end) {
  std::array<double, kChunkThreads> acc{};
  constexpr auto stride = static_cast<int64_t>(kChunkThreads);
  for (size_t t = 0; t < kChunkThreads; ++t) {
    double a = 0.0;
    for (int64_t i = begin + static_cast<int64_t>(t); i < end; i += stride) {
      const double d = x[i];
      a += d * d;  // exact product: fused or not, one rounding
    }
    acc[t] = a;
  }
  return block_sum(acc);
}

}  // namespace

double sum_squares_multi_gpu_order(const std::vector<const Tensor*>& xs) {
  struct Chunk {
    const float* x;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (const Tensor* t : xs) {
    const int64_t n = t->numel();
    for (int64_t begin = 0; begin < n; begin += kSumChunk)
      chunks.push_back({t->data<float>(), begin, std::min(begin + kSumChunk, n)});
  }
  if (chunks.empty()) return 0.0;
  std::vector<double> partial(chunks.size());
  parallel_for(static_cast<int64_t>(chunks.size()), 2 * kSumChunk, [&](int64_t c) {
    const Chunk& k = chunks[static_cast<size_t>(c)];
    partial[static_cast<size_t>(c)] = chunk_squares(k.x, k.begin, k.end);
  });
  std::array<double, kPartialThreads> acc{};
  for (size_t t = 0; t < kPartialThreads; ++t)
    for (size_t i = t; i < partial.size(); i += kPartialThreads) acc[t] += partial[i];
  return block_sum(acc);
}

}  // namespace veomni::ops::cpu
