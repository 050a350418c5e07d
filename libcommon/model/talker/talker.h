// Qwen3-Omni's talker (transformers' Qwen3OmniMoeTalkerForConditionalGeneration), forward only: an MoE decoder over
// talker input embeddings (projected thinker embeddings and hidden states plus codec embeddings) whose codec_head
// predicts the first codebook, with the code predictor filling the residual codebooks; a greedy loop turns a
// prefill into codec codes [T, num_code_groups] for code2wav, greedily or by sampling.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "generate/sampling.h"
#include "model/code2wav/code2wav.h"
#include "model/layers/biased_linear.h"
#include "model/layers/linear.h"
#include "model/kv_cache.h"
#include "model/layers/rmsnorm.h"
#include "model/param.h"
#include "model/talker/code_predictor.h"
#include "model/talker/talker_config.h"
#include "model/talker/talker_layer.h"
#include "model/weight_source.h"

namespace veomni {

// transformers' Qwen3OmniMoeTalkerResizeMLP: linear_fc2(silu(linear_fc1(x))), thinker width -> talker width.
class TalkerResizeMlp {
 public:
  // Registers `{module}.linear_fc1.{weight,bias}` [intermediate, thinker_hidden] and `{module}.linear_fc2.*`.
  TalkerResizeMlp(ParamStore& store, const std::string& module, int64_t in, int64_t intermediate, int64_t out);
  Tensor forward(const Tensor& x) const;

 private:
  BiasedLinear fc1_, fc2_;
};

// How the talker chooses its codes (transformers' generate(talker_*) arguments).
struct TalkerSampling {
  // The first codebook: greedy at temperature 0, else sampled; the repetition penalty covers the codec tokens
  // generated so far. transformers' defaults: temperature 0.9, top_k 50, top_p 1, repetition_penalty 1.05.
  SamplingOptions codec{.temperature = 0.9, .top_k = 50, .top_p = 1.0, .repetition_penalty = 1.05};
  // The residual codebooks (the code predictor; transformers always samples it so).
  SamplingOptions residual{.temperature = 1.0, .top_k = 50, .top_p = 0.8};
};

class Talker {
 public:
  struct Output {
    Tensor logits;  // [T, vocab] codec logits of the first codebook
    Tensor hidden;  // [T, hidden] final-normed hidden states (the code predictor's input)
  };
  // What a greedy generation produced.
  struct Generation {
    std::vector<int64_t> tokens;  // the first-codebook tokens sampled, EOS included when reached
    std::vector<int64_t> codes;   // [frames, num_code_groups] row-major: every token fed back, with its residuals
    int64_t frames = 0;
    bool reached_eos = false;
  };

  // Registers every parameter under `{config.param_prefix}...` (transformers' names) in its own store and
  // materialises them (zeros) on options.device.
  explicit Talker(const TalkerConfig& config, const SpeechModelOptions& options = {});
  Talker(const Talker&) = delete;
  Talker& operator=(const Talker&) = delete;

  const TalkerConfig& config() const { return config_; }
  ParamStore& store() { return store_; }
  const CodePredictor& code_predictor() const { return *code_predictor_; }
  // Reads every parameter from `source` (a missing or mis-shaped tensor is an InputError naming it and its file).
  void load(const WeightSource& source);

  // text_projection / hidden_projection of thinker rows [N, thinker_hidden_size] -> [N, hidden].
  Tensor project_text(const Tensor& thinker_embeddings) const;
  Tensor project_hidden(const Tensor& thinker_hidden) const;
  // The talker's codec embedding of tokens -> [N, hidden].
  Tensor embed_codec(const std::vector<int64_t>& tokens) const;

  // embeddings [T, hidden] at positions 0..T-1 (text-only M-RoPE is 1-D RoPE).
  Output forward(const Tensor& embeddings) const;
  // The same with explicit position ids: i64 [T] or [3, T] (interleaved M-RoPE with config().mrope_section).
  Output forward(const Tensor& embeddings, const Tensor& positions) const;

  // Greedy generation as Qwen3OmniMoeForConditionalGeneration.generate runs the talker with do_sample=False and
  // repetition_penalty=1: from prefill [P, hidden], each step takes the argmax of the last row's logits (the
  // special tokens of TalkerConfig::is_suppressed excluded) and stops at codec EOS or after max_new_tokens tokens;
  // every token fed back gets its residual codes from the code predictor, and the next input is the sum of its
  // codes' embeddings plus trailing_text[step] ([N, hidden]), or tts_pad [1, hidden] once the text is spent.
  // The prefill runs once into a KV cache; each step then runs its one new row.
  Generation generate(const Tensor& prefill, const Tensor& trailing_text, const Tensor& tts_pad,
                      int64_t max_new_tokens) const;
  // The same with transformers' logits processors: the repetition penalty over the generated tokens, the suppressed
  // tokens, then argmax or a draw from `random` (first codebook per sampling.codec, residuals per sampling.residual).
  Generation generate(const Tensor& prefill, const Tensor& trailing_text, const Tensor& tts_pad,
                      int64_t max_new_tokens, const TalkerSampling& sampling, RandomStream& random) const;

 private:
  // x on options.device in options.compute_dtype.
  Tensor converted_to(const Tensor& x) const;
  // One cached step: rows x [S, hidden] (converted) written to `cache` from row `start`, at positions start...
  // hidden holds the S final-normed rows, logits the last row's only ([1, vocab]).
  Output forward_cached(const Tensor& x, int64_t start, KvCache& cache) const;
  // One first-codebook token from a logits row [vocab]: the penalty over `generated`, the suppressed tokens out.
  int64_t choose_codec_token(const Tensor& logits_row, const std::vector<int64_t>& generated,
                             const SamplingOptions& sampling, RandomStream& random) const;

  TalkerConfig config_;
  SpeechModelOptions options_;
  ParamStore store_;
  Parameter* codec_embedding_;
  std::vector<std::unique_ptr<TalkerLayer>> layers_;
  RmsNorm norm_;
  std::unique_ptr<Linear> codec_head_;
  std::unique_ptr<TalkerResizeMlp> text_projection_, hidden_projection_;
  std::unique_ptr<CodePredictor> code_predictor_;
};

}  // namespace veomni
