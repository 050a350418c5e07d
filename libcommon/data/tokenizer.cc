// Encoding (added tokens, NFC, pre-tokenizer, BPE with a per-thread piece cache) and decoding.
#include "data/tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "data/tokenizer_unicode.h"

namespace veomni {

namespace {

// Pieces recur (words, indentation): their BPE result is kept per thread, as HF does, for pieces up to
// kMaxCachedPiece bytes. The cache is emptied when full or when another tokenizer uses the thread.
constexpr size_t kMaxCachedPiece = 256;
constexpr size_t kMaxCacheEntries = 1 << 16;

struct PieceCache {
  uint64_t owner = 0;
  // ids then end offsets, k of each
  StringMap<std::vector<uint32_t>> entries;
};

PieceCache& piece_cache(uint64_t owner) {
  thread_local PieceCache cache;
  if (cache.owner != owner || cache.entries.size() >= kMaxCacheEntries) {
    cache.entries.clear();
    cache.owner = owner;
  }
  return cache;
}

void encode_cached(const BpeModel& bpe, uint64_t owner, std::string_view piece, TokenizedText& out, size_t base) {
  const auto append = [&](const std::vector<uint32_t>& entry) {
    const size_t k = entry.size() / 2;
    for (size_t i = 0; i < k; ++i) {
      out.ids.push_back(static_cast<int32_t>(entry[i]));
      out.ends.push_back(static_cast<uint32_t>(base + entry[k + i]));
    }
  };
  if (piece.size() > kMaxCachedPiece) {
    const size_t first = out.ids.size();
    std::vector<uint32_t> ends;
    bpe.encode_piece(piece, out.ids, &ends);
    for (size_t i = 0; i < ends.size(); ++i) out.ends.push_back(static_cast<uint32_t>(base + ends[i]));
    VEOMNI_CHECK(out.ids.size() - first == ends.size(), "BPE returned {} ids and {} offsets", out.ids.size() - first,
                 ends.size());
    return;
  }
  PieceCache& cache = piece_cache(owner);
  if (const auto it = cache.entries.find(piece); it != cache.entries.end()) return append(it->second);
  std::vector<int32_t> ids;
  std::vector<uint32_t> ends;
  bpe.encode_piece(piece, ids, &ends);
  std::vector<uint32_t> entry(ids.begin(), ids.end());
  entry.insert(entry.end(), ends.begin(), ends.end());
  append(entry);
  cache.entries.emplace(std::string(piece), std::move(entry));
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  TokenizedText out;
  encode(text, out);
  return std::move(out.ids);
}

void Tokenizer::encode(std::string_view text, TokenizedText& out) const {
  if (const std::optional<size_t> bad = find_invalid_utf8(text))
    throw InputError(fmt::format("text is not valid UTF-8: byte 0x{:02x} at offset {}",
                                 static_cast<unsigned char>(text[*bad]), *bad));
  size_t cursor = 0;
  size_t at = 0;
  while (at < text.size()) {
    const AddedTokenMatch match = raw_matcher_.find(text, at);
    const size_t stretch_end = match.length ? match.begin : text.size();
    encode_stretch(text.substr(at, stretch_end - at), out, cursor);
    if (!match.length) break;
    out.ids.push_back(match.id);
    cursor += match.length;
    out.ends.push_back(static_cast<uint32_t>(cursor));
    at = match.begin + match.length;
  }
}

void Tokenizer::encode_stretch(std::string_view raw, TokenizedText& out, size_t& cursor) const {
  if (raw.empty()) return;
  if (!nfc_) return encode_normalized(raw, out, cursor);
  const std::string normalized = nfc_normalize(raw);
  encode_normalized(normalized, out, cursor);
}

void Tokenizer::encode_normalized(std::string_view text, TokenizedText& out, size_t& cursor) const {
  if (normalized_matcher_.empty()) return encode_pieces(text, out, cursor);
  size_t at = 0;
  while (at < text.size()) {
    const AddedTokenMatch match = normalized_matcher_.find(text, at);
    const size_t stretch_end = match.length ? match.begin : text.size();
    encode_pieces(text.substr(at, stretch_end - at), out, cursor);
    if (!match.length) break;
    out.ids.push_back(match.id);
    cursor += match.length;
    out.ends.push_back(static_cast<uint32_t>(cursor));
    at = match.begin + match.length;
  }
}

void Tokenizer::encode_pieces(std::string_view text, TokenizedText& out, size_t& cursor) const {
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  pre_tokenizer_.split(text, pieces);
  for (std::string_view piece : pieces)
    encode_cached(bpe_, serial_, piece, out, cursor + static_cast<size_t>(piece.data() - text.data()));
  cursor += text.size();
}

const AddedToken* Tokenizer::added_token(int32_t id) const {
  const auto it = std::lower_bound(added_.begin(), added_.end(), id,
                                   [](const AddedToken& token, int32_t value) { return token.id < value; });
  return it != added_.end() && it->id == id ? &*it : nullptr;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (const AddedToken* token = added_token(id)) {
      if (!(token->special && skip_special_tokens)) text += token->content;
      continue;
    }
    const std::string_view bytes = bpe_.token_bytes(id);
    VEOMNI_INPUT_CHECK(!bytes.empty(), "{}: token id {} (at index {}) is not in the vocabulary (ids are below {})",
                       source_, id, i, id_limit_);
    text += bytes;
  }
  return text;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  for (const AddedToken& token : added_)
    if (token.content == text) return token.id;
  return bpe_.token_id(text);
}

int32_t Tokenizer::require_token_id(std::string_view text) const {
  const std::optional<int32_t> id = token_id(text);
  VEOMNI_INPUT_CHECK(id.has_value(), "{}: '{}' is not a token of this tokenizer", source_, text);
  return *id;
}

}  // namespace veomni
