// The generation loop: packed prefill, then one-token decode steps over the still-running sequences, choosing each
// next token on the device (greedy) or on the host from f32 logits (sampling, a repetition penalty).
#include "generate/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "generate/decode_steps.h"
#include "generate/greedy_pipeline.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "model/kv_cache.h"

namespace veomni {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The index tables of one step on the model's device, from one upload that does not wait for the device: the token
// ids [S], their positions ([S], or the same row three times, [3, S], under M-RoPE) and the rows of the hidden
// states whose logits the step reads [N].
struct StepTables {
  Tensor ids, positions, last;
};

StepTables upload_step_tables(const std::vector<int64_t>& ids, const std::vector<int64_t>& positions,
                              const std::vector<int64_t>& last, bool mrope, Device device) {
  const int64_t s = static_cast<int64_t>(ids.size()), n = static_cast<int64_t>(last.size());
  const int64_t streams = mrope ? 3 : 1;
  std::vector<int64_t> table(ids);
  for (int64_t i = 0; i < streams; ++i) table.insert(table.end(), positions.begin(), positions.end());
  table.insert(table.end(), last.begin(), last.end());
  const Tensor uploaded = ops::upload(Tensor::from_vector(table, {static_cast<int64_t>(table.size())}), device);
  StepTables out;
  out.ids = uploaded.slice(0, s);
  out.positions = uploaded.slice(s, s + streams * s);
  if (mrope) out.positions = out.positions.view({3, s});
  out.last = uploaded.slice(s + streams * s, s + streams * s + n);
  return out;
}

// One sequence of the batch while it runs.
struct Running {
  std::vector<int64_t> tokens;  // prompt, then generated
  int64_t prompt_tokens = 0;
  int64_t position_offset = 0;  // a token's position minus its row (non-zero after a multimodal prefill)
  RandomStream random;
  bool done = false;
};

// A builder's inputs cover the batch's packed prompt tokens.
void check_prefill_inputs(const PrefillInputs& in, int64_t tokens, int64_t batch) {
  VEOMNI_CHECK(in.embeds.ndim() == 2 && in.embeds.dim(0) == tokens && in.positions.shape() == (Shape{3, tokens}) &&
                   static_cast<int64_t>(in.next_positions.size()) == batch,
               "prefill inputs {} / {} / {} next positions for {} tokens of {} prompts", in.embeds.describe(),
               in.positions.describe(), in.next_positions.size(), tokens, batch);
}

}  // namespace

void Generator::set_prefill_builder(PrefillBuilder builder) {
  VEOMNI_CHECK(options_.mrope_positions, "a prefill builder needs an M-RoPE model");
  prefill_builder_ = std::move(builder);
}

Generator::Generator(CausalLM& model, GenerateOptions options) : model_(model), options_(std::move(options)) {
  validate_sampling_options(options_.sampling);
  VEOMNI_INPUT_CHECK(options_.max_new_tokens >= 1, "--max-new-tokens {} must be at least 1", options_.max_new_tokens);
  VEOMNI_INPUT_CHECK(options_.steps_per_sync >= 1, "--steps-per-sync {} must be at least 1", options_.steps_per_sync);
  model_.body().fuse_for_decoding();
}

