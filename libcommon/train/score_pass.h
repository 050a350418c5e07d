// One forward-only micro-batch of veomni-score on this rank (pack, slice for Ulysses SP, body, head, records), and
// the checks a dataset must pass before it is scored.
#pragma once
#include <string>
#include <vector>

#include "data/collator.h"
#include "data/dataset_reader.h"
#include "train/score_records.h"
#include "train/train_model.h"

namespace veomni {

// InputError naming the file and the key when the dataset cannot be scored for `what`: input_ids always, labels for
// logprobs and value (they say which tokens are predicted), a text dataset for a text model (a multimodal model
// reads text, vl and omni datasets).
void check_score_dataset(const DatasetReader& reader, const std::string& path, ScoreWhat what, bool multimodal_model);

// Packs `samples` into one row (collate.max_seq_len must hold the longest: nothing is truncated), takes this rank's
// SP slice, runs the body and the head of `what` without saving anything for a backward, and fills this rank's
// entries of the samples' records (slots in the samples' order; their chosen_length is set from the samples).
void score_packed_samples(TrainModel& model, ScoreWhat what, const std::vector<TokenSample>& samples,
                          std::vector<ScoreSlot> slots, const CollateOptions& collate, int64_t sp_rank,
                          std::vector<double>& buffer);

// The same for a collated micro-batch (this rank's slice; a multimodal one from collate_multimodal): slots in the
// samples' order with their chosen_length already set.
void score_batch(TrainModel& model, ScoreWhat what, const MultimodalBatch& batch, const std::vector<ScoreSlot>& slots,
                 int64_t sp_rank, std::vector<double>& buffer);

}  // namespace veomni
