// Added tokens (<|im_start|>, <think>, ...): found in the text before BPE, leftmost-longest, as HF tokenizers does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace veomni {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // dropped by decode(skip_special_tokens)
  bool normalized = false;  // matched in the normalised text (true) or in the raw input (false)
};

struct AddedTokenMatch {
  size_t begin = 0;
  size_t length = 0;  // 0: no match
  int32_t id = 0;
};

// A byte trie over the contents of a set of added tokens.
class AddedTokenMatcher {
 public:
  void add(const AddedToken& token);
  bool empty() const { return nodes_.size() <= 1; }
  // The leftmost match at or after `from`, the longest token among those starting there; length 0 when none.
  AddedTokenMatch find(std::string_view text, size_t from) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node index, few per node
    int32_t token_id = -1;
  };
  int32_t child(int32_t node, unsigned char byte) const;

  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

}  // namespace veomni
