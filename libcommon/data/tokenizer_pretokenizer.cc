// PCRE2 (UTF + UCP, JIT-compiled) behind the Split pre-tokenizer; match data and JIT stacks are per thread.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizer_pretokenizer.h"

#include <pcre2.h>

#include "core/error.h"

namespace veomni {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// One set per thread: the match data holds only the overall match, so it serves every pattern. The JIT stack
// may grow to 8 MiB (backtracking over very long runs of one class needs more than the 32 KiB default).
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);

  MatchScratch() {
    VEOMNI_CHECK(data && jit_stack && context, "out of memory creating PCRE2 match data");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& thread_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

// Unicode's White_Space property, which \s means in Oniguruma (HF's regex engine). PCRE2's \s also takes U+180E,
// which left White_Space in Unicode 6.3.
constexpr std::string_view kWhiteSpaceRanges =
    R"(\t-\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// The pattern with every \s spelled as White_Space, and \S outside a class as its complement.
std::string with_white_space_class(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's')
        out += in_class ? std::string(kWhiteSpaceRanges) : "[" + std::string(kWhiteSpaceRanges) + "]";
      else if (e == 'S' && !in_class)
        out += "[^" + std::string(kWhiteSpaceRanges) + "]";
      else
        out += {c, e};
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct RegexSplit::Impl {
  pcre2_code* code = nullptr;
  std::string pattern;
  ~Impl() { pcre2_code_free(code); }
};

RegexSplit::RegexSplit(const std::string& pattern, bool literal) : impl_(std::make_unique<Impl>()) {
  impl_->pattern = pattern;
  const std::string compiled = literal ? pattern : with_white_space_class(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2_LITERAL allows no class options such as UCP (a literal has no classes).
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options, &error,
                              &error_offset, nullptr);
  VEOMNI_INPUT_CHECK(impl_->code != nullptr, "pre-tokenizer pattern /{}/ does not compile at offset {}: {}", pattern,
                     error_offset, pcre2_message(error));
  // Without JIT support PCRE2 falls back to its interpreter: the same matches, only slower.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

RegexSplit::~RegexSplit() = default;
RegexSplit::RegexSplit(RegexSplit&&) noexcept = default;
RegexSplit& RegexSplit::operator=(RegexSplit&&) noexcept = default;

void RegexSplit::split(std::string_view text, std::vector<std::string_view>& out) const {
  MatchScratch& scratch = thread_scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_begin = 0;
  size_t at = 0;
  while (at < text.size()) {
    // The whole text is the subject, so lookahead such as \s+(?!\S) sees past the match as HF's does.
    const int rc =
        pcre2_match(impl_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      throw InputError(fmt::format("pre-tokenizer pattern /{}/ failed on a text of {} bytes at byte {}: {}",
                                   impl_->pattern, text.size(), at, pcre2_message(rc)));
    const PCRE2_SIZE* match = pcre2_get_ovector_pointer(scratch.data);
    const size_t begin = match[0], end = match[1];
    if (end == begin) {  // an empty match yields no piece; step over one code point
      at = begin + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    if (begin > gap_begin) out.push_back(text.substr(gap_begin, begin - gap_begin));
    out.push_back(text.substr(begin, end - begin));
    gap_begin = at = end;
  }
  if (gap_begin < text.size()) out.push_back(text.substr(gap_begin));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (steps_.empty()) {
    if (!text.empty()) out.push_back(text);
    return;
  }
  if (steps_.size() == 1) return steps_[0].split(text, out);
  std::vector<std::string_view> current{text}, next;
  for (size_t k = 0; k + 1 < steps_.size(); ++k) {
    next.clear();
    for (std::string_view piece : current) steps_[k].split(piece, next);
    current.swap(next);
  }
  for (std::string_view piece : current) steps_.back().split(piece, out);
}

}  // namespace veomni
