// Qwen3 attention forward and backward; Ulysses all-to-alls plug in through SequenceHooks around the core.
#include "model/attention.h"

#include <cmath>
#include <vector>

#include "core/device.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

// rep stacked [D, D] identities, [rep*D, D]: x[S*H, D] @ I^T repeats, y[S*H, rep*D] @ I sums the copies.
Tensor stacked_identities(int64_t rep, int64_t d, const Tensor& like) {
  Tensor host = Tensor::zeros({rep * d, d}, DType::F32);
  float* p = host.data<float>();
  for (int64_t r = 0; r < rep; ++r)
    for (int64_t i = 0; i < d; ++i) p[(r * d + i) * d + i] = 1.0f;
  return host.to_dtype(like.dtype()).to(like.device());
}

}  // namespace

Tensor repeat_heads(const Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const int64_t s = x.dim(0), h = x.dim(1), d = x.dim(2);
  Tensor out = empty_like(x, {s, h * rep, d});
  Tensor out2 = out.view({s * h, rep * d});
  ops::matmul(x.view({s * h, d}), false, stacked_identities(rep, d, x), true, out2);
  return out;
}

Tensor fold_repeated_heads(const Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const int64_t s = x.dim(0), h = x.dim(1) / rep, d = x.dim(2);
  VEOMNI_CHECK(h * rep == x.dim(1), "{} heads are not {} repeats", x.dim(1), rep);
  Tensor out = empty_like(x, {s, h, d});
  Tensor out2 = out.view({s * h, d});
  ops::matmul(x.view({s * h, rep * d}), false, stacked_identities(rep, d, x), false, out2);
  return out;
}

Attention::Attention(ParamStore& store, const ModelConfig& config, const std::string& prefix, bool fp8)
    : num_heads_(config.num_attention_heads),
      num_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim)))),
      q_proj_(store, prefix + "self_attn.q_proj.weight", {config.q_size(), config.hidden_size}, fp8),
      k_proj_(store, prefix + "self_attn.k_proj.weight", {config.kv_size(), config.hidden_size}, fp8),
      v_proj_(store, prefix + "self_attn.v_proj.weight", {config.kv_size(), config.hidden_size}, fp8),
      o_proj_(store, prefix + "self_attn.o_proj.weight", {config.hidden_size, config.q_size()}, fp8),
      q_norm_(store.add(prefix + "self_attn.q_norm.weight", {config.head_dim}), config.rms_norm_eps),
      k_norm_(store.add(prefix + "self_attn.k_norm.weight", {config.head_dim}), config.rms_norm_eps) {
  VEOMNI_CHECK(num_kv_heads_ > 0 && num_heads_ % num_kv_heads_ == 0, "{} attention heads over {} kv heads",
               num_heads_, num_kv_heads_);
}

SharedInputLinears Attention::qkv_proj() const { return {&q_proj_, &k_proj_, &v_proj_}; }

Tensor Attention::to_heads(const Tensor& x, const LayerInputs& in) const {
  return in.sequence ? in.sequence->seq_to_heads(x) : x;
}

Tensor Attention::to_seq(const Tensor& x, const LayerInputs& in) const {
  return in.sequence ? in.sequence->heads_to_seq(x) : x;
}

// Ulysses splits heads over P ranks; with fewer kv heads than ranks each kv head is repeated to give every rank one.
int64_t Attention::kv_repeats(const LayerInputs& in) const {
  const int64_t p = in.sequence ? in.sequence->sp_size() : 1;
  if (p <= num_kv_heads_) return 1;
  VEOMNI_INPUT_CHECK(p % num_kv_heads_ == 0,
                     "the sequence-parallel size {} is not a multiple of num_key_value_heads {}", p, num_kv_heads_);
  return p / num_kv_heads_;
}

Tensor Attention::packed_qkv_weight(const Tensor& x) const {
  if (q_norm_.trainable() || k_norm_.trainable()) return {};
  // The CUDA op holds a head in a warp's registers: 32 to 512 dimensions, a power of two.
  const int64_t d = head_dim_;
  if (!x.is_cpu() && (d < 32 || d > 512 || (d & (d - 1)) != 0)) return {};
  return PackedLinears::joined_weight({&q_proj_, &k_proj_, &v_proj_}, x);
}

