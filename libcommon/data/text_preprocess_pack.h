// Tokenized samples held compactly, written one per dataset sample or packed into fixed-length rows.
#pragma once
#include <cstdint>
#include <vector>

#include "data/chat_template.h"
#include "data/sample.h"

namespace veomni {

// Samples back to back: 4 bytes per id and 1 per target flag.
class SampleStore {
 public:
  void add(const LabeledTokens& tokens);
  int64_t size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t length(int64_t index) const { return offsets_[index + 1] - offsets_[index]; }
  int64_t total_tokens() const { return offsets_.back(); }
  int64_t trained_tokens() const { return trained_tokens_; }

  // Sample `index` as stored: input_ids, labels (the id where trained, -100 elsewhere), attention_mask (ones),
  // position_ids (0..L-1), all i64 [L].
  Sample sample(int64_t index) const;

  // A row of exactly row_length tokens: the samples of `members` in order, each with position_ids 0..L-1 and its
  // first label -100 (nothing is predicted across a boundary), then padding: input id pad_id, label -100,
  // attention_mask 0 and positions 0..P-1 (a sequence of its own that trains nothing).
  Sample packed_row(const std::vector<int64_t>& members, int64_t row_length, int32_t pad_id) const;

 private:
  std::vector<int32_t> ids_;
  std::vector<uint8_t> trained_;
  std::vector<int64_t> offsets_{0};
  int64_t trained_tokens_ = 0;
};

// Groups samples into rows of at most row_length tokens, best fit decreasing: longest sample first, each into the
// open row it fills most tightly. Every sample must fit (length <= row_length). Each row lists its samples in input
// order; rows are ordered by their first sample. Deterministic.
std::vector<std::vector<int64_t>> pack_best_fit(const SampleStore& store, int64_t row_length);

}  // namespace veomni