std::vector<Generation> Generator::generate(const std::vector<std::vector<int64_t>>& prompts, int64_t first_index) {
  const ModelConfig& config = model_.config();
  const HeadSite site = model_.body().head_site();
  std::vector<Running> running;
  int64_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    VEOMNI_CHECK(!prompts[i].empty(), "prompt {} is empty", first_index + static_cast<int64_t>(i));
    running.push_back({prompts[i], static_cast<int64_t>(prompts[i].size()), 0,
                       RandomStream(options_.sampling.seed, static_cast<uint64_t>(first_index) + i), false});
    longest = std::max(longest, static_cast<int64_t>(prompts[i].size()));
  }
  const int64_t batch = static_cast<int64_t>(running.size());
  KvCache cache = KvCache::allocate(config, batch, longest + options_.max_new_tokens, site.compute_dtype, site.device);

  // Greedy choice without a repetition penalty runs on the device: only the chosen ids come back.
  const bool device_greedy = options_.sampling.greedy() && options_.sampling.repetition_penalty == 1.0;
  auto append = [&](Running& seq, int64_t token) {
    seq.tokens.push_back(token);
    const bool stop = std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(), token) !=
                      options_.stop_token_ids.end();
    const int64_t generated = static_cast<int64_t>(seq.tokens.size()) - seq.prompt_tokens;
    seq.done = stop || generated >= options_.max_new_tokens;
  };
  // Chooses the next token of every row from the logits of the step (device_ids: the device's greedy choice, when
  // the step made it), and ends the sequences that stop.
  auto choose = [&](const std::vector<int64_t>& rows, const Tensor& device_logits, Tensor device_ids) {
    Tensor logits;
    if (observer_ || !device_greedy) logits = device_logits.to(Device::cpu());
    if (observer_) observer_(rows, logits);
    if (device_greedy) {
      if (!device_ids.defined()) {
        device_ids = Tensor::empty({device_logits.dim(0)}, DType::I64, device_logits.device());
        ops::argmax_rows(device_logits, device_ids);
      }
      const Tensor chosen = device_ids.to(Device::cpu());
      for (size_t r = 0; r < rows.size(); ++r)
        append(running[static_cast<size_t>(rows[r])], chosen.data<int64_t>()[r]);
      return;
    }
    const int64_t vocab = logits.dim(1);
    for (size_t r = 0; r < rows.size(); ++r) {
      Running& seq = running[static_cast<size_t>(rows[r])];
      const float* row = logits.data<float>() + static_cast<int64_t>(r) * vocab;
      append(seq, choose_token(std::vector<float>(row, row + vocab), seq.tokens, options_.sampling, seq.random));
    }
  };
  // The logits of the hidden states' rows `last` (one per sequence).
  auto logits_at = [&](const Tensor& hidden, const Tensor& last) {
    Tensor picked = Tensor::empty({last.numel(), hidden.dim(1)}, hidden.dtype(), hidden.device());
    ops::embedding_forward(last, hidden, picked);
    return model_.head().logits(picked);
  };
  // One forward over the step's tokens, then the logits of its rows `last`.
  auto step_logits = [&](const std::vector<int64_t>& ids, const std::vector<int64_t>& positions,
                         const std::vector<int64_t>& last, CachedStep& step) {
    const StepTables tables = upload_step_tables(ids, positions, last, options_.mrope_positions, site.device);
    return logits_at(
        model_.body().forward_cached(model_.body().embed_tokens(tables.ids), tables.positions, step, cache),
        tables.last);
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
    if (prefill_builder_) {  // the builder's embeddings and positions (media), decoding after its next positions
      PrefillInputs in = prefill_builder_(prompts, first_index);
      check_prefill_inputs(in, static_cast<int64_t>(ids.size()), batch);
      for (int64_t b = 0; b < batch; ++b) {
        Running& seq = running[static_cast<size_t>(b)];
        seq.position_offset = in.next_positions[static_cast<size_t>(b)] - seq.prompt_tokens;
      }
      const Tensor last_rows = ops::upload(Tensor::from_vector(last, {batch}), site.device);
      choose(rows,
             logits_at(model_.body().forward_cached(in.embeds, in.positions, step, cache, in.after_layer), last_rows),
             Tensor());
    } else {
      choose(rows, step_logits(ids, positions, last, step), Tensor());
    }
  }
  const double prefill_s = seconds_since(prefill_start);

  // Decode: the last token of every running sequence goes to its next cache row, at the position after its last.
  const auto decode_start = std::chrono::steady_clock::now();
  int64_t decode_steps = 0, graph_steps = 0;
  DecodeSteps decode(model_, cache, batch, options_.mrope_positions, device_greedy,
                     options_.cuda_graphs && model_.body().decodes_on_device(batch));
  auto generated = [&](const Running& seq) { return static_cast<int64_t>(seq.tokens.size()) - seq.prompt_tokens; };
  // The rows of the next step from the host (each running sequence's last token, into its next cache row, at the
  // position after its last) into `step` and `rows`; returns the steps to run from them: `most`, but none past any
  // running sequence's last token (its cache has no rows beyond).
  auto next_rows = [&](DecodeRows& step, std::vector<int64_t>& rows, int64_t most) {
    for (int64_t b = 0; b < batch; ++b) {
      const Running& seq = running[static_cast<size_t>(b)];
      if (seq.done) continue;
      const int64_t row = static_cast<int64_t>(seq.tokens.size()) - 1;
      step.ids.push_back(seq.tokens.back());
      step.positions.push_back(row + seq.position_offset);
      step.slots.push_back(static_cast<int32_t>(b));
      step.cache_rows.push_back(static_cast<int32_t>(row));
      rows.push_back(b);
      most = std::min(most, options_.max_new_tokens - generated(seq));
    }
    return most;
  };
  if (device_greedy && !observer_) {
    GreedyPipeline pipeline(decode, options_.steps_per_sync, batch);
    while (true) {
      if (!pipeline.pending()) {
        DecodeRows step;
        std::vector<int64_t> rows;
        const int64_t steps = next_rows(step, rows, options_.steps_per_sync);
        if (rows.empty()) break;
        pipeline.start(step, std::move(rows), steps);
      }
      // The next run from the device's tables, queued before this one's ids are read: at most steps_per_sync, none
      // past a row's max_new_tokens after this run; only with this run's shape (its graph).
      if (pipeline.chainable()) {
        int64_t steps = options_.steps_per_sync;
        for (int64_t b : pipeline.pending_rows())
          steps = std::min(steps, options_.max_new_tokens - generated(running[static_cast<size_t>(b)]) -
                                      pipeline.pending_steps());
        if (steps == pipeline.pending_steps()) pipeline.queue_next();
      }
      pipeline.finish([&](int64_t b, int64_t token) {
        Running& seq = running[static_cast<size_t>(b)];
        if (seq.done) return false;
        append(seq, token);
        return seq.done;
      });
    }
    decode_steps = pipeline.steps();
    graph_steps = pipeline.graph_steps();
  } else {
    while (true) {
      DecodeRows step;
      std::vector<int64_t> rows;
      next_rows(step, rows, 1);
      if (rows.empty()) break;
      const DecodeSteps::Outputs& out = decode.run(step);
      ++decode_steps;
      if (decode.graphed()) ++graph_steps;
      choose(rows, out.logits, out.greedy_ids);
    }
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
    g.decode_steps = decode_steps;
    g.graph_steps = graph_steps;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace veomni