void Attention::project_packed(const Tensor& x, const Tensor& weight, const LayerInputs& in, bool save, Tensor& q,
                               Tensor& k, Tensor& v, Saved& saved) const {
  const int64_t s = x.dim(0);
  Tensor qkv = take_out(PackedLinears(weight, {&q_proj_, &k_proj_, &v_proj_}).forward(x, save), saved.packed_proj);
  q = empty_like(qkv, {s, num_heads_, head_dim_});
  k = empty_like(qkv, {s, num_kv_heads_, head_dim_});
  v = empty_like(qkv, {s, num_kv_heads_, head_dim_});
  Tensor q_rstd = Tensor::empty({s * num_heads_}, DType::F32, qkv.device());
  Tensor k_rstd = Tensor::empty({s * num_kv_heads_}, DType::F32, qkv.device());
  // q_norm and k_norm share the model's eps.
  ops::qkv_norm_rope_forward(qkv, q_norm_.weight_value(), k_norm_.weight_value(), q_norm_.eps(), in.cos, in.sin, q, k,
                             v, q_rstd, k_rstd);
  if (save) {
    saved.qkv = qkv;
    saved.q_rstd = q_rstd;
    saved.k_rstd = k_rstd;
  }
}

void Attention::project(const Tensor& x, const LayerInputs& in, bool save, Tensor& q, Tensor& k, Tensor& v,
                        Saved& saved) const {
  const Tensor packed = packed_qkv_weight(x);
  if (packed.defined()) return project_packed(x, packed, in, save, q, k, v, saved);
  const int64_t s = x.dim(0);
  const std::vector<Tensor> qkv = take_out(qkv_proj().forward(x, save), saved.qkv_proj);
  q = take_out(q_norm_.forward(qkv[0].view({s, num_heads_, head_dim_}), save), saved.q_norm);
  k = take_out(k_norm_.forward(qkv[1].view({s, num_kv_heads_, head_dim_}), save), saved.k_norm);
  v = qkv[2].view({s, num_kv_heads_, head_dim_});
  ops::rope_apply(q, in.cos, in.sin, false);
  ops::rope_apply(k, in.cos, in.sin, false);
}

Attention::Output Attention::forward(const Tensor& x, const LayerInputs& in, bool save,
                                     const Tensor& residual) const {
  const int64_t s = x.dim(0);
  Output result;
  Saved& saved = result.saved;
  Tensor q, k, v;
  project(x, in, save, q, k, v, saved);

  Tensor qh = to_heads(q, in);
  const int64_t rep = kv_repeats(in);
  Tensor kh = to_heads(repeat_heads(k, rep), in);
  Tensor vh = to_heads(repeat_heads(v, rep), in);
  Tensor out_h = empty_like(qh, qh.shape());
  Tensor lse = Tensor::empty({qh.dim(1), qh.dim(0)}, DType::F32, qh.device());
  ops::attention_forward(qh, kh, vh, in.cu_seqlens, true, scale_, out_h, lse);
  if (save) {
    saved.q = qh;
    saved.k = kh;
    saved.v = vh;
    saved.out = out_h;
    saved.lse = lse;
  }
  result.out = take_out(o_proj_.forward(to_seq(out_h, in).view({s, num_heads_ * head_dim_}), save, residual),
                        saved.o_proj);
  return result;
}

