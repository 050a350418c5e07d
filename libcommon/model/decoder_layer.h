// One Qwen3 / Qwen3-MoE decoder layer (pre-norm attention + dense or sparse MLP), with optional recomputation.
//
// The layer contract (every layer under libcommon/model follows it): next to each layer a `Saved` struct holds
// exactly what its backward reads; `forward(..., save)` returns it by value with the output in an `Output` struct
// (Saved left empty when save is false), and `backward(Saved&&, ...)` consumes it, dropping each tensor once used.
// Layers keep no activations in members and have no release(): the caller owns the Saved values (a composite layer
// nests its parts', a model keeps one per layer in its saved state). Other results of a forward, such as the MoE
// router statistics, are part of its Output too.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/layer_inputs.h"
#include "model/layers/rmsnorm.h"
#include "model/mlp.h"
#include "model/model_config.h"
#include "model/moe.h"
#include "model/param.h"

namespace veomni {

class DecoderLayer {
 public:
  // With recomputation only `input` is kept and backward rebuilds the rest; otherwise the parts' Saved, `mlp` or
  // `moe` filled as the layer is dense or sparse.
  struct Saved {
    Tensor input;
    RmsNorm::Saved input_norm, post_attention_norm;
    Attention::Saved attention;
    Mlp::Saved mlp;
    MoeBlock::Saved moe;
  };
  struct Output {
    Tensor out;
    Saved saved;
    std::optional<RouterStats> router_stats;  // a sparse layer's, save or not; empty for a dense layer
  };

  // Registers `{model_prefix}layers.{index}.*` in the store's current group. fp8_linears: the attention and dense
  // MLP projections run their GEMMs in FP8 (model/layers/linear.h); the experts do not.
  DecoderLayer(ParamStore& store, const ModelConfig& config, int64_t index, const ExpertHooks* experts,
               bool recompute, const std::string& model_prefix = "model.", bool fp8_linears = false);

  // h [S_local, hidden] -> h + attn(...) + mlp(...); saved is empty unless save.
  Output forward(const Tensor& h, const LayerInputs& in, bool save) const;
  // aux_dprob: see MoeBlock::backward (ignored by a dense layer).
  Tensor backward(Saved&& saved, const Tensor& dh, const LayerInputs& in, const Tensor& aux_dprob) const;
  // Inference over this layer's KV caches (Attention::forward_cached): h [S, hidden], the layer's input, becomes its
  // output in place (the residual adds are done by the GEMMs that end the attention and the MLP), so h must be a
  // buffer that nothing else reads.
  void forward_cached(Tensor& h, const CachedStep& step, Tensor& k_cache, Tensor& v_cache) const;
  // Whether forward_cached's decode step (one token a row) of `rows` rows reads nothing back to the host: a recorded
  // graph can hold it (MoeBlock::decodes_on_device for a sparse layer; always for a dense one).
  bool decodes_on_device(int64_t rows) const;
  // Fuses the weights that decoding runs as one GEMM (a dense layer's gate and up: Mlp::fuse_gate_up).
  void fuse_for_decoding();
  // A dense layer's weights for ops::dense_decode_layers, which runs a decode step's dense layers as one op; false
  // when the layer is sparse or its attention or MLP cannot (decode_weights of Attention and Mlp).
  bool decode_weights(ops::DenseDecodeLayer& layer) const;

 private:
  // with_stats: a sparse layer reports its router statistics (not when backward recomputes the forward).
  Output compute(const Tensor& h, const LayerInputs& in, bool save, bool with_stats) const;

  bool recompute_;
  RmsNorm input_norm_;
  Attention attention_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<MoeBlock> moe_;
  RmsNorm post_attention_norm_;
};

}  // namespace veomni
