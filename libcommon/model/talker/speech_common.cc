// Shared helpers of the talker and the code predictor.
#include "model/talker/speech_common.h"

#include <limits>

#include "core/error.h"
#include "kernels/ops.h"

namespace veomni {

LayerInputs single_sequence_inputs(const Tensor& positions, int64_t head_dim, double theta,
                                   const std::vector<int64_t>& mrope_section, Device device) {
  const int64_t count = positions.dim(-1);
  LayerInputs in;
  in.cos = Tensor::empty({count, head_dim}, DType::F32, device);
  in.sin = Tensor::empty({count, head_dim}, DType::F32, device);
  ops::rope_tables(positions.to(device), head_dim, theta, positions.ndim() == 2 ? mrope_section : std::vector<int64_t>{},
                   in.cos, in.sin);
  in.cu_seqlens = {0, static_cast<int32_t>(count)};
  in.real_rows = count;
  return in;
}

CachedStep single_sequence_step(int64_t start, int64_t rows, int64_t capacity, int64_t head_dim, double theta,
                                Device device) {
  VEOMNI_CHECK(rows > 0 && start >= 0 && start + rows <= capacity, "{} rows from cache row {} in a cache of {}", rows,
               start, capacity);
  CachedStep step;
  step.cu_seqlens = {0, static_cast<int32_t>(rows)};
  step.slots = {0};
  step.starts = {static_cast<int32_t>(start)};
  step.upload_rows(capacity, device);
  step.cos = Tensor::empty({rows, head_dim}, DType::F32, device);
  step.sin = Tensor::empty({rows, head_dim}, DType::F32, device);
  ops::rope_tables(arange_positions(rows, start).to(device), head_dim, theta, {}, step.cos, step.sin);
  return step;
}

Tensor arange_positions(int64_t count, int64_t first) {
  std::vector<int64_t> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = first + i;
  return Tensor::from_vector(values, {count});
}

Tensor concat_rows(const Tensor& a, const Tensor& b) {
  VEOMNI_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.dim(1) == b.dim(1) && a.dtype() == b.dtype(),
               "concat_rows of {} and {}", a.describe(), b.describe());
  Tensor out = Tensor::empty({a.dim(0) + b.dim(0), a.dim(1)}, a.dtype(), a.device());
  if (a.dim(0) > 0) {
    Tensor head = out.slice(0, a.dim(0));
    head.copy_from(a);
  }
  if (b.dim(0) > 0) {
    Tensor tail = out.slice(a.dim(0), a.dim(0) + b.dim(0));
    tail.copy_from(b);
  }
  return out;
}

int64_t greedy_token(const Tensor& row, const std::function<bool(int64_t)>& banned) {
  const std::vector<float> values = row.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
  int64_t best = -1;
  float top = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < values.size(); ++i) {
    const auto token = static_cast<int64_t>(i);
    if (banned && banned(token)) continue;
    if (best < 0 || values[i] > top) best = token, top = values[i];
  }
  VEOMNI_CHECK(best >= 0, "greedy_token: every one of {} tokens is banned", values.size());
  return best;
}

}  // namespace veomni
