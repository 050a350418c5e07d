// BPE: loading the vocabulary and merges, and merging a piece's bytes lowest rank first (leftmost on ties).
#include "data/tokenizer_bpe.h"

#include <nlohmann/json.hpp>
#include <queue>

#include "core/error.h"
#include "data/tokenizer_bytes.h"

namespace veomni {

namespace {

using json = nlohmann::json;

std::string unspell(const std::string& spelled, const std::string& source, std::string_view what) {
  std::optional<std::string> bytes = byte_level_unspell(spelled);
  VEOMNI_INPUT_CHECK(bytes.has_value(), "{}: {} '{}' is not spelled in the byte-level alphabet", source, what, spelled);
  return std::move(*bytes);
}

// A merge is "left right" (older files) or ["left", "right"] (newer ones).
std::pair<std::string, std::string> merge_parts(const json& entry, const std::string& source, size_t rank) {
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string())
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  if (entry.is_string()) {
    const auto& text = entry.get_ref<const std::string&>();
    const size_t space = text.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < text.size() &&
        text.find(' ', space + 1) == std::string::npos)
      return {text.substr(0, space), text.substr(space + 1)};
  }
  throw InputError(
      fmt::format("{}: merge {} is {}, expected \"left right\" or [left, right]", source, rank, entry.dump()));
}

void check_supported(const json& model, const std::string& source) {
  const auto is = [&](const char* key, const json& expected) {
    return !model.contains(key) || model[key] == expected || (expected.is_null() && model[key].is_null());
  };
  VEOMNI_INPUT_CHECK(model.value("type", "") == "BPE", "{}: model type {} is not supported (only BPE)", source,
                     model.value("type", json("missing")).dump());
  VEOMNI_INPUT_CHECK(is("dropout", nullptr), "{}: BPE dropout is not supported (it makes encoding random)", source);
  VEOMNI_INPUT_CHECK(is("byte_fallback", false), "{}: BPE byte_fallback is not supported", source);
  VEOMNI_INPUT_CHECK(is("continuing_subword_prefix", nullptr) || is("continuing_subword_prefix", ""),
                     "{}: continuing_subword_prefix is not supported", source);
  VEOMNI_INPUT_CHECK(is("end_of_word_suffix", nullptr) || is("end_of_word_suffix", ""),
                     "{}: end_of_word_suffix is not supported", source);
}

constexpr int64_t kMaxVocabIdGap = int64_t{1} << 20;

}  // namespace

