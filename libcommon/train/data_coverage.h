// What of the data a run will not learn from, measured at start-up: tokens cut by data.max_seq_len, and samples
// without a single label token (labels all -100, or too short once truncated: a sample's first token is never a
// target). Reported as warnings; a run with no label token at all is refused.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset_reader.h"

namespace veomni {

struct DataCoverage {
  // Over the whole dataset, from the lengths held in memory.
  int64_t samples = 0;
  int64_t tokens = 0;
  int64_t truncated_samples = 0;
  int64_t truncated_tokens = 0;  // tokens beyond max_seq_len, never trained on
  // Over the samples the run trains on (those counted; see measure_data_coverage).
  bool has_labels = false;  // the dataset has a labels key (else input_ids are the targets)
  int64_t trained_samples = 0;
  int64_t samples_without_label = 0;
  int64_t label_tokens = 0;
};

// Truncation over every sample of `data`; label tokens over `trained_samples` (dataset indices, read for their
// labels only when the dataset has them).
DataCoverage measure_data_coverage(const DatasetReader& data, const std::vector<int64_t>& trained_samples,
                                   int64_t max_seq_len);

// Warns (with counts) about truncated samples and samples without a label token; InputError naming train_path,
// the labels key and data.max_seq_len when samples were counted and none has a label token.
void report_data_coverage(const DataCoverage& coverage, const std::string& train_path, int64_t max_seq_len);

}  // namespace veomni
