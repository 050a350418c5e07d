// The learned position table [side*side, D] resampled bilinearly (align_corners) to every grid, in patch order.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/param.h"
#include "model/vision/vision_grid.h"

namespace veomni {

// Interpolation weights of one axis: [size, side] f32 (host), row i holding the two taps of target position i,
// src = i * (side-1) / max(size-1, 1), taps floor(src) and floor(src)+1 (clamped to the table) with weights
// 1 - |src - tap| (transformers' get_vision_interpolation_indices_and_weights / fast_pos_embed_interpolate, f32).
Tensor axis_interpolation_weights(int64_t size, int64_t side);

// The bilinear weights are separable, so a grid's table is Wh [h, side] x E [side, side, D] x Ww^T [side, w]: two
// GEMMs per grid instead of a [h*w, side*side] matrix. The rows then go to patch order (merge windows) and repeat
// for every frame through an embedding gather, whose backward is the matching scatter-add.
class VisionPosEmbed {
 public:
  struct GridPlan {
    VisionGrid grid;
    int64_t row_begin = 0;  // first patch of the grid in the batch
    Tensor wh, ww;          // f32 on the device: [h, side], [w, side]
    Tensor ids;             // i64 [t*h*w]: the raster row (y*w + x) of every patch, in patch order
  };
  struct Saved {
    std::vector<GridPlan> plans;
  };
  struct Output {
    Tensor out;
    Saved saved;
  };

  VisionPosEmbed(Parameter* table, int64_t side, int64_t merge) : table_(table), side_(side), merge_(merge) {}

  // out [N, D] in the table's dtype and device, N = total patches of the grids; saved (the per-grid plans) is
  // empty unless save.
  Output forward(const std::vector<VisionGrid>& grids, bool save) const;
  // Accumulates the table gradient from dpos [N, D].
  void backward(Saved&& saved, const Tensor& dpos) const;

 private:
  GridPlan plan(const VisionGrid& grid, int64_t row_begin, Device device) const;
  Tensor grid_table(const GridPlan& p) const;  // [h*w, D] raster order

  Parameter* table_;
  int64_t side_;
  int64_t merge_;
};

}  // namespace veomni
