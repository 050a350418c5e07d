// Choosing the next token from a row of logits: greedy or sampled (temperature, top-k, top-p), after the
// repetition penalty, with one seeded random stream per sequence (transformers' generate semantics).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace veomni {

struct SamplingOptions {
  double temperature = 0.0;         // 0: greedy (argmax, ties to the lower id); > 0: sample softmax(logits / T)
  int64_t top_k = 0;                // sampling keeps the k most likely tokens (0: all)
  double top_p = 1.0;               // sampling keeps the smallest most-likely set whose probability reaches p (1: all)
  double repetition_penalty = 1.0;  // > 0; logits of tokens already in the sequence: > 0 divided, < 0 multiplied
  uint64_t seed = 0;                // with the prompt's index, seeds that prompt's random stream

  bool greedy() const { return temperature == 0.0; }
};

// InputError naming the option for a value outside its range (temperature < 0, top_k < 0, top_p outside (0, 1],
// repetition_penalty <= 0, non-finite values).
void validate_sampling_options(const SamplingOptions& options);

// A reproducible stream of uniform doubles in [0, 1) (splitmix64), the same on every platform.
class RandomStream {
 public:
  RandomStream(uint64_t seed, uint64_t stream);
  double uniform();

 private:
  uint64_t state_;
};

// transformers' RepetitionPenaltyLogitsProcessor on one row: every distinct token of `seen` (prompt and generated
// tokens) has its logit divided by penalty when positive, multiplied by it otherwise.
void apply_repetition_penalty(std::span<float> logits, std::span<const int64_t> seen, double penalty);

// The tokens sampling may draw from after temperature, top-k and top-p, with their probabilities (summing to 1),
// most likely first (ties to the lower id).
struct Candidates {
  std::vector<int64_t> ids;
  std::vector<double> probs;
};
Candidates sampling_candidates(std::span<const float> logits, const SamplingOptions& options);

// The next token of a row of logits: the repetition penalty over `seen`, then argmax (greedy) or a draw from
// sampling_candidates with `random`.
int64_t choose_token(std::vector<float> logits, std::span<const int64_t> seen, const SamplingOptions& options,
                     RandomStream& random);

}  // namespace veomni