BpeModel BpeModel::from_json(const json& model, const std::string& source) {
  check_supported(model, source);
  VEOMNI_INPUT_CHECK(model.contains("vocab") && model["vocab"].is_object(), "{}: model.vocab is missing", source);
  VEOMNI_INPUT_CHECK(model.contains("merges") && model["merges"].is_array(), "{}: model.merges is missing", source);
  BpeModel bpe;
  bpe.ignore_merges_ = model.value("ignore_merges", false);
  const json& vocab = model["vocab"];
  bpe.id_of_bytes_.reserve(vocab.size());
  // Ids index a table, so they must be nearly dense: real vocabularies number 0..n-1; a few gaps are tolerated, an
  // id far beyond the entry count (which would allocate gigabytes) is refused.
  const int64_t id_limit = static_cast<int64_t>(vocab.size()) + kMaxVocabIdGap;
  for (const auto& [spelled, id_value] : vocab.items()) {
    VEOMNI_INPUT_CHECK(id_value.is_number_integer() && id_value.get<int64_t>() >= 0 && id_value.get<int64_t>() < id_limit,
                       "{}: vocab entry '{}' has id {}, expected a non-negative integer below {} (the {} entries "
                       "plus {})",
                       source, spelled, id_value.dump(), id_limit, vocab.size(), kMaxVocabIdGap);
    const auto id = id_value.get<int32_t>();
    std::string bytes = unspell(spelled, source, "vocab entry");
    if (static_cast<size_t>(id) >= bpe.bytes_of_id_.size()) bpe.bytes_of_id_.resize(static_cast<size_t>(id) + 1);
    bpe.bytes_of_id_[static_cast<size_t>(id)] = bytes;
    bpe.id_of_bytes_.emplace(std::move(bytes), id);
  }
  for (int b = 0; b < 256; ++b) {
    const std::optional<int32_t> id = bpe.token_id(std::string(1, static_cast<char>(b)));
    VEOMNI_INPUT_CHECK(id.has_value(),
                       "{}: the vocabulary lacks the byte token for 0x{:02x} ('{}'); only byte-level "
                       "BPE vocabularies are supported",
                       source, b, byte_level_spell(std::string(1, static_cast<char>(b))));
    bpe.byte_ids_[b] = *id;
  }
  const json& merges = model["merges"];
  bpe.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_parts(merges[rank], source, rank);
    const std::string left_bytes = unspell(left, source, "merge part");
    const std::string right_bytes = unspell(right, source, "merge part");
    const auto left_id = bpe.token_id(left_bytes), right_id = bpe.token_id(right_bytes);
    const auto new_id = bpe.token_id(left_bytes + right_bytes);
    VEOMNI_INPUT_CHECK(left_id && right_id && new_id,
                       "{}: merge {} ('{}' '{}'): a part or the result is not in the "
                       "vocabulary",
                       source, rank, left, right);
    // A repeated pair keeps its last rank, as HF's map built from the list does.
    bpe.merges_.insert_or_assign(pair_key(*left_id, *right_id), Merge{static_cast<uint32_t>(rank), *new_id});
  }
  return bpe;
}

std::string_view BpeModel::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_of_id_.size()) return {};
  return bytes_of_id_[static_cast<size_t>(id)];
}

std::optional<int32_t> BpeModel::token_id(std::string_view bytes) const {
  const auto it = id_of_bytes_.find(bytes);
  if (it == id_of_bytes_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& ids, std::vector<uint32_t>* ends) const {
  if (piece.empty()) return;
  if (piece.size() == 1 || ignore_merges_) {
    const std::optional<int32_t> whole =
        piece.size() == 1 ? byte_ids_[static_cast<unsigned char>(piece[0])] : token_id(piece);
    if (whole) {
      ids.push_back(*whole);
      if (ends) ends->push_back(static_cast<uint32_t>(piece.size()));
      return;
    }
  }
  merge_symbols(piece, ids, ends);
}

void BpeModel::merge_symbols(std::string_view piece, std::vector<int32_t>& ids, std::vector<uint32_t>* ends) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
    uint32_t length;     // bytes; 0 once merged into its left neighbour
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    // Lowest rank first, then leftmost: std::priority_queue pops the greatest.
    bool operator<(const Candidate& other) const { return rank != other.rank ? rank > other.rank : pos > other.pos; }
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[static_cast<size_t>(i)] = {byte_ids_[static_cast<unsigned char>(piece[static_cast<size_t>(i)])], i - 1,
                                       i + 1 < n ? i + 1 : -1, 1};
  std::priority_queue<Candidate> queue;
  const auto offer = [&](int32_t pos) {
    const Symbol& left = symbols[static_cast<size_t>(pos)];
    if (left.next < 0) return;
    if (const Merge* m = find_merge(left.id, symbols[static_cast<size_t>(left.next)].id))
      queue.push({m->rank, pos, m->new_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.length == 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // Stale when either side changed since it was queued: the pair no longer makes the same token.
    const Merge* current = find_merge(left.id, right.id);
    if (!current || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.length += right.length;
    left.next = right.next;
    right.length = 0;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) offer(left.prev);
    offer(top.pos);
  }
  uint32_t end = 0;
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    ids.push_back(symbols[static_cast<size_t>(i)].id);
    end += symbols[static_cast<size_t>(i)].length;
    if (ends) ends->push_back(end);
  }
}

}  // namespace veomni
