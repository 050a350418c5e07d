// Next-token choice: repetition penalty, greedy argmax, and temperature / top-k / top-p sampling in that order (the
// order of transformers' logits processors and warpers).
#include "generate/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "core/error.h"
#include "core/rng.h"

namespace veomni {

void validate_sampling_options(const SamplingOptions& o) {
  VEOMNI_INPUT_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
                     "--temperature {} must be >= 0 (0 decodes greedily)", o.temperature);
  VEOMNI_INPUT_CHECK(o.top_k >= 0, "--top-k {} must be >= 0 (0 keeps every token)", o.top_k);
  VEOMNI_INPUT_CHECK(std::isfinite(o.top_p) && o.top_p > 0 && o.top_p <= 1, "--top-p {} must be in (0, 1]", o.top_p);
  VEOMNI_INPUT_CHECK(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0,
                     "--repetition-penalty {} must be > 0 (1 leaves the logits as they are)", o.repetition_penalty);
}

namespace {


// Token ids by descending logit, ties to the lower id.
std::vector<int64_t> ranked_ids(std::span<const float> logits) {
  std::vector<int64_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  return ids;
}

}  // namespace

RandomStream::RandomStream(uint64_t seed, uint64_t stream) : state_(seed) {
  uint64_t mix = stream;
  state_ ^= splitmix64(mix);
}

double RandomStream::uniform() { return static_cast<double>(splitmix64(state_) >> 11) * 0x1.0p-53; }

void apply_repetition_penalty(std::span<float> logits, std::span<const int64_t> seen, double penalty) {
  if (penalty == 1.0) return;
  std::unordered_set<int64_t> done;
  for (int64_t id : seen) {
    if (id < 0 || id >= static_cast<int64_t>(logits.size()) || !done.insert(id).second) continue;
    float& x = logits[static_cast<size_t>(id)];
    x = x > 0 ? static_cast<float>(x / penalty) : static_cast<float>(x * penalty);
  }
}

Candidates sampling_candidates(std::span<const float> logits, const SamplingOptions& options) {
  VEOMNI_CHECK(!logits.empty() && options.temperature > 0, "sampling over {} logits at temperature {}",
               logits.size(), options.temperature);
  std::vector<int64_t> ids = ranked_ids(logits);
  if (options.top_k > 0 && options.top_k < static_cast<int64_t>(ids.size()))
    ids.resize(static_cast<size_t>(options.top_k));
  // Softmax of logits / T over the kept tokens (the others are -inf after top-k).
  const double top = logits[static_cast<size_t>(ids.front())] / options.temperature;
  std::vector<double> probs(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    probs[i] = std::exp(logits[static_cast<size_t>(ids[i])] / options.temperature - top);
    total += probs[i];
  }
  for (double& p : probs) p /= total;
  // Top-p keeps the most likely tokens up to and including the one whose cumulative probability reaches p.
  if (options.top_p < 1.0) {
    double cumulative = 0;
    size_t keep = 0;
    while (keep < ids.size()) {
      cumulative += probs[keep++];
      if (cumulative >= options.top_p) break;
    }
    ids.resize(keep);
    probs.resize(keep);
    const double kept = std::accumulate(probs.begin(), probs.end(), 0.0);
    for (double& p : probs) p /= kept;
  }
  return {std::move(ids), std::move(probs)};
}

int64_t choose_token(std::vector<float> logits, std::span<const int64_t> seen, const SamplingOptions& options,
                     RandomStream& random) {
  apply_repetition_penalty(logits, seen, options.repetition_penalty);
  if (options.greedy())
    return std::max_element(logits.begin(), logits.end()) - logits.begin();  // the first maximum: the lower id
  const Candidates candidates = sampling_candidates(logits, options);
  const double u = random.uniform();
  double cumulative = 0;
  for (size_t i = 0; i < candidates.ids.size(); ++i) {
    cumulative += candidates.probs[i];
    if (u < cumulative) return candidates.ids[i];
  }
  return candidates.ids.back();  // u above the rounded total
}

}  // namespace veomni
