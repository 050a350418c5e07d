// Tokenized samples held compactly, written one per dataset sample or packed into fixed-length rows.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/sample.h"

namespace veomni {

class TokenSpool;

// Samples back to back: 4 bytes per id and 1 per target flag. Only the newest up to `buffer_bytes` of them stay in
// memory; older ones go to a spool file (anonymous, in `spool_directory`) and are read back by position, so memory
// is bounded by the buffer plus 8 bytes per sample (its offset) whatever the number of tokens.
class SampleStore {
 public:
  static constexpr size_t kDefaultBufferBytes = 64u << 20;
  // The defaults hold everything in memory (no spool file).
  explicit SampleStore(std::string spool_directory = "", size_t buffer_bytes = SIZE_MAX);
  ~SampleStore();
  SampleStore(const SampleStore&) = delete;
  SampleStore& operator=(const SampleStore&) = delete;

  void add(const LabeledTokens& tokens);
  int64_t size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t length(int64_t index) const { return offsets_[index + 1] - offsets_[index]; }
  int64_t total_tokens() const { return offsets_.back(); }
  int64_t trained_tokens() const { return trained_tokens_; }
  // Tokens moved to the spool file so far.
  int64_t spooled_tokens() const { return spooled_tokens_; }

  // Sample `index` as stored: input_ids, labels (the id where trained, -100 elsewhere), attention_mask (ones),
  // position_ids (0..L-1), all i64 [L].
  Sample sample(int64_t index) const;
  // Sample `index`'s ids and target flags as they were added.
  LabeledTokens tokens(int64_t index) const;

  // A row of exactly row_length tokens: the samples of `members` in order, each with position_ids 0..L-1 and its
  // first label -100 (nothing is predicted across a boundary), then padding: input id pad_id, label -100,
  // attention_mask 0 and positions 0..P-1 (a sequence of its own that trains nothing).
  Sample packed_row(const std::vector<int64_t>& members, int64_t row_length, int32_t pad_id) const;

 private:
  // Sample `index`'s ids and flags, from the buffer or the spool.
  void read_tokens(int64_t index, int32_t* ids, uint8_t* trained) const;
  void spill();

  std::string spool_directory_;
  size_t buffer_bytes_;
  std::unique_ptr<TokenSpool> id_spool_, flag_spool_;  // 4 bytes per token, 1 byte per token
  int64_t spooled_tokens_ = 0;                              // tokens [0, spooled_tokens_) are in the spool
  std::vector<int32_t> ids_;                                // tokens from spooled_tokens_ on
  std::vector<uint8_t> trained_;
  std::vector<int64_t> offsets_{0};
  int64_t trained_tokens_ = 0;
};

// Groups samples into rows of at most row_length tokens, best fit decreasing: longest sample first, each into the
// open row it fills most tightly. Every sample must fit (length <= row_length). Each row lists its samples in input
// order; rows are ordered by their first sample. Deterministic.
std::vector<std::vector<int64_t>> pack_best_fit(const SampleStore& store, int64_t row_length);

}  // namespace veomni
