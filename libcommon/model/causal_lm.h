// Qwen3 / Qwen3-MoE causal language model: explicit forward and backward over packed micro-batches.
#pragma once
#include <cstdint>
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
