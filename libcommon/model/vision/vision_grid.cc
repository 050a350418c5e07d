// Grid validation, per-frame attention segments and merge-window patch coordinates.
#include "model/vision/vision_grid.h"

#include "core/error.h"

namespace veomni {

std::vector<VisionGrid> grids_from_tensor(const Tensor& grid_thw) {
  VEOMNI_INPUT_CHECK(grid_thw.dtype() == DType::I64 && grid_thw.ndim() == 2 && grid_thw.dim(1) == 3,
                     "grid_thw must be an i64 [n, 3] tensor, got {}", grid_thw.describe());
  const Tensor host = grid_thw.is_cpu() ? grid_thw : grid_thw.to(Device::cpu());
  const int64_t* p = host.data<int64_t>();
  std::vector<VisionGrid> grids;
  for (int64_t i = 0; i < host.dim(0); ++i) grids.push_back({p[3 * i], p[3 * i + 1], p[3 * i + 2]});
  return grids;
}

int64_t total_patches(const std::vector<VisionGrid>& grids) {
  int64_t total = 0;
  for (const VisionGrid& g : grids) total += g.patches();
  return total;
}

void validate_vision_input(const Tensor& pixel_values, const std::vector<VisionGrid>& grids,
                           const VisionConfig& config) {
  VEOMNI_INPUT_CHECK(!grids.empty(), "vision input without any grid_thw row");
  const int64_t m = config.spatial_merge_size;
  for (size_t i = 0; i < grids.size(); ++i) {
    const VisionGrid& g = grids[i];
    VEOMNI_INPUT_CHECK(g.t > 0 && g.h > 0 && g.w > 0, "grid_thw[{}] = [{}, {}, {}] must be positive", i, g.t, g.h,
                       g.w);
    VEOMNI_INPUT_CHECK(g.h % m == 0 && g.w % m == 0,
                       "grid_thw[{}] = [{}, {}, {}]: h and w must be multiples of spatial_merge_size {}", i, g.t, g.h,
                       g.w, m);
  }
  VEOMNI_INPUT_CHECK(pixel_values.ndim() == 2 && pixel_values.dim(1) == config.patch_dim(),
                     "pixel_values must be [patches, {}] (in_channels x temporal_patch_size x patch_size^2), got {}",
                     config.patch_dim(), pixel_values.describe());
  VEOMNI_INPUT_CHECK(pixel_values.dim(0) == total_patches(grids),
                     "pixel_values has {} patches but grid_thw describes {} (sum of t*h*w over {} grids)",
                     pixel_values.dim(0), total_patches(grids), grids.size());
}

std::vector<int32_t> frame_cu_seqlens(const std::vector<VisionGrid>& grids) {
  std::vector<int32_t> cu{0};
  int64_t end = 0;
  for (const VisionGrid& g : grids)
    for (int64_t f = 0; f < g.t; ++f) {
      end += g.h * g.w;
      VEOMNI_INPUT_CHECK(end <= INT32_MAX, "vision input of more than {} patches", INT32_MAX);
      cu.push_back(static_cast<int32_t>(end));
    }
  return cu;
}

std::vector<PatchCoord> patch_coords(const std::vector<VisionGrid>& grids, int64_t m) {
  std::vector<PatchCoord> coords;
  coords.reserve(static_cast<size_t>(total_patches(grids)));
  for (const VisionGrid& g : grids)
    for (int64_t f = 0; f < g.t; ++f)
      for (int64_t by = 0; by < g.h / m; ++by)
        for (int64_t bx = 0; bx < g.w / m; ++bx)
          for (int64_t iy = 0; iy < m; ++iy)
            for (int64_t ix = 0; ix < m; ++ix) coords.push_back({by * m + iy, bx * m + ix});
  return coords;
}

}  // namespace veomni
