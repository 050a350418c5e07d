// The vision tower's 2-D rotary embedding: cos/sin tables from each patch's (row, col) coordinate.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/vision/vision_grid.h"

namespace veomni {

// cos and sin [N, head_dim] (f32 on `device`) in the half-split layout rope_apply expects. With
// inv_freq[i] = theta^(-2i/(head_dim/2)), i < head_dim/4, a patch at (row, col) has the angles
// a = [row*inv_freq, col*inv_freq] (head_dim/2 values) and the table row cat(a, a) (transformers' rot_pos_emb and
// Qwen3-Omni's axial rotary, computed in f32 as they are).
void vision_rope_tables(const std::vector<PatchCoord>& coords, int64_t head_dim, double theta, Device device,
                        Tensor& cos, Tensor& sin);

}  // namespace veomni