Tensor Attention::backward(Saved&& saved, const Tensor& dy, const LayerInputs& in) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.q.defined(), "attention backward without a saved forward");
  const int64_t s = dy.dim(0);
  // heads_to_seq and seq_to_heads are inverse permutations, so each is the other's adjoint.
  Tensor dout_h = to_heads(o_proj_.backward(std::move(kept.o_proj), dy).view({s, num_heads_, head_dim_}), in);
  Tensor dq_h = empty_like(kept.q, kept.q.shape());
  Tensor dk_h = empty_like(kept.k, kept.k.shape());
  Tensor dv_h = empty_like(kept.v, kept.v.shape());
  ops::attention_backward(dout_h, kept.q, kept.k, kept.v, kept.out, kept.lse, in.cu_seqlens, true, scale_, dq_h,
                          dk_h, dv_h);
  kept.q = kept.k = kept.v = kept.out = kept.lse = Tensor();

  Tensor dq = to_seq(dq_h, in);
  Tensor dk = to_seq(dk_h, in);
  Tensor dv = to_seq(dv_h, in);
  dk = fold_repeated_heads(dk, dk.dim(1) / num_kv_heads_);
  dv = fold_repeated_heads(dv, dv.dim(1) / num_kv_heads_);
  if (kept.qkv.defined()) {
    Tensor dqkv = empty_like(kept.qkv, kept.qkv.shape());
    ops::qkv_norm_rope_backward(dq, dk, dv, kept.qkv, q_norm_.weight_value(), k_norm_.weight_value(), kept.q_rstd,
                                kept.k_rstd, in.cos, in.sin, dqkv);
    kept.qkv = kept.q_rstd = kept.k_rstd = Tensor();
    const Tensor weight = Tensor::join_rows({q_proj_.weight().value, k_proj_.weight().value, v_proj_.weight().value});
    VEOMNI_CHECK(weight.defined(), "attention backward: the forward packed q/k/v, but their weights are apart now");
    return PackedLinears(weight, {&q_proj_, &k_proj_, &v_proj_}).backward(std::move(kept.packed_proj), dqkv);
  }
  ops::rope_apply(dq, in.cos, in.sin, true);
  ops::rope_apply(dk, in.cos, in.sin, true);
  Tensor dq_raw = q_norm_.backward(std::move(kept.q_norm), dq).view({s, num_heads_ * head_dim_});
  Tensor dk_raw = k_norm_.backward(std::move(kept.k_norm), dk).view({s, num_kv_heads_ * head_dim_});
  return qkv_proj().backward(std::move(kept.qkv_proj), {dq_raw, dk_raw, dv.view({s, num_kv_heads_ * head_dim_})});
}

namespace {

// [S, sum of widths]: the 2-D parts side by side (each a block of columns), one strided copy per part.
Tensor pack_columns(const std::vector<Tensor>& parts) {
  const int64_t s = parts.front().dim(0);
  int64_t total = 0;
  for (const Tensor& part : parts) total += part.dim(1);
  Tensor packed = Tensor::empty({s, total}, parts.front().dtype(), parts.front().device());
  const size_t esize = dtype_size(packed.dtype());
  DeviceAllocator& mem = device_allocator(packed.device().type);
  int64_t first = 0;
  for (const Tensor& part : parts) {
    mem.copy_2d(static_cast<char*>(packed.raw_data()) + static_cast<size_t>(first) * esize,
                static_cast<size_t>(total) * esize, part.raw_data(), static_cast<size_t>(part.dim(1)) * esize,
                static_cast<size_t>(part.dim(1)) * esize, static_cast<size_t>(s), packed.device());
    first += part.dim(1);
  }
  return packed;
}

}  // namespace

void Attention::fuse_qkv() {
  Parameter& q = q_proj_.weight();
  Parameter& k = k_proj_.weight();
  Parameter& v = v_proj_.weight();
  if (qkv_current() || !q.value.defined() || !k.value.defined() || !v.value.defined()) return;
  if (q_proj_.adapter().exists() || k_proj_.adapter().exists() || v_proj_.adapter().exists()) return;
  if (q.value.dtype() != k.value.dtype() || k.value.dtype() != v.value.dtype()) return;
  const int64_t q_rows = q.value.dim(0), kv_rows = k.value.dim(0);
  Tensor fused = Tensor::empty({q_rows + 2 * kv_rows, q.value.dim(1)}, q.value.dtype(), q.value.device());
  fused.slice(0, q_rows).copy_from(q.value);
  fused.slice(q_rows, q_rows + kv_rows).copy_from(k.value);
  fused.slice(q_rows + kv_rows, q_rows + 2 * kv_rows).copy_from(v.value);
  q.value = fused.slice(0, q_rows);
  k.value = fused.slice(q_rows, q_rows + kv_rows);
  v.value = fused.slice(q_rows + kv_rows, q_rows + 2 * kv_rows);
  qkv_ = fused;
}

