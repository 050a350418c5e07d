// Sequence sums over an SP-sliced packed row: the local tokens' sequences from cu_seqlens and sp_offset.
#include "train/objective_sequence_sums.h"

#include <algorithm>

#include "core/error.h"

namespace veomni {

namespace {

// The packed sequence of each local token (global index sp_offset + i in the row).
std::vector<size_t> sequence_of_tokens(const Batch& batch, int64_t local_tokens) {
  const std::vector<int32_t>& cu = batch.cu_seqlens;
  VEOMNI_CHECK(cu.size() >= 2 && batch.sp_offset >= 0 && batch.sp_offset + local_tokens <= cu.back(),
               "slice [{}, {}) outside the packed row of {} tokens", batch.sp_offset, batch.sp_offset + local_tokens,
               cu.empty() ? 0 : cu.back());
  std::vector<size_t> of(static_cast<size_t>(local_tokens));
  for (int64_t i = 0; i < local_tokens; ++i) {
    const int64_t g = batch.sp_offset + i;
    of[static_cast<size_t>(i)] = static_cast<size_t>(std::upper_bound(cu.begin(), cu.end(), g) - cu.begin() - 1);
  }
  return of;
}

// The local index of each packed sequence's last token, or -1 where another SP rank holds it.
std::vector<int64_t> local_last_tokens(const Batch& batch, int64_t local_tokens) {
  const std::vector<int32_t>& cu = batch.cu_seqlens;
  std::vector<int64_t> last(cu.size() - 1, -1);
  for (size_t j = 0; j + 1 < cu.size(); ++j) {
    const int64_t local = cu[j + 1] - 1 - batch.sp_offset;
    if (cu[j + 1] > cu[j] && local >= 0 && local < local_tokens) last[j] = local;
  }
  return last;
}

}  // namespace

std::vector<double> sequence_last_values(const Batch& batch, const Tensor& values, SequenceHooks* sequence) {
  VEOMNI_CHECK(values.dtype() == DType::F32 && values.ndim() == 1, "per-token values {} must be f32 [S]",
               values.describe());
  const Tensor host = values.is_cpu() ? values : values.to(Device::cpu());
  const float* v = host.data<float>();
  const std::vector<int64_t> last = local_last_tokens(batch, host.numel());
  std::vector<double> out(last.size(), 0.0);
  for (size_t j = 0; j < last.size(); ++j)
    if (last[j] >= 0) out[j] = static_cast<double>(v[last[j]]);
  if (sequence && sequence->sp_size() > 1) sequence->allreduce_sum(out);
  return out;
}

Tensor sequence_last_values_backward(const Batch& batch, const std::vector<double>& d_last, Device device) {
  VEOMNI_CHECK(d_last.size() + 1 == batch.cu_seqlens.size(), "{} sequence gradients for {} packed sequences",
               d_last.size(), batch.cu_seqlens.size() - 1);
  const int64_t local = batch.input_ids.numel();
  Tensor host = Tensor::zeros({local}, DType::F32);
  float* d = host.data<float>();
  const std::vector<int64_t> last = local_last_tokens(batch, local);
  for (size_t j = 0; j < last.size(); ++j)
    if (last[j] >= 0) d[last[j]] = static_cast<float>(d_last[j]);
  return host.to(device);
}

std::vector<double> sequence_sums(const Batch& batch, const Tensor& values, SequenceHooks* sequence) {
  VEOMNI_CHECK(values.dtype() == DType::F32 && values.ndim() == 1, "per-token values {} must be f32 [S]",
               values.describe());
  const Tensor host = values.is_cpu() ? values : values.to(Device::cpu());
  const float* v = host.data<float>();
  const std::vector<size_t> of = sequence_of_tokens(batch, host.numel());
  std::vector<double> sums(batch.cu_seqlens.size() - 1, 0.0);
  for (size_t i = 0; i < of.size(); ++i) sums[of[i]] += static_cast<double>(v[i]);
  if (sequence && sequence->sp_size() > 1) sequence->allreduce_sum(sums);
  return sums;
}

Tensor sequence_sums_backward(const Batch& batch, const std::vector<double>& d_sums, Device device) {
  VEOMNI_CHECK(d_sums.size() + 1 == batch.cu_seqlens.size(), "{} sequence gradients for {} packed sequences",
               d_sums.size(), batch.cu_seqlens.size() - 1);
  const int64_t local = batch.input_ids.numel();
  const std::vector<size_t> of = sequence_of_tokens(batch, local);
  Tensor host = Tensor::empty({local}, DType::F32);
  float* d = host.data<float>();
  for (size_t i = 0; i < of.size(); ++i) d[i] = static_cast<float>(d_sums[of[i]]);
  return host.to(device);
}

}  // namespace veomni
