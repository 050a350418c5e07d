// The generation loop: packed prefill, then one-token decode steps over the still-running sequences, choosing each
// next token on the host from f32 logits.
#include "generate/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/kv_cache.h"

namespace veomni {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The step's positions: [S], or the same row three times, [3, S], under M-RoPE.
Tensor position_ids(const std::vector<int64_t>& positions, bool mrope) {
  const int64_t s = static_cast<int64_t>(positions.size());
  if (!mrope) return Tensor::from_vector(positions, {s});
  std::vector<int64_t> streams;
  for (int i = 0; i < 3; ++i) streams.insert(streams.end(), positions.begin(), positions.end());
  return Tensor::from_vector(streams, {3, s});
}

// One sequence of the batch while it runs.
struct Running {
  std::vector<int64_t> tokens;  // prompt, then generated
  int64_t prompt_tokens = 0;
  RandomStream random;
  bool done = false;
};

}  // namespace

Generator::Generator(CausalLM& model, GenerateOptions options) : model_(model), options_(std::move(options)) {
  validate_sampling_options(options_.sampling);
  VEOMNI_INPUT_CHECK(options_.max_new_tokens >= 1, "--max-new-tokens {} must be at least 1", options_.max_new_tokens);
}

std::vector<Generation> Generator::generate(const std::vector<std::vector<int64_t>>& prompts, int64_t first_index) {
  const ModelConfig& config = model_.config();
  const HeadSite site = model_.body().head_site();
  std::vector<Running> running;
  int64_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    VEOMNI_CHECK(!prompts[i].empty(), "prompt {} is empty", first_index + static_cast<int64_t>(i));
    running.push_back({prompts[i], static_cast<int64_t>(prompts[i].size()),
                       RandomStream(options_.sampling.seed, static_cast<uint64_t>(first_index) + i), false});
    longest = std::max(longest, static_cast<int64_t>(prompts[i].size()));
  }
  const int64_t batch = static_cast<int64_t>(running.size());
  KvCache cache = KvCache::allocate(config, batch, longest + options_.max_new_tokens, site.compute_dtype, site.device);

  // Chooses the next token of every row from the logits of the step, and ends the sequences that stop.
  auto choose = [&](const std::vector<int64_t>& rows, const Tensor& device_logits) {
    const Tensor logits = device_logits.to(Device::cpu());
    if (observer_) observer_(rows, logits);
    const int64_t vocab = logits.dim(1);
    for (size_t r = 0; r < rows.size(); ++r) {
      Running& seq = running[static_cast<size_t>(rows[r])];
      const float* row = logits.data<float>() + static_cast<int64_t>(r) * vocab;
      const int64_t token =
          choose_token(std::vector<float>(row, row + vocab), seq.tokens, options_.sampling, seq.random);
      seq.tokens.push_back(token);
      const bool stop = std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(), token) !=
                        options_.stop_token_ids.end();
      const int64_t generated = static_cast<int64_t>(seq.tokens.size()) - seq.prompt_tokens;
      seq.done = stop || generated >= options_.max_new_tokens;
    }
  };
  // The hidden states of the rows `last` (one per sequence of the step), then their logits.
  auto logits_of = [&](const Tensor& hidden, const std::vector<int64_t>& last) {
    Tensor rows = Tensor::from_vector(last, {static_cast<int64_t>(last.size())});
    Tensor picked = Tensor::empty({rows.numel(), hidden.dim(1)}, hidden.dtype(), hidden.device());
    ops::embedding_forward(rows.to(hidden.device()), hidden, picked);
    return model_.head().logits(picked);
  };
  auto embed = [&](const std::vector<int64_t>& ids) {
    return model_.body().embed_tokens(Tensor::from_vector(ids, {static_cast<int64_t>(ids.size())}));
  };

  // Prefill: every prompt packed, positions 0.. per prompt, written to cache rows 0...
  const auto prefill_start = std::chrono::steady_clock::now();
  {
    CachedStep step;
    std::vector<int64_t> ids, positions, rows, last;
    step.cu_seqlens.push_back(0);
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<int64_t>& prompt = running[static_cast<size_t>(b)].tokens;
      ids.insert(ids.end(), prompt.begin(), prompt.end());
      for (size_t p = 0; p < prompt.size(); ++p) positions.push_back(static_cast<int64_t>(p));
      step.cu_seqlens.push_back(static_cast<int32_t>(ids.size()));
      step.slots.push_back(static_cast<int32_t>(b));
      step.starts.push_back(0);
      rows.push_back(b);
      last.push_back(static_cast<int64_t>(ids.size()) - 1);
    }
    const Tensor hidden =
        model_.body().forward_cached(embed(ids), position_ids(positions, options_.mrope_positions), step, cache);
    choose(rows, logits_of(hidden, last));
  }
  const double prefill_s = seconds_since(prefill_start);

  // Decode: the last token of every running sequence goes to its next cache row, at the position after its last.
  const auto decode_start = std::chrono::steady_clock::now();
  while (true) {
    CachedStep step;
    std::vector<int64_t> ids, positions, rows, last;
    step.cu_seqlens.push_back(0);
    for (int64_t b = 0; b < batch; ++b) {
      const Running& seq = running[static_cast<size_t>(b)];
      if (seq.done) continue;
      const int64_t row = static_cast<int64_t>(seq.tokens.size()) - 1;
      ids.push_back(seq.tokens.back());
      positions.push_back(row);
      step.slots.push_back(static_cast<int32_t>(b));
      step.starts.push_back(static_cast<int32_t>(row));
      step.cu_seqlens.push_back(static_cast<int32_t>(ids.size()));
      last.push_back(static_cast<int64_t>(rows.size()));
      rows.push_back(b);
    }
    if (rows.empty()) break;
    const Tensor hidden =
        model_.body().forward_cached(embed(ids), position_ids(positions, options_.mrope_positions), step, cache);
    choose(rows, logits_of(hidden, last));
  }
  const double decode_s = seconds_since(decode_start);

  std::vector<Generation> out;
  for (const Running& seq : running) {
    Generation g;
    g.token_ids.assign(seq.tokens.begin() + seq.prompt_tokens, seq.tokens.end());
    const bool stopped = std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(),
                                   g.token_ids.back()) != options_.stop_token_ids.end();
    g.finish_reason = stopped ? "stop" : "length";
    g.prompt_tokens = seq.prompt_tokens;
    g.prefill_s = prefill_s;
    g.decode_s = decode_s;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace veomni
