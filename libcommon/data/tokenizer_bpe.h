// The byte-level BPE model of a tokenizer.json: vocabulary, merges by rank, and the merge loop for one piece.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace veomni {

// Hash of strings that also takes string_views, so lookups need no temporary std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // From the "model" object of a tokenizer.json (type BPE, byte-level vocabulary). `source` names the file in
  // errors. InputError for an unsupported option (dropout, byte_fallback, subword prefixes), a merge whose parts or
  // result are not in the vocabulary, or a vocabulary without all 256 single-byte tokens.
  static BpeModel from_json(const nlohmann::json& model, const std::string& source);

  // Appends the ids of one pre-tokenized piece (raw bytes) to `ids`, and where each token ends in the piece to
  // `ends` when it is not null.
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids, std::vector<uint32_t>* ends) const;

  // Raw bytes of token `id` (empty view for an id outside the vocabulary).
  std::string_view token_bytes(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view bytes) const;
  // One more than the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(bytes_of_id_.size()); }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const Merge* find_merge(int32_t left, int32_t right) const;
  void merge_symbols(std::string_view piece, std::vector<int32_t>& ids, std::vector<uint32_t>* ends) const;

  StringMap<int32_t> id_of_bytes_;
  std::vector<std::string> bytes_of_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;  // a piece that is a whole vocabulary entry is taken as is
};

}  // namespace veomni
