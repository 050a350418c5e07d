// Shared fixtures of the model tests: tiny Qwen3 / Qwen3-MoE configs, packed batches, loss and gradient helpers.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "data/batch.h"
#include "model/causal_lm.h"
#include "model/model_config.h"

namespace veomni::test {

inline ModelConfig tiny_dense_config(bool tied) {
  ModelConfig c;
  c.model_type = "qwen3";
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  c.initializer_range = 0.02;
  return c;
}

// Three layers: 0 and 2 sparse, 1 dense (mlp_only_layers), so one model covers both MLP kinds.
inline ModelConfig tiny_moe_config(bool tied) {
  ModelConfig c = tiny_dense_config(tied);
  c.model_type = "qwen3_moe";
  c.num_hidden_layers = 3;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 8;
  c.norm_topk_prob = true;
  c.mlp_only_layers = {1};
  c.output_router_logits = true;
  c.router_aux_loss_coef = 0.01;
  return c;
}

// A packed row of sequences with the given lengths: random ids, targets shifted inside each sequence (the last
// token of every sequence and the first `ignored_prefix` targets of each are ignored), positions restarting at 0.
inline Batch packed_batch(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed, int64_t ignored_prefix = 0) {
  Rng rng(seed);
  std::vector<int64_t> ids, targets, positions;
  Batch b;
  b.cu_seqlens = {0};
  for (int64_t len : lengths) {
    const size_t start = ids.size();
    for (int64_t i = 0; i < len; ++i) {
      ids.push_back(static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(vocab))));
      positions.push_back(i);
    }
    for (int64_t i = 0; i < len; ++i) {
      const bool predicts = i + 1 < len && i >= ignored_prefix;
      targets.push_back(predicts ? ids[start + static_cast<size_t>(i) + 1] : kIgnoreIndex);
    }
    b.cu_seqlens.push_back(static_cast<int32_t>(ids.size()));
  }
  const int64_t s = static_cast<int64_t>(ids.size());
  b.input_ids = Tensor::from_vector(ids, {s});
  b.target_ids = Tensor::from_vector(targets, {s});
  b.position_ids = Tensor::from_vector(positions, {s});
  for (int64_t t : targets) b.valid_tokens += t != kIgnoreIndex;
  return b;
}

// Sequence b of a packed batch as a batch of its own.
inline Batch sequence_of(const Batch& packed, size_t b) {
  const int64_t begin = packed.cu_seqlens[b], end = packed.cu_seqlens[b + 1];
  Batch one;
  one.input_ids = packed.input_ids.slice(begin, end).clone();
  one.target_ids = packed.target_ids.slice(begin, end).clone();
  one.position_ids = packed.position_ids.slice(begin, end).clone();
  one.cu_seqlens = {0, static_cast<int32_t>(end - begin)};
  for (int64_t i = 0; i < end - begin; ++i) one.valid_tokens += one.target_ids.item_as_double(i) != kIgnoreIndex;
  return one;
}

inline std::map<std::string, std::vector<float>> grads_of(CausalLM& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : model.params().all()) out[p->name] = p->grad.to_float_vector();
  return out;
}

inline std::map<std::string, std::vector<float>> values_of(CausalLM& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& p : model.params().all()) out[p->name] = p->value.to_float_vector();
  return out;
}

}  // namespace veomni::test
