// MoE block forward and backward: route, permute, dispatch, grouped expert GEMMs, combine, unpermute.
#include "model/moe.h"

#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

// The expert rows [begin, end) this rank holds under expert parallelism.
void set_local_experts(Parameter* param, int64_t num_experts, const ExpertHooks* experts) {
  const int64_t ep = experts ? experts->ep_size() : 1;
  const int64_t rank = experts ? experts->ep_rank() : 0;
  VEOMNI_INPUT_CHECK(ep >= 1 && num_experts % ep == 0, "num_experts {} is not divisible by the expert-parallel size {}",
                     num_experts, ep);
  param->local_begin = rank * (num_experts / ep);
  param->local_end = (rank + 1) * (num_experts / ep);
}

}  // namespace

MoeBlock::MoeBlock(ParamStore& store, const ModelConfig& config, const std::string& prefix,
                   const ExpertHooks* experts)
    : num_experts_(config.num_experts),
      top_k_(config.num_experts_per_tok),
      norm_topk_prob_(config.norm_topk_prob) {
  VEOMNI_INPUT_CHECK(top_k_ >= 1 && top_k_ <= num_experts_, "num_experts_per_tok {} must be in [1, num_experts {}]",
                     top_k_, num_experts_);
  const int64_t e = num_experts_, h = config.hidden_size, i = config.moe_intermediate_size;
  router_ = store.add(prefix + "mlp.gate.weight", {e, h});
  gate_up_ = store.add(prefix + "mlp.experts.gate_up_proj", {e, 2 * i, h}, true);
  set_local_experts(gate_up_, e, experts);
  gate_up_lora_ = ExpertLora::attach(store, *gate_up_);
  down_ = store.add(prefix + "mlp.experts.down_proj", {e, h, i}, true);
  set_local_experts(down_, e, experts);
  down_lora_ = ExpertLora::attach(store, *down_);
}

// Router logits in the compute dtype (as HF's nn.Linear gate), softmax/top-k in f32. Returns the f32 probs.
Tensor MoeBlock::route(const Tensor& x, Tensor& topk_idx, Tensor& topk_weight) const {
  const int64_t n = x.dim(0);
  Tensor logits = empty_like(x, {n, num_experts_});
  ops::matmul(x, false, router_->value, true, logits);
  Tensor probs = Tensor::empty({n, num_experts_}, DType::F32, x.device());
  topk_idx = Tensor::empty({n, top_k_}, DType::I32, x.device());
  topk_weight = Tensor::empty({n, top_k_}, DType::F32, x.device());
  ops::moe_route(converted(logits, DType::F32), top_k_, norm_topk_prob_, probs, topk_idx, topk_weight);
  return probs;
}

MoeBlock::Output MoeBlock::forward(const Tensor& x, const LayerInputs& in, bool save, bool with_stats) const {
  const int64_t n = x.dim(0);
  Tensor topk_idx, topk_weight;
  Tensor probs = route(x, topk_idx, topk_weight);

  Tensor permuted = empty_like(x, {n * top_k_, x.dim(1)});
  Tensor row_map = Tensor::empty({n * top_k_}, DType::I32, x.device());
  std::vector<int64_t> counts;
  ops::moe_permute(x, topk_idx, num_experts_, permuted, row_map, counts);
  // The load-balancing statistics cover real tokens only, so SP padding does not change the aux loss. They stay on
  // the device: moe_permute's counts are the layer's one read back.
  Output result;
  const int64_t real_rows = std::min(n, in.real_rows);
  if (with_stats) {
    result.router_stats.stats = Tensor::empty({2, num_experts_}, DType::F32, x.device());
    ops::moe_router_stats(probs, topk_idx, real_rows, result.router_stats.stats);
    result.router_stats.rows = real_rows;
  }

  std::vector<int64_t> local_counts = counts;
  std::shared_ptr<void> exchange;
  Tensor local = in.experts ? in.experts->dispatch(permuted, counts, local_counts, exchange) : permuted;
  const Tensor& w_gate_up = gate_up_->value;
  const Tensor& w_down = down_->value;
  VEOMNI_CHECK(static_cast<int64_t>(local_counts.size()) == w_gate_up.dim(0),
               "{} local expert groups for {} local experts", local_counts.size(), w_gate_up.dim(0));
  Tensor gate_up = empty_like(local, {local.dim(0), w_gate_up.dim(1)});
  ops::grouped_matmul(local, w_gate_up, true, local_counts, gate_up);
  Tensor gate_up_xa = gate_up_lora_.forward(local, local_counts, gate_up, save);
  Tensor act = empty_like(local, {local.dim(0), w_down.dim(2)});
  ops::swiglu_fused_forward(gate_up, act);
  Tensor expert_out = empty_like(local, {local.dim(0), w_down.dim(1)});
  ops::grouped_matmul(act, w_down, true, local_counts, expert_out);
  Tensor down_xa = down_lora_.forward(act, local_counts, expert_out, save);
  Tensor y_permuted = in.experts ? in.experts->combine(expert_out, exchange) : expert_out;

  result.out = empty_like(x, x.shape());
  ops::moe_unpermute(y_permuted, row_map, topk_weight, result.out);
  if (save) {
    Saved& saved = result.saved;
    saved.x = x;
    saved.probs = probs;
    saved.topk_idx = topk_idx;
    saved.topk_weight = topk_weight;
    saved.row_map = row_map;
    saved.local_x = local;
    saved.gate_up_out = gate_up;
    saved.act = act;
    saved.y_permuted = y_permuted;
    saved.local_counts = local_counts;
    saved.exchange = exchange;
    saved.real_rows = real_rows;
    saved.gate_up_lora_xa = gate_up_xa;
    saved.down_lora_xa = down_xa;
  }
  return result;
}

