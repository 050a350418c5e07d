// Vision attention forward and backward through the op API.
#include "model/vision/vision_attention.h"

#include <cmath>

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

// `{module}.bias` [out], then `{module}.weight` [out, in] and its LoRA adapter when targeted: the order in which
// these parameters have always been registered (FSDP groups and checkpoints list them so).
BiasedLinear bias_then_weight(ParamStore& store, const std::string& module, int64_t out, int64_t in) {
  Parameter* bias = store.add(module + ".bias", {out});
  Parameter* weight = store.add(module + ".weight", {out, in});
  return BiasedLinear(weight, bias, 0, -1, LoraAdapter::attach(store, *weight));
}

}  // namespace

VisionAttention::VisionAttention(ParamStore& store, const VisionConfig& c, const std::string& prefix)
    : num_heads_(c.num_heads),
      head_dim_(c.head_dim()),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim())))),
      qkv_(bias_then_weight(store, prefix + "qkv", 3 * c.hidden_size, c.hidden_size)),
      q_(qkv_.row_block(0, c.hidden_size)),
      k_(qkv_.row_block(c.hidden_size, 2 * c.hidden_size)),
      v_(qkv_.row_block(2 * c.hidden_size, 3 * c.hidden_size)),
      proj_(bias_then_weight(store, prefix + "proj", c.hidden_size, c.hidden_size)) {}

VisionAttention::Output VisionAttention::forward(const Tensor& x, const VisionLayerInputs& in, bool save) const {
  const int64_t n = x.dim(0);
  Output result;
  Saved& saved = result.saved;
  Tensor q = take_out(q_.forward(x, save), saved.q_proj).view({n, num_heads_, head_dim_});
  Tensor k = take_out(k_.forward(x, save), saved.k_proj).view({n, num_heads_, head_dim_});
  Tensor v = take_out(v_.forward(x, save), saved.v_proj).view({n, num_heads_, head_dim_});
  ops::rope_apply(q, in.cos, in.sin, false);
  ops::rope_apply(k, in.cos, in.sin, false);
  if (in.sequence) {  // [n, H, D] -> [N, H/P, D]: every patch, this rank's heads
    q = in.sequence->seq_to_heads(q);
    k = in.sequence->seq_to_heads(k);
    v = in.sequence->seq_to_heads(v);
  }
  Tensor out = empty_like(q, q.shape());
  Tensor lse = Tensor::empty({q.dim(1), q.dim(0)}, DType::F32, q.device());
  ops::attention_forward(q, k, v, in.cu_seqlens, false, scale_, out, lse);
  const Tensor local_out = in.sequence ? in.sequence->heads_to_seq(out) : out;
  if (save) {
    saved.q = q;
    saved.k = k;
    saved.v = v;
    saved.out = out;
    saved.lse = lse;
  }
  result.out = take_out(proj_.forward(local_out.view({n, num_heads_ * head_dim_}), save), saved.proj);
  return result;
}

Tensor VisionAttention::backward(Saved&& saved, const Tensor& dy, const VisionLayerInputs& in) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.q.defined(), "vision attention backward without a saved forward");
  const int64_t n = dy.dim(0);
  Tensor dout = proj_.backward(std::move(kept.proj), dy).view({n, num_heads_, head_dim_});
  if (in.sequence) dout = in.sequence->seq_to_heads(dout);
  Tensor dq = empty_like(kept.q, kept.q.shape());
  Tensor dk = empty_like(kept.k, kept.k.shape());
  Tensor dv = empty_like(kept.v, kept.v.shape());
  ops::attention_backward(dout, kept.q, kept.k, kept.v, kept.out, kept.lse, in.cu_seqlens, false, scale_, dq, dk,
                          dv);
  kept.q = kept.k = kept.v = kept.out = kept.lse = Tensor();
  if (in.sequence) {  // back to this rank's patches, every head
    dq = in.sequence->heads_to_seq(dq);
    dk = in.sequence->heads_to_seq(dk);
    dv = in.sequence->heads_to_seq(dv);
  }
  ops::rope_apply(dq, in.cos, in.sin, true);
  ops::rope_apply(dk, in.cos, in.sin, true);
  const int64_t hidden = num_heads_ * head_dim_;
  Tensor dx = q_.backward(std::move(kept.q_proj), dq.view({n, hidden}));
  k_.backward_accumulate(std::move(kept.k_proj), dk.view({n, hidden}), dx);
  v_.backward_accumulate(std::move(kept.v_proj), dv.view({n, hidden}), dx);
  return dx;
}

}  // namespace veomni
