// Pre-tokenization: the regex Split steps of a tokenizer.json (PCRE2 with Unicode classes), "Isolated" behaviour.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace veomni {

// One Split step: every match becomes a piece, and so does every stretch between matches (HF's "Isolated").
class RegexSplit {
 public:
  // `pattern` is a regex (Unicode-aware: \p{L}, \s, lookahead, (?i:...)) or, with literal, a plain string.
  // InputError naming the pattern and the offset when it does not compile.
  RegexSplit(const std::string& pattern, bool literal);
  ~RegexSplit();
  RegexSplit(RegexSplit&&) noexcept;
  RegexSplit& operator=(RegexSplit&&) noexcept;

  // Appends the pieces of `text` (valid UTF-8) to `out`, in order; they cover the text exactly. Thread-safe.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The regex that GPT-2's ByteLevel pre-tokenizer applies when its use_regex is true.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A sequence of Split steps: each step splits every piece the previous one produced.
class PreTokenizer {
 public:
  void add(RegexSplit step) { steps_.push_back(std::move(step)); }
  // The pieces of `text` (views into it), in order.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  std::vector<RegexSplit> steps_;
};

}  // namespace veomni
