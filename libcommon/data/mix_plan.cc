// Weighted source draws and per-source shuffled passes, from counter-derived seeds.
#include "data/mix_plan.h"

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace veomni {

namespace {

// Distinct streams for the draws of an epoch and for each (source, epoch, pass) shuffle.
uint64_t stream_seed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return mix64(mix64(mix64(mix64(seed ^ 0x6d69782d706c616eull) + a) + b) + c);
}

constexpr uint64_t kDrawStream = UINT64_MAX;

// One source's order: pass after pass, each its own permutation.
class SourceCursor {
 public:
  SourceCursor(int64_t num_samples, int64_t source, int64_t epoch, const BatchPlanOptions& options)
      : n_(num_samples), source_(source), epoch_(epoch), options_(options) {}

  int64_t next() {
    if (at_ == static_cast<int64_t>(order_.size())) start_pass();
    return order_[static_cast<size_t>(at_++)];
  }

 private:
  void start_pass() {
    order_.resize(static_cast<size_t>(n_));
    std::iota(order_.begin(), order_.end(), 0);
    if (options_.shuffle) {
      Rng rng(stream_seed(options_.seed, static_cast<uint64_t>(source_), static_cast<uint64_t>(epoch_),
                          static_cast<uint64_t>(pass_)));
      for (int64_t i = n_ - 1; i > 0; --i)
        std::swap(order_[static_cast<size_t>(i)], order_[rng.uniform_int(static_cast<uint64_t>(i + 1))]);
    }
    ++pass_;
    at_ = 0;
  }

  int64_t n_, source_, epoch_;
  const BatchPlanOptions& options_;
  int64_t pass_ = 0, at_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace

int64_t mixed_epoch_draws(const std::vector<MixSource>& sources) {
  int64_t draws = 0;
  for (const MixSource& s : sources)
    if (s.weight > 0) draws += s.num_samples;
  return draws;
}

std::vector<int64_t> mix_first_indices(const std::vector<MixSource>& sources) {
  std::vector<int64_t> first(sources.size(), 0);
  for (size_t s = 1; s < sources.size(); ++s) first[s] = first[s - 1] + sources[s - 1].num_samples;
  return first;
}

std::vector<int64_t> mixed_epoch_order(const std::vector<MixSource>& sources, int64_t epoch,
                                       const BatchPlanOptions& options) {
  double total = 0;
  for (const MixSource& s : sources) {
    VEOMNI_CHECK(std::isfinite(s.weight) && s.weight >= 0, "mix weight {}", s.weight);
    VEOMNI_CHECK(s.weight == 0 || s.num_samples > 0, "a weighted source without samples");
    total += s.weight;
  }
  VEOMNI_CHECK(total > 0, "mix weights sum to {}", total);
  std::vector<double> cumulative;
  std::vector<SourceCursor> cursors;
  for (size_t s = 0; s < sources.size(); ++s) {
    cumulative.push_back((cumulative.empty() ? 0.0 : cumulative.back()) + sources[s].weight / total);
    cursors.emplace_back(sources[s].num_samples, static_cast<int64_t>(s), epoch, options);
  }
  const std::vector<int64_t> first = mix_first_indices(sources);
  Rng draws(stream_seed(options.seed, kDrawStream, static_cast<uint64_t>(epoch), 0));
  const int64_t count = mixed_epoch_draws(sources);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double u = draws.uniform();
    size_t s = 0;
    // The last positive-weight source takes what rounding leaves above its cumulative sum.
    while (s + 1 < sources.size() && (u >= cumulative[s] || sources[s].weight == 0)) ++s;
    while (sources[s].weight == 0) --s;
    order.push_back(first[s] + cursors[s].next());
  }
  return order;
}

}  // namespace veomni
