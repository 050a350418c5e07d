// CPU mixture-of-experts routing, permutation and its inverse (kernels/ops.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace veomni::ops::cpu {

void moe_route(const Tensor& router_logits, int64_t k, bool norm_topk_prob, Tensor& probs, Tensor& topk_idx,
               Tensor& topk_weight);
void moe_route_backward(const Tensor& dtopk_weight, const Tensor& dprobs_extra, const Tensor& probs,
                        const Tensor& topk_idx, bool norm_topk_prob, Tensor& dlogits);
void moe_router_stats(const Tensor& probs, const Tensor& topk_idx, int64_t rows, Tensor& stats);
void moe_aux_dprobs(const Tensor& dprob, int64_t rows, Tensor& dprobs);
void moe_permute(const Tensor& x, const Tensor& topk_idx, int64_t num_experts, Tensor& permuted, Tensor& row_map,
                 std::vector<int64_t>& expert_counts);
void moe_permute_backward(const Tensor& dpermuted, const Tensor& row_map, int64_t k, Tensor& dx);
void moe_unpermute(const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& out);
void moe_unpermute_backward(const Tensor& dout, const Tensor& y, const Tensor& row_map, const Tensor& topk_weight,
                            Tensor& dy, Tensor& dtopk_weight);

}  // namespace veomni::ops::cpu
