// Media row positions and row gather / scatter through the op API.
#include "model/thinker/media_rows.h"

#include "core/error.h"
#include "kernels/ops.h"

namespace veomni {

std::vector<int64_t> mask_positions(const Tensor& mask, int64_t length, const std::string& what) {
  if (!mask.defined()) return {};
  VEOMNI_INPUT_CHECK((mask.dtype() == DType::Bool || mask.dtype() == DType::U8) && mask.shape() == Shape{length},
                     "batch {} must be a bool [{}] tensor (one entry per token), got {}", what, length,
                     mask.describe());
  const Tensor host = mask.is_cpu() ? mask : mask.to(Device::cpu());
  const auto* flags = static_cast<const uint8_t*>(host.raw_data());
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < length; ++i)
    if (flags[i] != 0) positions.push_back(i);
  return positions;
}

Tensor positions_tensor(const std::vector<int64_t>& positions, Device device) {
  const Tensor host = Tensor::from_vector(positions, {static_cast<int64_t>(positions.size())});
  return device.is_cpu() ? host : host.to(device);
}

Tensor gather_rows(const Tensor& x, const Tensor& positions) {
  Tensor out = Tensor::empty({positions.numel(), x.dim(1)}, x.dtype(), x.device());
  if (positions.numel() > 0) ops::embedding_forward(positions, x, out);
  return out;
}

void add_rows(Tensor& x, const Tensor& positions, const Tensor& rows) {
  VEOMNI_CHECK(rows.ndim() == 2 && rows.dim(0) == positions.numel() && rows.dim(1) == x.dim(1),
               "{} rows for {} positions of {}", rows.describe(), positions.numel(), x.describe());
  if (positions.numel() > 0) ops::embedding_backward(positions, rows, x);
}

void zero_rows(Tensor& x, const Tensor& positions) {
  if (positions.numel() == 0) return;
  Tensor current = gather_rows(x, positions);
  ops::scale_(current, -1.0f);
  ops::embedding_backward(positions, current, x);
}

}  // namespace veomni
