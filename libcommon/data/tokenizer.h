// A HuggingFace tokenizer.json (byte-level BPE: Qwen2/Qwen3, GPT-2 style) in C++: encode and decode, thread-safe.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer_added.h"
#include "data/tokenizer_bpe.h"
#include "data/tokenizer_pretokenizer.h"

namespace veomni {

// Token ids and, for each, the byte offset in the normalised text where it ends (the normalised text is the
// input with every stretch between added tokens NFC-normalised; it is the input itself when that is NFC).
struct TokenizedText {
  std::vector<int32_t> ids;
  std::vector<uint32_t> ends;
};

// The pipeline of HF tokenizers' Tokenizer.encode(text) for the supported subset: added tokens are split off
// first (leftmost-longest; those marked normalized are looked for after normalisation), then each stretch is
// NFC-normalised, split by the pre-tokenizer's regexes, and each piece is byte-level BPE-encoded. Nothing is added
// around the text (no BOS/EOS: the supported post-processors add none).
class Tokenizer {
 public:
  // Reads and validates a tokenizer.json; InputError naming the file for anything missing or unsupported
  // (another model type or normaliser, Split behaviours other than Isolated, added tokens with
  // lstrip/rstrip/single_word, a post-processor that adds tokens).
  static Tokenizer from_file(const std::string& path);
  // The same from parsed JSON; `source` names it in errors, `fingerprint` is recorded as its identity.
  static Tokenizer from_json(const nlohmann::json& spec, const std::string& source, std::string fingerprint = "");

  // Ids of UTF-8 text; InputError when the text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;
  // As encode, appending to `out` with the end offsets.
  void encode(std::string_view text, TokenizedText& out) const;

  // The text of `ids` (raw bytes: a cut through a multi-byte character leaves a partial one). InputError for an
  // id outside the vocabulary. Special added tokens are left out with skip_special_tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The id of a vocabulary entry or added token given as text ("<|im_end|>", "\n", "Hello"); nullopt if none.
  std::optional<int32_t> token_id(std::string_view text) const;
  // InputError naming the tokenizer when `text` is not a single token.
  int32_t require_token_id(std::string_view text) const;
  // One more than the largest id (vocabulary and added tokens).
  int32_t id_limit() const { return id_limit_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const BpeModel& model() const { return bpe_; }
  // "tokenizer.json sha256:<hex>" for a file; what the caller gave for JSON.
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& source() const { return source_; }

 private:
  friend struct TokenizerLoader;
  void encode_stretch(std::string_view raw, TokenizedText& out, size_t& cursor) const;
  void encode_normalized(std::string_view text, TokenizedText& out, size_t& cursor) const;
  void encode_pieces(std::string_view text, TokenizedText& out, size_t& cursor) const;
  const AddedToken* added_token(int32_t id) const;

  std::string source_;
  std::string fingerprint_;
  BpeModel bpe_;
  PreTokenizer pre_tokenizer_;
  bool nfc_ = false;
  std::vector<AddedToken> added_;         // by id
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized = false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized = true
  int32_t id_limit_ = 0;
  uint64_t serial_ = 0;  // tells apart tokenizers in the per-thread piece cache
};

}  // namespace veomni
