// veomni-score's run: a forward-only pass of a model over a dataset under the training layouts (FSDP, Ulysses SP,
// EP), writing per-sequence log-prob sums, per-token log-probs, rewards or values into a new dataset file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "train/score_records.h"
#include "train/train_config.h"

namespace veomni {

struct ScoreOptions {
  // model: (config_path, model_path: the weights, or the seeded HF initialisation when empty), train.seed,
  // train.device, train.precision and train.accelerator (ulysses_size, ep_size, fsdp_config).
  TrainConfig config;
  std::string checkpoint;  // a veomni checkpoint whose master weights to score with ("" = config.model)
  std::string data_path;
  std::string out_path;
  ScoreWhat what = ScoreWhat::Logprobs;
  int64_t micro_batch_tokens = 4096;  // token budget of a micro-batch (raised to the longest sample)
  bool as_reference = false;          // write the input keys plus the reference keys DPO / the PPO actor read
};

struct ScoreSummary {
  ScoreTotals totals;
  double seconds = 0;
  double perplexity() const;  // exp(-sum logps / label tokens); 0 without label tokens
};

// Every rank calls it. Rank 0 writes out_path atomically, the samples in input order, and its summary counts the
// whole run (the other ranks' summaries hold their time only). Throws InputError naming the
// file and the key for bad input (a missing file, a dataset without labels, a head the weights do not have).
ScoreSummary run_scoring(const ScoreOptions& options, std::shared_ptr<Communicator> world);

}  // namespace veomni
