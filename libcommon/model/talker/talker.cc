// The talker: parameter registration in transformers' names, forward, projections and the codec loop.
#include "model/talker/talker.h"

#include <limits>
#include <string>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/hf_loader.h"
#include "model/layers/common.h"
#include "model/talker/speech_common.h"

namespace veomni {

TalkerResizeMlp::TalkerResizeMlp(ParamStore& store, const std::string& module, int64_t in, int64_t intermediate,
                                 int64_t out)
    : fc1_(store, module + ".linear_fc1", intermediate, in), fc2_(store, module + ".linear_fc2", out, intermediate) {}

Tensor TalkerResizeMlp::forward(const Tensor& x) const {
  const Tensor h = fc1_.forward(x, false).out;
  Tensor act = Tensor::empty(h.shape(), h.dtype(), h.device());
  ops::silu_forward(h, act);
  return fc2_.forward(act, false).out;
}

Talker::Talker(const TalkerConfig& config, const SpeechModelOptions& options)
    : config_(config), options_(options), norm_(nullptr, config.text.rms_norm_eps) {
  const std::string& p = config_.param_prefix;
  const ModelConfig& text = config_.text;
  store_.begin_group("talker.embed");
  codec_embedding_ = store_.add(p + "model.codec_embedding.weight", {text.vocab_size, text.hidden_size});
  for (int64_t i = 0; i < text.num_hidden_layers; ++i) {
    store_.begin_group("talker.layers." + std::to_string(i));
    layers_.push_back(std::make_unique<TalkerLayer>(store_, config_, p + "model.layers." + std::to_string(i) + "."));
  }
  store_.begin_group("talker.head");
  norm_ = RmsNorm(store_.add(p + "model.norm.weight", {text.hidden_size}), text.rms_norm_eps);
  codec_head_ = std::make_unique<Linear>(store_, p + "codec_head.weight", Shape{text.vocab_size, text.hidden_size});
  store_.begin_group("talker.projections");
  text_projection_ = std::make_unique<TalkerResizeMlp>(store_, p + "text_projection", config_.thinker_hidden_size,
                                                       text.intermediate_size, text.hidden_size);
  hidden_projection_ = std::make_unique<TalkerResizeMlp>(store_, p + "hidden_projection", config_.thinker_hidden_size,
                                                         text.intermediate_size, text.hidden_size);
  code_predictor_ = std::make_unique<CodePredictor>(store_, config_);
  store_.materialize_all(options_.device, options_.compute_dtype);
}

Tensor Talker::converted_to(const Tensor& x) const { return converted(x.to(options_.device), options_.compute_dtype); }

void Talker::load(const WeightSource& source) { load_hf_weights(store_, source); }

Tensor Talker::project_text(const Tensor& thinker_embeddings) const {
  return text_projection_->forward(thinker_embeddings);
}

Tensor Talker::project_hidden(const Tensor& thinker_hidden) const { return hidden_projection_->forward(thinker_hidden); }

Tensor Talker::embed_codec(const std::vector<int64_t>& tokens) const {
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t t : tokens)
    VEOMNI_INPUT_CHECK(t >= 0 && t < config_.text.vocab_size, "talker: codec token {} is outside the vocabulary [0, {})",
                       t, config_.text.vocab_size);
  Tensor out = Tensor::empty({n, config_.text.hidden_size}, options_.compute_dtype, options_.device);
  ops::embedding_forward(Tensor::from_vector(tokens, {n}).to(options_.device), codec_embedding_->value, out);
  return out;
}

Talker::Output Talker::forward(const Tensor& embeddings) const {
  return forward(embeddings, arange_positions(embeddings.dim(0)));
}

Talker::Output Talker::forward(const Tensor& embeddings, const Tensor& positions) const {
  VEOMNI_INPUT_CHECK(embeddings.ndim() == 2 && embeddings.dim(1) == config_.text.hidden_size && embeddings.dim(0) > 0,
                     "talker: input embeddings are {}, expected [T > 0, {}]", embeddings.describe(),
                     config_.text.hidden_size);
  VEOMNI_INPUT_CHECK(positions.dim(-1) == embeddings.dim(0) && (positions.ndim() == 1 || positions.dim(0) == 3),
                     "talker: position ids are {}, expected [{}] or [3, {}]", positions.describe(), embeddings.dim(0),
                     embeddings.dim(0));
  const Tensor x = converted_to(embeddings);
  const LayerInputs in =
      single_sequence_inputs(positions, config_.text.head_dim, config_.text.rope_theta, config_.mrope_section,
                             options_.device);
  Tensor h = x;
  for (const auto& layer : layers_) h = layer->forward(h, in);
  Output out;
  out.hidden = norm_.forward(h, false).out;
  out.logits = codec_head_->forward(out.hidden, false).out;
  return out;
}

