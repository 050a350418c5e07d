// The added-token trie and its leftmost-longest scan.
#include "data/tokenizer_added.h"

#include "core/error.h"

namespace veomni {

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [b, next] : nodes_[static_cast<size_t>(node)].children)
    if (b == byte) return next;
  return -1;
}

void AddedTokenMatcher::add(const AddedToken& token) {
  VEOMNI_INPUT_CHECK(!token.content.empty(), "added token {} has empty content", token.id);
  int32_t node = 0;
  for (char c : token.content) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[static_cast<size_t>(node)].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  nodes_[static_cast<size_t>(node)].token_id = token.id;
  first_byte_[static_cast<unsigned char>(token.content[0])] = true;
}

AddedTokenMatch AddedTokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t begin = from; begin < text.size(); ++begin) {
    if (!first_byte_[static_cast<unsigned char>(text[begin])]) continue;
    AddedTokenMatch best;
    int32_t node = 0;
    for (size_t i = begin; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const int32_t id = nodes_[static_cast<size_t>(node)].token_id;
      if (id >= 0) best = {begin, i + 1 - begin, id};
    }
    if (best.length > 0) return best;
  }
  return {};
}

}  // namespace veomni
