// Bilinear position-table resampling as separable GEMMs plus an embedding gather, forward and backward.
#include "model/vision/vision_pos_embed.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

Tensor axis_interpolation_weights(int64_t size, int64_t side) {
  Tensor out = Tensor::zeros({size, side}, DType::F32);
  float* p = out.data<float>();
  const float denominator = static_cast<float>(std::max<int64_t>(size - 1, 1));
  for (int64_t i = 0; i < size; ++i) {
    // The same f32 operations as transformers: (index * (side - 1)) / clamp(size - 1, min=1).
    const float src = static_cast<float>(i) * static_cast<float>(side - 1) / denominator;
    const float floor = std::floor(src);
    for (int64_t offset = 0; offset < 2; ++offset) {
      const int64_t tap = std::clamp<int64_t>(static_cast<int64_t>(floor) + offset, 0, side - 1);
      const float weight = std::max(0.0f, 1.0f - std::fabs(src - floor - static_cast<float>(offset)));
      p[i * side + tap] += weight;  // both taps clamp to the last entry at the far edge (weight 1 + 0)
    }
  }
  return out;
}

VisionPosEmbed::GridPlan VisionPosEmbed::plan(const VisionGrid& g, int64_t row_begin, Device device) const {
  GridPlan p;
  p.grid = g;
  p.row_begin = row_begin;
  p.wh = axis_interpolation_weights(g.h, side_).to(device);
  p.ww = axis_interpolation_weights(g.w, side_).to(device);
  const std::vector<PatchCoord> coords = patch_coords({g}, merge_);
  std::vector<int64_t> ids(coords.size());
  for (size_t i = 0; i < coords.size(); ++i) ids[i] = coords[i].row * g.w + coords[i].col;
  p.ids = Tensor::from_vector(ids, {g.patches()}).to(device);
  return p;
}

Tensor VisionPosEmbed::grid_table(const GridPlan& p) const {
  const Tensor& table = table_->value;
  const int64_t d = table.dim(1), h = p.grid.h, w = p.grid.w;
  // Rows first: T[y] = sum_i Wh[y, i] E[i] over the table viewed [side, side*D]; then columns per row y.
  Tensor rows = empty_like(table, {h, side_ * d});
  ops::matmul(converted(p.wh, table.dtype()), false, table.view({side_, side_ * d}), false, rows);
  Tensor rows_by_col = rows.view({h * side_, d});
  const Tensor ww = converted(p.ww, table.dtype());
  Tensor out = empty_like(table, {h * w, d});
  for (int64_t y = 0; y < h; ++y) {
    Tensor out_y = out.slice(y * w, (y + 1) * w);
    ops::matmul(ww, false, rows_by_col.slice(y * side_, (y + 1) * side_), false, out_y);
  }
  return out;
}

VisionPosEmbed::Output VisionPosEmbed::forward(const std::vector<VisionGrid>& grids, bool save) const {
  const Tensor& table = table_->value;
  VEOMNI_CHECK(table.ndim() == 2 && table.dim(0) == side_ * side_, "position table {} is not [{}^2, D]",
               table.describe(), side_);
  Output result;
  Tensor pos = empty_like(table, {total_patches(grids), table.dim(1)});
  int64_t row = 0;
  for (const VisionGrid& g : grids) {
    GridPlan p = plan(g, row, table.device());
    Tensor out = pos.slice(row, row + g.patches());
    ops::embedding_forward(p.ids, grid_table(p), out);
    row += g.patches();
    if (save) result.saved.plans.push_back(std::move(p));
  }
  result.out = pos;
  return result;
}

void VisionPosEmbed::backward(Saved&& saved, const Tensor& dpos) const {
  const Saved kept = std::move(saved);
  VEOMNI_CHECK(!kept.plans.empty(), "position-embedding backward without a saved forward");
  if (!table_->trainable) return;
  Tensor& dtable = grad_of(*table_);
  const int64_t d = dtable.dim(1);
  Tensor dtable_rows = dtable.view({side_, side_ * d});
  for (const GridPlan& p : kept.plans) {
    const int64_t h = p.grid.h, w = p.grid.w;
    Tensor dgrid = Tensor::zeros({h * w, d}, DType::F32, dtable.device());
    ops::embedding_backward(p.ids, dpos.slice(p.row_begin, p.row_begin + p.grid.patches()), dgrid);
    Tensor drows = Tensor::empty({h * side_, d}, DType::F32, dtable.device());
    for (int64_t y = 0; y < h; ++y) {
      Tensor drows_y = drows.slice(y * side_, (y + 1) * side_);
      ops::matmul(p.ww, true, dgrid.slice(y * w, (y + 1) * w), false, drows_y);
    }
    ops::matmul(p.wh, true, drows.view({h, side_ * d}), false, dtable_rows, 1.0f, 1.0f);
  }
}

}  // namespace veomni