// The parameters still view the fused tensor (nothing replaced their values since fuse_qkv).
bool Attention::qkv_current() const {
  if (!qkv_.defined()) return false;
  const Tensor& q = q_proj_.weight().value;
  const Tensor& k = k_proj_.weight().value;
  const Tensor& v = v_proj_.weight().value;
  const char* base = static_cast<const char*>(qkv_.raw_data());
  return q.defined() && k.defined() && v.defined() && q.raw_data() == base &&
         k.raw_data() == base + q.nbytes() && v.raw_data() == base + q.nbytes() + k.nbytes();
}

bool Attention::decode_weights(ops::DenseDecodeLayer& layer) const {
  if (!qkv_current() || !o_proj_.plain()) return false;
  layer.qkv = qkv_;
  layer.q_norm = q_norm_.weight_value();
  layer.k_norm = k_norm_.weight_value();
  layer.qk_norm_eps = q_norm_.eps();  // q_norm and k_norm share the model's eps
  layer.q_heads = num_heads_;
  layer.kv_heads = num_kv_heads_;
  layer.head_dim = head_dim_;
  layer.scale = scale_;
  layer.o_proj = o_proj_.weight().value;
  return true;
}

Tensor Attention::forward_cached(const Tensor& x, const CachedStep& step, Tensor& k_cache, Tensor& v_cache) const {
  return o_proj_.forward(attend_cached(x, nullptr, step, k_cache, v_cache), false).out;
}

void Attention::add_forward_cached(const Tensor& h, const RmsNorm& input_norm, const CachedStep& step,
                                   Tensor& k_cache, Tensor& v_cache, Tensor& residual) const {
  o_proj_.forward_accumulate(attend_cached(h, &input_norm, step, k_cache, v_cache), residual);
}

Tensor Attention::attend_cached(const Tensor& x, const RmsNorm* input_norm, const CachedStep& step, Tensor& k_cache,
                                Tensor& v_cache) const {
  const int64_t s = x.dim(0);
  Tensor qkv;
  if (qkv_current()) {
    qkv = empty_like(x, {s, qkv_.dim(0)});
    if (input_norm)
      ops::rmsnorm_matmul(x, input_norm->weight_value(), input_norm->eps(), qkv_, qkv);
    else
      ops::matmul(x, false, qkv_, true, qkv);
  } else {
    const Tensor normed = input_norm ? input_norm->forward(x, false).out : x;
    qkv = pack_columns(
        {q_proj_.forward(normed, false).out, k_proj_.forward(normed, false).out, v_proj_.forward(normed, false).out});
  }
  Tensor q = Tensor::empty({s, num_heads_, head_dim_}, qkv.dtype(), qkv.device());
  Tensor k = Tensor::empty({s, num_kv_heads_, head_dim_}, qkv.dtype(), qkv.device());
  Tensor v = Tensor::empty({s, num_kv_heads_, head_dim_}, qkv.dtype(), qkv.device());
  // q_norm and k_norm share the model's eps.
  ops::qkv_norm_rope_cache_write(qkv, q_norm_.weight_value(), k_norm_.weight_value(), q_norm_.eps(), step.cos,
                                 step.sin, step.write_rows, q, k, v, k_cache, v_cache);

  Tensor out = empty_like(q, q.shape());
  if (step.one_token_each()) {
    ops::attention_kv_cache(q, k_cache, v_cache, step.cache_rows, scale_, out);
  } else {
    for (int32_t start : step.starts)
      VEOMNI_CHECK(start == 0, "a prefill step starts a sequence at cache row {}", start);
    Tensor lse = Tensor::empty({num_heads_, s}, DType::F32, q.device());
    ops::attention_forward(q, k, v, step.cu_seqlens, true, scale_, out, lse);
  }
  return out.view({s, num_heads_ * head_dim_});
}

}  // namespace veomni
