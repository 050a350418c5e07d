// The decode steps of one batch on its device. A step's tables (token ids, positions, cache rows) go up in one
// upload into buffers that stay put, so that on a CUDA device the whole step (the decoder layers, the LM head and
// the greedy choice) replays as one captured graph per number of running rows, with no per-op launch work. Greedy
// steps can also run several at a time: each feeds its chosen ids to the next on the device, and the host reads
// them all back once.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/step_graph.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"

namespace veomni {

// One decode step's rows: each running sequence's last token, its position (or M-RoPE's three equal streams) and
// its cache slot and row (the row the token's key and value go to; it attends to rows [0, row]).
struct DecodeRows {
  std::vector<int64_t> ids, positions;
  std::vector<int32_t> slots, cache_rows;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

class DecodeSteps {
 public:
  // `model` and `cache` must outlive this. max_rows: the batch size. greedy: every step also picks each row's
  // argmax on the device. use_graphs: record and replay on a CUDA device (ignored elsewhere).
  DecodeSteps(CausalLM& model, KvCache& cache, int64_t max_rows, bool mrope, bool greedy, bool use_graphs);
  ~DecodeSteps();

  // What a step leaves on the device, valid until the next run: the logits [n, V] (f32; in the compute dtype inside
  // run_greedy, whose steps only choose) and, when greedy, the chosen ids i64 [n].
  struct Outputs {
    Tensor logits, greedy_ids;
  };
  // Runs one step. With graphs, the first step with a given number of rows runs op by op (which also settles the
  // GEMM choices), the second records the graph, and later ones replay it; a new row count drops the old graph.
  const Outputs& run(const DecodeRows& rows);
  // Runs `steps` greedy steps from `rows` (greedy only): after each, advance_decode_tables makes its chosen ids the
  // next step's tokens, one row and position on. Returns the chosen ids i64 [steps, n] on the device, valid until the
  // next run; the same ids as `steps` calls of run() with the same rows. Graphs as run's, per (rows, steps).
  const Tensor& run_greedy(const DecodeRows& rows, int64_t steps);
  // Runs `steps` more greedy steps of the n rows of the last run_greedy or continue_greedy, from the tables its last
  // step advanced on the device: nothing is uploaded, so it can be queued before the host has read the last run's
  // ids (which this run's overwrite on the device: copy them out first). The same ids as run_greedy from the rows
  // those ids make; the same graph when `steps` is the last run's.
  const Tensor& continue_greedy(int64_t n, int64_t steps);
  // Whether the last run replayed a graph, and how many nodes it holds.
  bool graphed() const;
  size_t graph_nodes() const;

 private:
  // What a graph records: the rows, and 0 for run's single step or the steps of run_greedy.
  using GraphKey = std::pair<int64_t, int64_t>;

  void upload(const DecodeRows& rows);
  Outputs forward(int64_t n, bool f32_logits);
  Tensor forward_greedy(int64_t n, int64_t steps);
  // Runs `work` (the forward of `key`) op by op, or records it, or replays its graph (see run()).
  void execute(GraphKey key, const std::function<void()>& work);

  CausalLM& model_;
  KvCache& cache_;
  const bool mrope_, greedy_, use_graphs_;
  Tensor tokens_;  // i64 [max_rows + streams * max_rows]: ids, then positions ([streams, n] packed)
  Tensor rows_;    // i32 [3 * max_rows]: flat cache rows to write, then slots, then kv lengths
  Outputs outputs_;
  Tensor chosen_;               // run_greedy's ids
  GraphKey warm_key_{-1, -1};   // the key of the last work run op by op
  GraphKey graph_key_{-1, -1};
  bool last_graphed_ = false;
  std::unique_ptr<StepGraph> graph_;
};

}  // namespace veomni
