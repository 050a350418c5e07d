// Counting truncated tokens and label tokens as the collator will see them (targets are labels shifted by one).
#include "train/data_coverage.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/error.h"
#include "data/batch.h"

namespace veomni {

namespace {

// The targets a sample contributes: positions 1 .. length-1 of its labels (or input_ids) within max_seq_len.
int64_t label_tokens_of(const DatasetReader& data, int64_t index, int64_t max_seq_len, bool has_labels,
                        const std::string& context) {
  const int64_t length = std::min(data.sequence_length(index), max_seq_len);
  if (!has_labels) return std::max<int64_t>(0, length - 1);
  const Tensor labels = sample_key(data.read(index, {"labels"}), "labels", context);
  VEOMNI_INPUT_CHECK(labels.dtype() == DType::I64, "{}: key 'labels' is {}, expected int64", context,
                     labels.describe());
  const int64_t* l = labels.data<int64_t>();
  int64_t count = 0;
  for (int64_t i = 1; i < std::min(length, labels.numel()); ++i) count += l[i] != kIgnoreIndex;
  return count;
}

}  // namespace

DataCoverage measure_data_coverage(const DatasetReader& data, const std::vector<int64_t>& trained_samples,
                                   int64_t max_seq_len) {
  DataCoverage c;
  c.samples = data.num_samples();
  for (int64_t i = 0; i < c.samples; ++i) {
    const int64_t length = data.sequence_length(i);
    c.tokens += length;
    if (length > max_seq_len) ++c.truncated_samples, c.truncated_tokens += length - max_seq_len;
  }
  c.has_labels = data.has_key("labels");
  for (int64_t index : trained_samples) {
    const int64_t targets =
        label_tokens_of(data, index, max_seq_len, c.has_labels, fmt::format("dataset sample {}", index));
    ++c.trained_samples;
    c.samples_without_label += targets == 0;
    c.label_tokens += targets;
  }
  return c;
}

void report_data_coverage(const DataCoverage& c, const std::string& train_path, int64_t max_seq_len) {
  if (c.truncated_samples > 0)
    spdlog::warn("data: {} of {} samples are longer than data.max_seq_len {} and are truncated: {} of {} tokens "
                 "({:.1f}%) are never trained on (hint: raise data.max_seq_len, or split long samples when "
                 "preprocessing)",
                 c.truncated_samples, c.samples, max_seq_len, c.truncated_tokens, c.tokens,
                 100.0 * static_cast<double>(c.truncated_tokens) / static_cast<double>(std::max<int64_t>(c.tokens, 1)));
  const std::string why =
      c.has_labels ? fmt::format("labels -100 at every target position within data.max_seq_len {}; a sample's first "
                                 "token is never a target",
                                 max_seq_len)
                   : fmt::format("fewer than two tokens within data.max_seq_len {}", max_seq_len);
  if (c.samples_without_label > 0 && c.label_tokens > 0)
    spdlog::warn("data: {} of the {} samples trained on have no label token ({}): they add nothing to the loss",
                 c.samples_without_label, c.trained_samples, why);
  VEOMNI_INPUT_CHECK(c.trained_samples == 0 || c.label_tokens > 0,
                     "{}: none of the {} samples the run trains on has a label token ({}; key '{}'): the loss would "
                     "be 0 and nothing learned (hint: check the labels the preprocessing wrote, or raise "
                     "data.max_seq_len to at least 2)",
                     train_path, c.trained_samples, why, c.has_labels ? "labels" : "input_ids");
}

}  // namespace veomni
