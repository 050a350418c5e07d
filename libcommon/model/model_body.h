// The model body every objective trains: embeddings (and media towers) and decoder layers over one packed
// micro-batch, returning the hidden states of its tokens; one interface for text and multimodal models.
//
// The engine is body + heads + objective:
//   body      (this file)        tokens (+ media) -> hidden [S_local, hidden] of the last decoder layer
//   heads     (model/heads/)     final norm + projection: LM cross-entropy, LM label log-probs, value per token
//   objective (train/objective.h) combines head outputs into the loss and its metrics; the trainer loop knows
//                                 objectives only through that interface, and models only through this one.
// Forward returns what backward needs as a value (BodySaved) that the caller hands back to backward; nothing of a
// micro-batch is kept in the body or its parts between the two calls: a body's BodySaved nests its parts' Saved
// values (decoder layers, and in the multimodal body the vision tower's and audio encoder's), the layer contract of
// model/decoder_layer.h.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "model/model_config.h"
#include "model/param.h"
#include "model/parallel_hooks.h"
#include "model/thinker/multimodal_batch.h"

namespace veomni {

// Where heads attach to a body: the FSDP parameter group "head", which holds model.norm.weight and every head's
// projection. HF puts model.norm in the body; here each head applies it first, inside the one gather / one
// reduce-scatter window of that group per micro-batch (a group's backward window may open only once per
// micro-batch, and the norm's gradient must be complete when it closes). Parameter names and groups are the same.
struct HeadSite {
  ParamStore* store = nullptr;
  size_t group = 0;                   // index of the "head" group in store->groups()
  Parameter* final_norm = nullptr;    // <prefix>norm.weight [hidden]
  float norm_eps = 1e-6f;
  Parameter* embed_tokens = nullptr;  // <prefix>embed_tokens.weight (an LM head tied to it reads it)
  Device device = Device::cpu();
  DType compute_dtype = DType::F32;
  // No parameter hooks yet at construction: heads materialise their projections (zeros) as the body did.
  bool materialize = true;
};

// What a body's backward needs, as its forward left it. Each body defines its own; callers only move it back.
struct BodySaved {
  virtual ~BodySaved() = default;
};

struct BodyOutput {
  Tensor hidden;        // [S_local, hidden] in the compute dtype: the last decoder layer's output (before model.norm)
  double aux_loss = 0;  // router load-balancing loss of this micro-batch (0: dense, or output_router_logits off);
                        // under sequence parallelism the same value on every rank of the SP group
  std::unique_ptr<BodySaved> saved;  // null when forward ran with save = false
};

class ModelBody {
 public:
  virtual ~ModelBody() = default;

  virtual ParamStore& params() = 0;
  // The language model's config (vocabulary, hidden size, MoE settings).
  virtual const ModelConfig& text_config() const = 0;
  virtual HeadSite head_site() = 0;
  // HF init of the body's parameters and of every parameter registered after them (the heads').
  virtual void init_weights(uint64_t seed) = 0;
  // Installs (or, with nullptr, removes) FSDP hooks on the body's groups.
  virtual void set_param_hooks(ParamHooks* hooks) = 0;
  // The sequence-parallel hooks the body runs under (null: no SP); objectives sum per-sequence values through them.
  virtual SequenceHooks* sequence_hooks() const = 0;

  // Validates the batch (InputError: bad shapes, ids outside the vocabulary, media that do not match their masks)
  // and runs the body. A text body reads batch.text only. save: return what backward needs in the output's saved
  // (null otherwise).
  virtual BodyOutput forward(const MultimodalBatch& batch, bool save) = 0;
  // Backward of the forward that returned `saved`, which it consumes; a null or foreign saved is an internal error.
  // d_hidden: the gradient of forward's hidden [S_local, hidden] (compute dtype); aux_grad_scale multiplies
  // d(aux_loss). Parameter gradients accumulate (Parameter::grad, through the hooks).
  virtual void backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale) = 0;
};

}  // namespace veomni