bool MoeBlock::decodes_on_device(int64_t rows) const {
  return !gate_up_lora_.active() && !down_lora_.active() && rows * top_k_ <= kDecodePairsOnDevice;
}

Tensor MoeBlock::forward_decode(const Tensor& x) const {
  if (!decodes_on_device(x.dim(0))) {
    LayerInputs in;
    in.real_rows = x.dim(0);
    return forward(x, in, /*save=*/false, /*with_stats=*/false).out;
  }
  Tensor topk_idx, topk_weight;
  route(x, topk_idx, topk_weight);
  Tensor out = empty_like(x, x.shape());
  ops::moe_decode_experts(x, topk_idx, topk_weight, gate_up_->value, down_->value, out);
  return out;
}

Tensor MoeBlock::router_backward(const Saved& saved, const Tensor& dtopk_weight, const Tensor& aux_dprob) const {
  const int64_t n = saved.probs.dim(0);
  Tensor dprobs_extra;
  if (aux_dprob.defined()) {
    dprobs_extra = Tensor::empty({n, num_experts_}, DType::F32, saved.probs.device());
    ops::moe_aux_dprobs(aux_dprob, saved.real_rows, dprobs_extra);
  }
  Tensor dlogits = Tensor::empty({n, num_experts_}, DType::F32, saved.probs.device());
  ops::moe_route_backward(dtopk_weight, dprobs_extra, saved.probs, saved.topk_idx, norm_topk_prob_, dlogits);
  return converted(dlogits, saved.x.dtype());
}

Tensor MoeBlock::backward(Saved&& saved, const Tensor& dy, const LayerInputs& in, const Tensor& aux_dprob) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.x.defined(), "MoE backward without a saved forward");
  Tensor dy_permuted = empty_like(kept.y_permuted, kept.y_permuted.shape());
  Tensor dtopk_weight = empty_like(kept.topk_weight, kept.topk_weight.shape());
  ops::moe_unpermute_backward(dy, kept.y_permuted, kept.row_map, kept.topk_weight, dy_permuted, dtopk_weight);
  kept.y_permuted = Tensor();

  Tensor dexpert_out = in.experts ? in.experts->combine_backward(dy_permuted, kept.exchange) : dy_permuted;
  Tensor dact = empty_like(kept.act, kept.act.shape());
  ops::grouped_matmul(dexpert_out, down_->value, false, kept.local_counts, dact);
  if (kept.down_lora_xa.defined())
    down_lora_.backward(kept.act, std::move(kept.down_lora_xa), dexpert_out, kept.local_counts, dact);
  if (down_->trainable)
    ops::grouped_matmul_weight_grad(dexpert_out, kept.act, kept.local_counts, grad_of(*down_), true);
  Tensor dgate_up = empty_like(kept.gate_up_out, kept.gate_up_out.shape());
  ops::swiglu_fused_backward(dact, kept.gate_up_out, dgate_up);
  Tensor dlocal = empty_like(kept.local_x, kept.local_x.shape());
  ops::grouped_matmul(dgate_up, gate_up_->value, false, kept.local_counts, dlocal);
  if (kept.gate_up_lora_xa.defined())
    gate_up_lora_.backward(kept.local_x, std::move(kept.gate_up_lora_xa), dgate_up, kept.local_counts, dlocal);
  if (gate_up_->trainable)
    ops::grouped_matmul_weight_grad(dgate_up, kept.local_x, kept.local_counts, grad_of(*gate_up_), true);
  Tensor dpermuted = in.experts ? in.experts->dispatch_backward(dlocal, kept.exchange) : dlocal;

  Tensor dx = empty_like(kept.x, kept.x.shape());
  ops::moe_permute_backward(dpermuted, kept.row_map, top_k_, dx);
  Tensor drouter_logits = router_backward(kept, dtopk_weight, aux_dprob);
  ops::matmul(drouter_logits, false, router_->value, false, dx, 1.0f, 1.0f);
  if (router_->trainable) ops::matmul(drouter_logits, true, kept.x, false, grad_of(*router_), 1.0f, 1.0f);
  return dx;
}

}  // namespace veomni
