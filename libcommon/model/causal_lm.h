// Qwen3 / Qwen3-MoE causal language model: explicit forward and backward over packed micro-batches.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "model/model_config.h"
#include "model/param.h"
#include "model/parallel_hooks.h"

namespace veomni {

struct ModelOptions {
  Device device = Device::cpu();
  DType compute_dtype = DType::F32;  // parameter/activation dtype for compute (bf16 on GPU mixed precision)
  bool recompute = false;            // activation recomputation per decoder layer (saves only layer inputs)
  ParallelHooks hooks;               // null members mean single process
  // Multimodal models (Qwen3-VL, the Qwen3-Omni thinker) nest the text model under other names and rotate with
  // M-RoPE; the defaults are the plain Qwen3 model's.
  std::string param_prefix = "model.";          // of embed_tokens, layers.{i} and norm
  std::string lm_head_name = "lm_head.weight";  // when untied
  std::vector<int64_t> mrope_section;           // non-empty: position_ids are [3, S] (interleaved M-RoPE)
};

// What one forward over a micro-batch produced (host numbers).
struct ForwardStats {
  double ce_sum = 0;          // sum of token cross-entropies over this rank's valid targets
  int64_t valid_tokens = 0;   // non-ignored targets on this rank
  double aux_loss = 0;        // load-balancing loss of this micro-batch (0 for dense or output_router_logits off);
                              // under sequence parallelism the same value on every rank of the SP group
};

class CausalLM {
 public:
  // Registers every parameter under its HF name (groups "embed", "layers.i", "head"; when tied the head group also
  // lists the embedding, whose `group` stays the embed group). Without parameter hooks the values are materialised
  // (zeros) on options.device in options.compute_dtype; expert tensors hold this expert-parallel rank's rows.
  CausalLM(const ModelConfig& config, const ModelOptions& options);
  // The same, registering into a store owned by a larger model (its groups follow the store's existing ones, and
  // only the LM's own parameters are materialised and initialised here). The store must outlive the model.
  CausalLM(const ModelConfig& config, const ModelOptions& options, ParamStore& store);
  ~CausalLM();

  const ModelConfig& config() const;
  ParamStore& params();
  // Installs (or, with nullptr, removes) the parameter hooks after construction: FSDP is built from the
  // materialised, initialised or loaded parameters and then takes them over.
  void set_param_hooks(ParamHooks* hooks);

  // HF init: normal(0, initializer_range) for linear, embedding, experts, router; ones for norms. Deterministic for
  // a seed and independent of the parallel layout (each parameter's full tensor is drawn from its own stream).
  void init_weights(uint64_t seed);

  // Forward of one micro-batch. Keeps what backward needs (unless only_loss). logits_out, when non-null, receives
  // the [S, V] f32 logits (tests and fixtures; costs memory).
  ForwardStats forward(const Batch& batch, bool only_loss = false, Tensor* logits_out = nullptr);

  // Backward of the last forward. ce_grad_scale multiplies d(ce_sum) (the trainer passes 1/global valid tokens);
  // aux_grad_scale multiplies d(aux_loss) (router_aux_loss_coef / micro-batches in the global batch).
  // Parameter grads accumulate into Parameter::grad.
  void backward(float ce_grad_scale, float aux_grad_scale);

  // Seams for models that build the input embeddings themselves (media rows written over the token embeddings)
  // and add features between decoder layers (deepstack). Called with the index of a decoder layer and, in forward,
  // that layer's output (which the callback may change in place), in backward the gradient of that output (read
  // only), before the layer's own backward.
  using LayerCallback = std::function<void(size_t layer, Tensor& h)>;
  // Token embeddings [S, hidden] in the compute dtype (runs the embedding group's hooks).
  Tensor embed_tokens(const Tensor& input_ids);
  // forward() from given input embeddings [S, hidden]; batch.input_ids are still validated (they are the targets'
  // vocabulary) but not embedded. after_layer may be empty.
  ForwardStats forward_embeds(const Batch& batch, const Tensor& inputs_embeds, const LayerCallback& after_layer,
                              bool only_loss = false, Tensor* logits_out = nullptr);
  // backward() of a forward_embeds: returns d(inputs_embeds) [S, hidden] (compute dtype) instead of accumulating
  // the embedding gradient; layer_output_grad may be empty.
  Tensor backward_embeds(float ce_grad_scale, float aux_grad_scale, const LayerCallback& layer_output_grad);
  // Accumulates d_embeds into the embedding table's gradient at input_ids (runs the embedding group's hooks).
  void embed_tokens_backward(const Tensor& input_ids, const Tensor& d_embeds);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
