// Validation during training (data.eval_path): the run's objective on an eval set, forward only, packed into
// micro-batches as training packs them but in the set's fixed order, reduced over every rank into eval_* metrics.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/batch_plan.h"
#include "data/dataset_reader.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "model/thinker/multimodal_batch.h"
#include "train/objective.h"
#include "train/train_model.h"

namespace veomni {

// One evaluation's metrics, each the objective's metric of the same name prefixed "eval_" (eval_loss first).
using EvalMetrics = std::vector<std::pair<std::string, double>>;

struct EvalOptions {
  std::string path;                // data.eval_path
  int64_t max_seq_len = 2048;      // data.max_seq_len
  int64_t token_budget = 2048;     // the training micro-batch's: micro_batch_size x max_seq_len
  int64_t batches_per_rank = 0;    // train.eval_batches: micro-batches per data-parallel rank; 0 = the whole set
};

// This rank's micro-batch of samples from a dataset (the trainer's collation, SP slicing included).
using CollateMicroBatch =
    std::function<MultimodalBatch(const DatasetReader& dataset, const std::string& path, const std::vector<int64_t>&)>;

class Evaluator {
 public:
  // Opens the eval set and plans its micro-batches. InputError naming data.eval_path when it cannot be read, holds
  // no sample, is not of the training set's kind (its preference and rollout keys differ from train_set's) or holds
  // a preference pair longer than max_seq_len.
  Evaluator(const EvalOptions& options, const DatasetReader& train_set, const std::string& train_path);

  // Micro-batches of the eval set that an evaluation reads (all ranks together).
  size_t num_micro_batches() const { return micro_batches_.size(); }
  const DatasetReader& dataset() const { return *dataset_; }

  // Every rank calls it (collectives). Data-parallel rank r evaluates micro-batches r, r + dp, ...; a rank left
  // with fewer than the others repeats its group's first one without counting it, so every rank runs the same
  // forwards and collectives. The normaliser (label tokens, pairs) is summed over the whole eval set first, so the
  // metrics are those of one step holding the whole set: the same for every parallel layout.
  EvalMetrics evaluate(Objective& objective, TrainModel& model, Communicator& world, const DeviceMesh& mesh,
                       const CollateMicroBatch& collate) const;

 private:
  std::vector<size_t> my_micro_batches(const DeviceMesh& mesh) const;

  EvalOptions options_;
  std::unique_ptr<DatasetReader> dataset_;
  std::vector<MicroBatchPlan> micro_batches_;
};

}  // namespace veomni
