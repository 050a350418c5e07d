// Vision rotary tables, computed on the host in f32 with transformers' operation order.
#include "model/vision/vision_rotary.h"

#include <cmath>

#include "core/error.h"

namespace veomni {

namespace {

// 1 / theta^(arange(0, dim, 2) / dim) in f32, dim = head_dim / 2 (Qwen3VLVisionRotaryEmbedding(head_dim // 2)).
std::vector<float> vision_inv_freq(int64_t head_dim, double theta) {
  const int64_t dim = head_dim / 2;
  std::vector<float> inv;
  for (int64_t i = 0; i < dim; i += 2) {
    const float exponent = static_cast<float>(i) / static_cast<float>(dim);
    inv.push_back(1.0f / std::pow(static_cast<float>(theta), exponent));
  }
  return inv;
}

}  // namespace

void vision_rope_tables(const std::vector<PatchCoord>& coords, int64_t head_dim, double theta, Device device,
                        Tensor& cos, Tensor& sin) {
  VEOMNI_CHECK(head_dim % 4 == 0, "vision head_dim {} is not a multiple of 4", head_dim);
  const std::vector<float> inv = vision_inv_freq(head_dim, theta);
  const int64_t quarter = static_cast<int64_t>(inv.size());
  const int64_t n = static_cast<int64_t>(coords.size());
  Tensor c = Tensor::empty({n, head_dim}, DType::F32);
  Tensor s = Tensor::empty({n, head_dim}, DType::F32);
  float* pc = c.data<float>();
  float* ps = s.data<float>();
  for (int64_t p = 0; p < n; ++p) {
    const float row = static_cast<float>(coords[static_cast<size_t>(p)].row);
    const float col = static_cast<float>(coords[static_cast<size_t>(p)].col);
    for (int64_t i = 0; i < quarter; ++i) {
      const float angle_row = row * inv[static_cast<size_t>(i)];
      const float angle_col = col * inv[static_cast<size_t>(i)];
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t base = p * head_dim + half * (head_dim / 2);
        pc[base + i] = std::cos(angle_row);
        ps[base + i] = std::sin(angle_row);
        pc[base + quarter + i] = std::cos(angle_col);
        ps[base + quarter + i] = std::sin(angle_col);
      }
    }
  }
  cos = c.to(device);
  sin = s.to(device);
}

}  // namespace veomni
