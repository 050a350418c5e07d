// Decode steps: the step tables' upload into fixed buffers, the step's forward, and its CUDA graph.
#include "generate/decode_steps.h"

#include <string>

#include "core/error.h"
#include "kernels/decode_ops.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"
#include "kernels/overlapped_launches.h"

namespace veomni {

DecodeSteps::DecodeSteps(CausalLM& model, KvCache& cache, int64_t max_rows, bool mrope, bool greedy, bool use_graphs)
    : model_(model),
      cache_(cache),
      mrope_(mrope),
      greedy_(greedy),
      // Profiled ops time themselves with events read back on the host: they stay op by op.
      use_graphs_(use_graphs && !op_profile_enabled() && StepGraph::supported(model.body().head_site().device)) {
  const Device device = model.body().head_site().device;
  const int64_t streams = mrope ? 3 : 1;
  tokens_ = Tensor::zeros({max_rows * (1 + streams)}, DType::I64, device);
  rows_ = Tensor::zeros({3 * max_rows}, DType::I32, device);
}

DecodeSteps::~DecodeSteps() = default;

void DecodeSteps::upload(const DecodeRows& rows) {
  const int64_t n = rows.size(), streams = mrope_ ? 3 : 1;
  VEOMNI_CHECK(n >= 1 && n * 3 <= rows_.numel(), "a decode step of {} rows for a batch of {}", n, rows_.numel() / 3);
  const Device device = tokens_.device();
  std::vector<int64_t> tokens(rows.ids);
  for (int64_t s = 0; s < streams; ++s) tokens.insert(tokens.end(), rows.positions.begin(), rows.positions.end());
  std::vector<int32_t> cache_rows;
  cache_rows.reserve(static_cast<size_t>(3 * n));
  const int64_t capacity = cache_.capacity();
  for (int64_t i = 0; i < n; ++i)
    cache_rows.push_back(static_cast<int32_t>(rows.slots[static_cast<size_t>(i)] * capacity +
                                              rows.cache_rows[static_cast<size_t>(i)]));
  cache_rows.insert(cache_rows.end(), rows.slots.begin(), rows.slots.end());
  for (int32_t row : rows.cache_rows) cache_rows.push_back(row + 1);
  // Uploads that do not wait for the device, then copies on the stream into the buffers the graph reads.
  Tensor staged_tokens = tokens_.slice(0, n * (1 + streams));
  staged_tokens.copy_from(ops::upload(Tensor::from_vector(tokens, {n * (1 + streams)}), device));
  Tensor staged_rows = rows_.slice(0, 3 * n);
  staged_rows.copy_from(ops::upload(Tensor::from_vector(cache_rows, {3 * n}), device));
}

DecodeSteps::Outputs DecodeSteps::forward(int64_t n, bool f32_logits) {
  // The step's weights are frozen: its kernels may start while the one before still runs (OverlappedLaunches).
  const OverlappedLaunches overlapped;
  const int64_t streams = mrope_ ? 3 : 1;
  const Tensor ids = tokens_.slice(0, n);
  Tensor positions = tokens_.slice(n, n + streams * n);
  if (mrope_) positions = positions.view({3, n});
  CachedStep step;
  step.cu_seqlens.resize(static_cast<size_t>(n + 1));
  for (int64_t i = 0; i <= n; ++i) step.cu_seqlens[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  step.slots.assign(static_cast<size_t>(n), 0);  // only their count is read: the rows below hold the slots
  step.starts.assign(static_cast<size_t>(n), 0);
  step.write_rows = rows_.slice(0, n);
  step.cache_rows = rows_.slice(n, 3 * n).view({2, n});
  TextBody& body = model_.body();
  const Tensor hidden = body.forward_cached(body.embed_tokens(ids), positions, step, cache_);
  Outputs out;
  out.logits = f32_logits ? model_.head().logits(hidden) : model_.head().compute_logits(hidden);
  if (greedy_) {
    out.greedy_ids = Tensor::empty({n}, DType::I64, hidden.device());
    ops::argmax_rows(out.logits, out.greedy_ids);
  }
  return out;
}

// The steps' ids, copied out before each advance (the next step's argmax writes new ones).
Tensor DecodeSteps::forward_greedy(int64_t n, int64_t steps) {
  const int64_t streams = mrope_ ? 3 : 1;
  Tensor chosen = Tensor::empty({steps, n}, DType::I64, tokens_.device());
  Tensor tokens = tokens_.slice(0, n * (1 + streams));
  Tensor rows = rows_.slice(0, 3 * n);
  for (int64_t k = 0; k < steps; ++k) {
    const Outputs out = forward(n, false);  // the argmax of the compute dtype's logits: the f32 ones' ids
    Tensor step_ids = chosen.slice(k, k + 1).view({n});
    step_ids.copy_from(out.greedy_ids);
    ops::advance_decode_tables(out.greedy_ids, tokens, rows);  // after the last step too: continue_greedy starts there
  }
  return chosen;
}

void DecodeSteps::execute(GraphKey key, const std::function<void()>& work) {
  last_graphed_ = use_graphs_ && graph_key_ == key;
  if (last_graphed_) {
    graph_->replay();
    return;
  }
  if (graph_) {  // the key changed: the old graph and the memory it kept go back first
    graph_.reset();
    graph_key_ = {-1, -1};
    outputs_ = Outputs();
    chosen_ = Tensor();
  }
  if (use_graphs_ && warm_key_ == key) {
    graph_ = std::make_unique<StepGraph>();
    graph_->capture(tokens_.device(), work);
    graph_key_ = key;
    graph_->replay();
    last_graphed_ = true;
    return;
  }
  work();
  warm_key_ = key;
}

const DecodeSteps::Outputs& DecodeSteps::run(const DecodeRows& rows) {
  const int64_t n = rows.size();
  upload(rows);
  execute({n, 0}, [&] { outputs_ = forward(n, true); });
  return outputs_;
}

const Tensor& DecodeSteps::run_greedy(const DecodeRows& rows, int64_t steps) {
  const int64_t n = rows.size();
  VEOMNI_CHECK(greedy_ && steps >= 1, "{} greedy steps at once from decode steps {}", steps,
               greedy_ ? "that choose greedily" : "that do not choose");
  upload(rows);
  execute({n, steps}, [&] { chosen_ = forward_greedy(n, steps); });
  return chosen_;
}

const Tensor& DecodeSteps::continue_greedy(int64_t n, int64_t steps) {
  VEOMNI_CHECK(greedy_ && steps >= 1 && chosen_.defined() && chosen_.dim(1) == n,
               "{} greedy steps of {} rows continued from decode steps {}", steps, n,
               chosen_.defined() ? fmt::format("whose last greedy run had {} rows", chosen_.dim(1))
                                 : std::string("without a greedy run before"));
  execute({n, steps}, [&] { chosen_ = forward_greedy(n, steps); });
  return chosen_;
}

bool DecodeSteps::graphed() const { return last_graphed_; }

size_t DecodeSteps::graph_nodes() const { return graph_ ? graph_->nodes() : 0; }

}  // namespace veomni
