// CPU place_blocks and add_blocks: blocks of 2-D f32 matrices copied into a zeroed matrix, or added out of one.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/ops_cpu.h"

namespace veomni::ops::cpu {

void place_blocks(const std::vector<Tensor>& parts, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& columns, Tensor& out) {
  float* o = out.data<float>();
  const int64_t width = out.dim(1);
  std::fill_n(o, out.numel(), 0.0f);
  for (size_t i = 0; i < parts.size(); ++i) {
    const float* p = parts[i].data<float>();
    const int64_t r = parts[i].dim(0), c = parts[i].dim(1);
    for (int64_t row = 0; row < r; ++row)
      std::memcpy(o + (rows[i] + row) * width + columns[i], p + row * c, static_cast<size_t>(c) * sizeof(float));
  }
}

void add_blocks(const Tensor& src, const std::vector<int64_t>& rows, const std::vector<int64_t>& columns,
                const std::vector<Tensor*>& dsts) {
  const float* s = src.data<float>();
  const int64_t width = src.dim(1);
  for (size_t i = 0; i < dsts.size(); ++i) {
    float* d = dsts[i]->data<float>();
    const int64_t r = dsts[i]->dim(0), c = dsts[i]->dim(1);
    for (int64_t row = 0; row < r; ++row)
      for (int64_t col = 0; col < c; ++col) d[row * c + col] += s[(rows[i] + row) * width + columns[i] + col];
  }
}

}  // namespace veomni::ops::cpu
