// CPU embedding: row gathers forward; the backward scatters per column block so that repeated ids are summed by one
// thread in token order.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/index_checks.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

constexpr int64_t kEmbeddingColumnBlock = 256;
constexpr const char* kIdsHint = "token ids must be below the model's vocab_size (was the data tokenized for it?)";

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  check_ids_in_range("embedding_forward", "ids", ids, table.dim(0), kIdsHint);
  const int64_t n = ids.numel();
  const int64_t hidden = table.dim(1);
  const int64_t* id = ids.data<int64_t>();
  const float* t = table.data<float>();
  float* o = out.data<float>();
  parallel_for(n, hidden, [&](int64_t i) {
    std::memcpy(o + i * hidden, t + id[i] * hidden, static_cast<size_t>(hidden) * sizeof(float));
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  check_ids_in_range("embedding_backward", "ids", ids, dtable.dim(0), kIdsHint);
  const int64_t n = ids.numel();
  const int64_t hidden = dtable.dim(1);
  const int64_t* id = ids.data<int64_t>();
  const float* d = dout.data<float>();
  float* t = dtable.data<float>();
  const int64_t n_blocks = (hidden + kEmbeddingColumnBlock - 1) / kEmbeddingColumnBlock;
  parallel_for(n_blocks, n * kEmbeddingColumnBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kEmbeddingColumnBlock;
    const int64_t width = std::min(kEmbeddingColumnBlock, hidden - c0);
    for (int64_t i = 0; i < n; ++i) axpy(width, 1.0f, d + i * hidden + c0, t + id[i] * hidden + c0);
  });
}

}  // namespace veomni::ops::cpu