Talker::Output Talker::forward_cached(const Tensor& x, int64_t start, KvCache& cache) const {
  const CachedStep step = single_sequence_step(start, x.dim(0), cache.capacity(), config_.text.head_dim,
                                               config_.text.rope_theta, options_.device);
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) h = layers_[i]->forward_cached(h, step, cache.k[i], cache.v[i]);
  Output out;
  out.hidden = norm_.forward(h, false).out;
  out.logits = codec_head_->forward(out.hidden.slice(x.dim(0) - 1, x.dim(0)), false).out;
  return out;
}

Talker::Generation Talker::generate(const Tensor& prefill, const Tensor& trailing_text, const Tensor& tts_pad,
                                    int64_t max_new_tokens) const {
  TalkerSampling greedy;
  greedy.codec = SamplingOptions{};
  greedy.residual = SamplingOptions{};
  RandomStream unused(0, 0);
  return generate(prefill, trailing_text, tts_pad, max_new_tokens, greedy, unused);
}

int64_t Talker::choose_codec_token(const Tensor& logits_row, const std::vector<int64_t>& generated,
                                   const SamplingOptions& sampling, RandomStream& random) const {
  std::vector<float> logits = logits_row.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
  apply_repetition_penalty(logits, generated, sampling.repetition_penalty);
  for (size_t i = 0; i < logits.size(); ++i)
    if (config_.is_suppressed(static_cast<int64_t>(i))) logits[i] = -std::numeric_limits<float>::infinity();
  SamplingOptions no_penalty = sampling;
  no_penalty.repetition_penalty = 1.0;
  return choose_token(std::move(logits), {}, no_penalty, random);
}

Talker::Generation Talker::generate(const Tensor& prefill, const Tensor& trailing_text, const Tensor& tts_pad,
                                    int64_t max_new_tokens, const TalkerSampling& sampling,
                                    RandomStream& random) const {
  const int64_t hidden = config_.text.hidden_size;
  VEOMNI_INPUT_CHECK(max_new_tokens >= 1, "talker: max_new_tokens must be at least 1, got {}", max_new_tokens);
  VEOMNI_INPUT_CHECK(trailing_text.ndim() == 2 && trailing_text.dim(1) == hidden,
                     "talker: trailing text embeddings are {}, expected [N, {}]", trailing_text.describe(), hidden);
  VEOMNI_INPUT_CHECK(tts_pad.numel() == hidden, "talker: tts_pad embedding is {}, expected [1, {}]",
                     tts_pad.describe(), hidden);
  const Tensor text = converted_to(trailing_text);
  const Tensor pad = converted_to(tts_pad).view({1, hidden});
  VEOMNI_INPUT_CHECK(prefill.ndim() == 2 && prefill.dim(1) == hidden && prefill.dim(0) > 0,
                     "talker: prefill embeddings are {}, expected [P > 0, {}]", prefill.describe(), hidden);
  Generation result;
  // The last fed-back row is step max_new_tokens - 2: the prompt plus max_new_tokens - 1 rows at most.
  KvCache cache = KvCache::allocate(config_.text, 1, prefill.dim(0) + max_new_tokens - 1, options_.compute_dtype,
                                    options_.device);
  int64_t length = prefill.dim(0);
  Output out = forward_cached(converted_to(prefill), 0, cache);
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int64_t last = out.hidden.dim(0) - 1;
    const int64_t token = choose_codec_token(out.logits.select(0), result.tokens, sampling.codec, random);
    result.tokens.push_back(token);
    if (token == config_.codec_eos_token_id) {
      result.reached_eos = true;
      break;
    }
    if (step + 1 == max_new_tokens) break;  // the last token is never fed back, so it gets no residual codes
    const Tensor first = embed_codec({token});
    CodePredictor::Prediction residual =
        code_predictor_->predict(out.hidden.slice(last, last + 1), first, sampling.residual, random);
    result.codes.push_back(token);
    result.codes.insert(result.codes.end(), residual.codes.begin(), residual.codes.end());
    ++result.frames;
    Tensor next = residual.codec_sum;
    ops::add_(next, step < text.dim(0) ? text.slice(step, step + 1) : pad);
    out = forward_cached(next, length, cache);
    ++length;
  }
  return result;
}

}  // namespace veomni
