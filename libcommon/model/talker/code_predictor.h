// The talker's code predictor (transformers' Qwen3OmniMoeTalkerCodePredictorModelForConditionalGeneration),
// forward only: a small dense Qwen3 decoder that, from the talker's hidden state and the first codebook's code,
// predicts the residual codebooks one after another, with one codec embedding and one lm head per residual group.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "generate/sampling.h"
#include "model/decoder_layer.h"
#include "model/kv_cache.h"
#include "model/layers/linear.h"
#include "model/layers/rmsnorm.h"
#include "model/param.h"
#include "model/talker/talker_config.h"

namespace veomni {

class CodePredictor {
 public:
  // The residual codes of one talker step and the sum of the codec embeddings of all its codes (the first code's
  // talker embedding plus each residual code's embedding): the talker's next input before the text part.
  struct Prediction {
    std::vector<int64_t> codes;  // num_code_groups - 1 residual codes
    Tensor codec_sum;            // [1, hidden]
  };

  // Registers `{config.param_prefix}code_predictor.model.{codec_embedding.{g},layers.{i},norm}.*` and
  // `{config.param_prefix}code_predictor.lm_head.{g}.weight` (g < num_code_groups - 1) in `store`.
  CodePredictor(ParamStore& store, const TalkerConfig& config);

  int64_t groups() const { return static_cast<int64_t>(lm_heads_.size()); }  // num_code_groups - 1
  // Final-normed hidden states [n, hidden] of the embeddings [n, hidden] at positions 0..n-1.
  Tensor hidden(const Tensor& embeddings) const;
  // Logits [n, vocab] of residual group `group` (0-based: the second codebook is group 0) from hidden rows.
  Tensor logits(const Tensor& hidden_rows, int64_t group) const;
  // Embedding [n, hidden] of codes of residual group `group`.
  Tensor embed(const std::vector<int64_t>& codes, int64_t group) const;
  // Greedy prediction: talker_hidden [1, hidden] (the talker's last final-normed hidden state) and first_embedding
  // [1, hidden] (the talker's codec embedding of the first code) start the sequence; each step appends the
  // embedding of the code just predicted, run as one row over a KV cache.
  Prediction predict(const Tensor& talker_hidden, const Tensor& first_embedding) const;
  // The same choosing each code with `sampling` (greedy at temperature 0) from `random`: transformers' talker
  // samples its code predictor with top_k 50, top_p 0.8 at temperature 1 whatever the talker's own sampling.
  Prediction predict(const Tensor& talker_hidden, const Tensor& first_embedding, const SamplingOptions& sampling,
                     RandomStream& random) const;

 private:
  // Final-normed hidden states of rows x [S, hidden] written to `cache` from row `start` (positions start..).
  Tensor hidden_cached(const Tensor& x, int64_t start, KvCache& cache) const;

  ModelConfig config_;
  std::vector<Parameter*> codec_embeddings_;
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  RmsNorm norm_;
  std::vector<Linear> lm_heads_;
};

}  // namespace veomni
