// The patch grids of one vision batch (images and videos, grid_thw rows): validation and the layouts they imply.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "data/mrope_positions.h"
#include "model/vision/vision_config.h"

namespace veomni {

// VisionGrid (t temporal patches, h x w spatial patches per frame) is shared with the position ids.

// Grids from an i64 [n, 3] tensor (the dataset's *_grid_thw); InputError on another shape or dtype.
std::vector<VisionGrid> grids_from_tensor(const Tensor& grid_thw);

// Every grid positive with h and w multiples of spatial_merge_size, and the patches adding up to pixel_values'
// rows, which hold config.patch_dim() features; InputError naming the grid otherwise.
void validate_vision_input(const Tensor& pixel_values, const std::vector<VisionGrid>& grids, const VisionConfig& config);

int64_t total_patches(const std::vector<VisionGrid>& grids);

// Attention is bounded per frame: one segment of h*w patches per temporal index of every grid, [0, ..., total].
std::vector<int32_t> frame_cu_seqlens(const std::vector<VisionGrid>& grids);

// The (row, col) patch coordinate of every patch in pixel_values order: per grid and frame, merge windows in
// row-major order, and inside a window m x m patches row-major (the processor's layout).
struct PatchCoord {
  int64_t row;
  int64_t col;
};
std::vector<PatchCoord> patch_coords(const std::vector<VisionGrid>& grids, int64_t merge);

}  // namespace veomni
