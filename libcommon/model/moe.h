// Qwen3-MoE sparse block: softmax top-k router, dropless experts in the v5 stacked layout, expert-parallel seams.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/layer_inputs.h"
#include "model/layers/lora_experts.h"
#include "model/model_config.h"
#include "model/param.h"

namespace veomni {

// Router statistics of one forward over this rank's tokens, the inputs of the load-balancing loss. They stay on the
// model's device (ops::moe_router_stats): the body reads every layer's at once.
struct RouterStats {
  Tensor stats;      // f32 [2, E]: row 0 the (token, slot) pairs routed to expert e (sum over k of one_hot(topk)),
                     // row 1 the sum over tokens of the softmax probability of expert e
  int64_t rows = 0;  // tokens routed
};

class MoeBlock {
 public:
  struct Saved {
    Tensor x, probs, topk_idx, topk_weight, row_map, local_x, gate_up_out, act, y_permuted;
    std::vector<int64_t> local_counts;  // rows per local expert after the dispatch
    std::shared_ptr<void> exchange;     // the expert-parallel exchange's state (null without EP)
    int64_t real_rows = 0;              // rows that count in the aux loss (not SP padding)
    Tensor gate_up_lora_xa, down_lora_xa;  // the expert adapters' x A^T (undefined without applied adapters)
  };
  struct Output {
    Tensor out;
    Saved saved;
    RouterStats router_stats;  // filled whether or not save: a forward-only pass reports the aux loss too
  };

  // Registers `{prefix}mlp.gate.weight` [E, H], `{prefix}mlp.experts.gate_up_proj` [E, 2I, H] (gate rows first) and
  // `{prefix}mlp.experts.down_proj` [E, H, I], each expert tensor followed by its LoRA adapter when targeted; the
  // expert tensors (and independent adapters) hold the rows of this expert-parallel rank. The router takes none.
  MoeBlock(ParamStore& store, const ModelConfig& config, const std::string& prefix, const ExpertHooks* experts);

  // saved is empty unless save; router_stats undefined unless with_stats (a recomputation inside backward needs none).
  Output forward(const Tensor& x, const LayerInputs& in, bool save, bool with_stats = true) const;
  // aux_dprob f32 [E] on the model's device: d(loss)/d(prob[t, e]) from the load-balancing loss, the same for every
  // real token (undefined: none).
  Tensor backward(Saved&& saved, const Tensor& dy, const LayerInputs& in, const Tensor& aux_dprob) const;

  // A decode step's block in one process (no statistics, nothing saved): the router, then the experts through
  // ops::moe_decode_experts, which reads nothing back to the host, when decodes_on_device(rows); else forward, whose
  // expert counts go to the host.
  Tensor forward_decode(const Tensor& x) const;
  // Whether forward_decode of `rows` rows reads nothing back to the host (so that a recorded graph can hold it): no
  // adapters apply to the experts, and rows * top-k is at most kDecodePairsOnDevice. The bound keeps the device
  // path's one-column-a-warp products to steps of a few rows an expert: past 16 rows of the Qwen3-30B-A3B shape
  // (128 pairs) the grouped GEMMs of training, with their read of the counts, are faster on an H100 even though the
  // step then runs op by op (bench/RESULTS.md, "MoE decode steps on the device").
  bool decodes_on_device(int64_t rows) const;
  static constexpr int64_t kDecodePairsOnDevice = 128;

 private:
  Tensor route(const Tensor& x, Tensor& topk_idx, Tensor& topk_weight) const;
  Tensor router_backward(const Saved& saved, const Tensor& dtopk_weight, const Tensor& aux_dprob) const;

  Parameter* router_;
  Parameter* gate_up_;
  Parameter* down_;
  ExpertLora gate_up_lora_, down_lora_;
  int64_t num_experts_;
  int64_t top_k_;
  bool norm_topk_prob_;
};

}  // namespace veomni
