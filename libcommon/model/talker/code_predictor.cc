// The code predictor's forward pass and its residual-code loop (greedy or sampled).
#include "model/talker/code_predictor.h"

#include "core/error.h"
#include "kernels/ops.h"
#include "model/talker/speech_common.h"

namespace veomni {

CodePredictor::CodePredictor(ParamStore& store, const TalkerConfig& config)
    : config_(config.code_predictor), norm_(nullptr, config.code_predictor.rms_norm_eps) {
  const std::string model = config.param_prefix + "code_predictor.model.";
  const int64_t groups = config.num_code_groups - 1, hidden = config_.hidden_size, vocab = config_.vocab_size;
  store.begin_group("talker.code_predictor.embed");
  for (int64_t g = 0; g < groups; ++g)
    codec_embeddings_.push_back(store.add(model + "codec_embedding." + std::to_string(g) + ".weight", {vocab, hidden}));
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    store.begin_group("talker.code_predictor.layers." + std::to_string(i));
    layers_.push_back(std::make_unique<DecoderLayer>(store, config_, i, nullptr, false, model));
  }
  store.begin_group("talker.code_predictor.head");
  norm_ = RmsNorm(store.add(model + "norm.weight", {hidden}), config_.rms_norm_eps);
  for (int64_t g = 0; g < groups; ++g)
    lm_heads_.emplace_back(store, config.param_prefix + "code_predictor.lm_head." + std::to_string(g) + ".weight",
                           Shape{vocab, hidden});
}

Tensor CodePredictor::hidden(const Tensor& embeddings) const {
  const LayerInputs in = single_sequence_inputs(arange_positions(embeddings.dim(0)), config_.head_dim,
                                                config_.rope_theta, {}, embeddings.device());
  Tensor h = embeddings;
  for (const auto& layer : layers_) h = layer->forward(h, in, false).out;
  return norm_.forward(h, false).out;
}

Tensor CodePredictor::hidden_cached(const Tensor& x, int64_t start, KvCache& cache) const {
  const CachedStep step =
      single_sequence_step(start, x.dim(0), cache.capacity(), config_.head_dim, config_.rope_theta, x.device());
  Tensor h = x.clone();  // the layers update it in place
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->forward_cached(h, step, cache.k[i], cache.v[i]);
  return norm_.forward(h, false).out;
}

Tensor CodePredictor::logits(const Tensor& hidden_rows, int64_t group) const {
  VEOMNI_CHECK(group >= 0 && group < groups(), "code predictor group {} of {}", group, groups());
  return lm_heads_[static_cast<size_t>(group)].forward(hidden_rows, false).out;
}

Tensor CodePredictor::embed(const std::vector<int64_t>& codes, int64_t group) const {
  VEOMNI_CHECK(group >= 0 && group < groups(), "code predictor group {} of {}", group, groups());
  const Parameter& table = *codec_embeddings_[static_cast<size_t>(group)];
  const auto n = static_cast<int64_t>(codes.size());
  Tensor out = Tensor::empty({n, config_.hidden_size}, table.value.dtype(), table.value.device());
  ops::embedding_forward(Tensor::from_vector(codes, {n}).to(table.value.device()), table.value, out);
  return out;
}

CodePredictor::Prediction CodePredictor::predict(const Tensor& talker_hidden, const Tensor& first_embedding) const {
  RandomStream unused(0, 0);
  return predict(talker_hidden, first_embedding, SamplingOptions{}, unused);
}

CodePredictor::Prediction CodePredictor::predict(const Tensor& talker_hidden, const Tensor& first_embedding,
                                                 const SamplingOptions& sampling, RandomStream& random) const {
  Prediction result;
  result.codec_sum = first_embedding.clone();
  // The two starting rows, then one row for each group but the last: groups() + 1 cache rows.
  KvCache cache = KvCache::allocate(config_, 1, groups() + 1, first_embedding.dtype(), first_embedding.device());
  Tensor h = hidden_cached(concat_rows(talker_hidden, first_embedding), 0, cache);
  for (int64_t g = 0; g < groups(); ++g) {
    const Tensor row_logits = logits(h.slice(h.dim(0) - 1, h.dim(0)), g);
    const int64_t code =
        sampling.greedy() ? greedy_token(row_logits.select(0))
                          : choose_token(row_logits.to(Device::cpu()).to_dtype(DType::F32).to_float_vector(), {},
                                         sampling, random);
    result.codes.push_back(code);
    const Tensor row = embed({code}, g);
    ops::add_(result.codec_sum, row);
    // The last group's embedding only feeds the talker; the predictor stops after predicting it.
    if (g + 1 < groups()) h = hidden_cached(row, g + 2, cache);
  }
  return result;
}

}  // namespace veomni
