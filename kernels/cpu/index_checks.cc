// Range checks of index tensors read by the CPU kernels.
#include "kernels/cpu/index_checks.h"

#include <vector>

namespace veomni::ops::cpu {

void check_ids_in_range(const char* op, const char* name, const Tensor& ids, int64_t limit, const char* hint,
                        const int64_t* skip) {
  const int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if ((p[i] >= 0 && p[i] < limit) || (skip && p[i] == *skip)) continue;
    throw InputError(fmt::format("ops::{}: {}[{}] = {} is outside [0, {}){}; {}", op, name, i, p[i], limit,
                                 skip ? fmt::format(" and is not the ignore index {}", *skip) : "", hint));
  }
}

void check_experts_in_range(const char* op, const Tensor& topk_idx, int64_t num_experts) {
  const int32_t* p = topk_idx.data<int32_t>();
  for (int64_t i = 0; i < topk_idx.numel(); ++i)
    VEOMNI_CHECK(p[i] >= 0 && p[i] < num_experts, "ops::{}: topk_idx[{}] = {} is outside [0, {})", op, i, p[i],
                 num_experts);
}

void check_row_map(const char* op, const Tensor& row_map) {
  const int32_t* p = row_map.data<int32_t>();
  const int64_t n = row_map.numel();
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    VEOMNI_CHECK(p[i] >= 0 && p[i] < n && !seen[static_cast<size_t>(p[i])],
                 "ops::{}: row_map is not a permutation of [0, {}) (entry {} = {}); it must come from moe_permute", op,
                 n, i, p[i]);
    seen[static_cast<size_t>(p[i])] = true;
  }
}

}  // namespace veomni::ops::cpu
