// Tokenizer pieces alone and on a tiny hand-made tokenizer.json: bytes, UTF-8, NFC, splits, BPE, added tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/tokenizer_bytes.h"
#include "data/tokenizer_sha256.h"
#include "data/tokenizer_unicode.h"

namespace veomni {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

// Qwen2/Qwen3's Split pattern, as in their tokenizer.json.
constexpr const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> qwen_split(std::string_view text) {
  const RegexSplit split(kQwenPattern, false);
  std::vector<std::string_view> pieces;
  split.split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(TokenizerBytes, Gpt2ByteMap) {
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode('!'), U'!');
  EXPECT_EQ(byte_to_unicode(0xA1), U'\u00A1');
  EXPECT_EQ(byte_to_unicode(0xAE), U'\u00AE');
  EXPECT_EQ(byte_to_unicode(0x00), U'\u0100');
  EXPECT_EQ(byte_to_unicode(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(byte_to_unicode('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(0x7F), U'\u0121');
  EXPECT_EQ(byte_to_unicode(0xAD), U'\u0143');  // the last of the 68 remapped bytes
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
  EXPECT_FALSE(unicode_to_byte(U'\u0144').has_value());
  EXPECT_FALSE(unicode_to_byte(U'\u00AD').has_value());  // soft hyphen spells nothing: 0xAD is U+0143
  EXPECT_EQ(byte_level_spell(" world\n"), "\xC4\xA0world\xC4\x8A");
  EXPECT_EQ(byte_level_unspell("\xC4\xA0world"), " world");
  EXPECT_EQ(byte_level_unspell(byte_level_spell("\xE4\xBD\xA0\xFF")), "\xE4\xBD\xA0\xFF");
  EXPECT_FALSE(byte_level_unspell("\xE4\xBD\xA0").has_value());  // '你' is not in the alphabet
}

TEST(TokenizerUnicode, Utf8Validation) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii, 你好, \xF0\x9F\x8D\x95").has_value());
  EXPECT_EQ(find_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xC0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xE4\xBD"), 0u);          // truncated
  EXPECT_EQ(find_invalid_utf8("a\x80"), 1u);             // lone continuation byte
}

TEST(TokenizerUnicode, CodePoints) {
  std::string s;
  for (char32_t cp : {U'A', U'\u00E9', U'\u4F60', U'\U0001F355'}) append_utf8(s, cp);
  EXPECT_EQ(s, "A\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x8D\x95");
  size_t at = 0;
  EXPECT_EQ(next_code_point(s, at), U'A');
  EXPECT_EQ(next_code_point(s, at), U'\u00E9');
  EXPECT_EQ(next_code_point(s, at), U'\u4F60');
  EXPECT_EQ(next_code_point(s, at), U'\U0001F355');
  EXPECT_EQ(at, s.size());
}

TEST(TokenizerUnicode, Nfc) {
  EXPECT_EQ(nfc_normalize("Cafe\xCC\x81"), "Caf\xC3\xA9");               // e + U+0301 -> U+00E9
  EXPECT_EQ(nfc_normalize("A\xCC\x8A"), "\xC3\x85");                     // A + ring -> U+00C5
  EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");                  // U+212B ANGSTROM SIGN -> U+00C5
  EXPECT_EQ(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // jamo U+1100 U+1161 -> U+AC00
  // Canonical ordering: dot below (ccc 220) before circumflex (ccc 230), then composition to U+1EAD.
  EXPECT_EQ(nfc_normalize("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
  EXPECT_EQ(nfc_normalize("\xEF\xAC\x81"), "\xEF\xAC\x81");  // the fi ligature is NFC (only NFKC splits it)
  EXPECT_EQ(nfc_normalize(std::string("a\0e\xCC\x81", 5)), std::string("a\0\xC3\xA9", 4));  // NUL kept
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc_normalize(""), "");
}

TEST(TokenizerPreTokenizer, QwenSplits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(qwen_split("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(qwen_split("I'm DON'T we'Ve"), (V{"I", "'m", " DON", "'T", " we", "'Ve"}));
  EXPECT_EQ(qwen_split("abc123"), (V{"abc", "1", "2", "3"}));
  EXPECT_EQ(qwen_split("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(qwen_split("x\n\n  y"), (V{"x", "\n\n", " ", " y"}));
  EXPECT_EQ(qwen_split("end  "), (V{"end", "  "}));
  EXPECT_EQ(qwen_split("\t\tfoo"), (V{"\t", "\tfoo"}));
  EXPECT_EQ(qwen_split("x = (y);\n"), (V{"x", " =", " (", "y", ");\n"}));
  EXPECT_EQ(qwen_split("你好，世界！ 123"), (V{"你好", "，世界", "！", " ", "1", "2", "3"}));
  EXPECT_EQ(qwen_split("é!"), (V{"é", "!"}));
  EXPECT_EQ(qwen_split(""), V{});
}

TEST(TokenizerPreTokenizer, WhiteSpaceIsUnicodeWhiteSpace) {
  using V = std::vector<std::string>;
  // U+180E left White_Space in Unicode 6.3: it is punctuation-like here, as in Oniguruma (HF's engine).
  EXPECT_EQ(qwen_split("\xE1\xA0\x8E!"), (V{"\xE1\xA0\x8E!"}));
  // U+3000 and U+00A0 are white space: "\s+(?!\S)" then the letter takes one.
  EXPECT_EQ(qwen_split("a\xE3\x80\x80\xE3\x80\x80"
                       "b"),
            (V{"a", "\xE3\x80\x80",
               "\xE3\x80\x80"
               "b"}));
  // Before punctuation white space stays a piece of its own: "\s+(?!\S)" fails, "\s+" takes it.
  EXPECT_EQ(qwen_split("a\xC2\xA0!"), (V{"a", "\xC2\xA0", "!"}));
}

TEST(TokenizerPreTokenizer, GapsBetweenMatchesArePieces) {
  const RegexSplit split("[0-9]+", false);
  std::vector<std::string_view> pieces;
  split.split("ab12cd345", pieces);
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{"ab", "12", "cd", "345"}));
  pieces.clear();
  RegexSplit("-", true).split("a-b--", pieces);  // a literal String pattern
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{"a", "-", "b", "-", "-"}));
}

TEST(TokenizerPreTokenizer, BadPatternNamesIt) {
  try {
    RegexSplit("(unclosed", false);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
}

// A byte-level BPE tokenizer.json: the 256 byte tokens (id = byte value), then `merged` tokens from id 256 in
// order, the merges as given, and Qwen's normaliser and pre-tokenizer.
json tiny_spec(const std::vector<std::pair<std::string, std::string>>& merges, const json& added = json::array()) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_spell(std::string(1, static_cast<char>(b)))] = b;
  json merge_list = json::array();
  int next = 256;
  for (const auto& [left, right] : merges) {
    const std::string merged = byte_level_spell(left + right);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    merge_list.push_back(json::array({byte_level_spell(left), byte_level_spell(right)}));
  }
  return json{
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"}, {"pattern", {{"Regex", kQwenPattern}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merge_list}}}};
}

Tokenizer tiny(const std::vector<std::pair<std::string, std::string>>& merges, const json& added = json::array()) {
  return Tokenizer::from_json(tiny_spec(merges, added), "tiny.json");
}

TEST(TokenizerBpe, MergesByRank) {
  // ids: he 256, ll 257, hell 258, hello 259, " w" 260
  const Tokenizer tok = tiny({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}});
  EXPECT_EQ(tok.encode("hello"), (Ids{259}));
  EXPECT_EQ(tok.encode("hello world"), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok.encode("hel"), (Ids{256, 'l'}));
  EXPECT_EQ(tok.encode("ll"), (Ids{257}));
  EXPECT_EQ(tok.id_limit(), 261);
  EXPECT_EQ(tok.model().num_merges(), 5u);
}

TEST(TokenizerBpe, LowerRankWinsThenLeftmost) {
  // "abc": (b, c) has rank 0 and beats (a, b); "bc" then does not merge with "a" (no such merge).
  const Tokenizer tok = tiny({{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(tok.encode("abc"), (Ids{'a', 256}));
  EXPECT_EQ(tok.encode("ab"), (Ids{257}));
  // Ties go to the leftmost pair: "aaa" -> "aa" "a", "aaaaa" -> "aa" "aa" "a".
  const Tokenizer aa = tiny({{"a", "a"}});
  EXPECT_EQ(aa.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(aa.encode("aaaaa"), (Ids{256, 256, 'a'}));
  // A merge made of merged tokens applies once both exist: "aaaa" -> "aa" "aa" -> "aaaa".
  const Tokenizer aaaa = tiny({{"a", "a"}, {"aa", "aa"}});
  EXPECT_EQ(aaaa.encode("aaaa"), (Ids{257}));
  EXPECT_EQ(aaaa.encode("aaaaaaa"), (Ids{257, 256, 'a'}));
}

TEST(TokenizerBpe, MultiByteCharactersAndLongPieces) {
  const Tokenizer tok = tiny({{"\xE4", "\xBD"}, {"\xE4\xBD", "\xA0"}});  // builds '你' (E4 BD A0)
  EXPECT_EQ(tok.encode("你"), (Ids{257}));
  EXPECT_EQ(tok.encode("你好"), (Ids{257, 0xE5, 0xA5, 0xBD}));
  // A piece longer than the cache bound takes the same path.
  const std::string word(1000, 'x');
  EXPECT_EQ(tok.encode(word), Ids(1000, 'x'));
  EXPECT_EQ(tok.decode(tok.encode(word)), word);
}

TEST(TokenizerBpe, EndOffsets) {
  const Tokenizer tok = tiny({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}});
  TokenizedText out;
  tok.encode("hello wo", out);
  EXPECT_EQ(out.ids, (Ids{259, 260, 'o'}));
  EXPECT_EQ(out.ends, (std::vector<uint32_t>{5, 7, 8}));
}

json added_list() {
  return json::array({{{"id", 300}, {"content", "<|a|>"}, {"special", true}, {"normalized", false}},
                      {{"id", 301}, {"content", "<|ab|>"}, {"special", true}, {"normalized", false}},
                      {{"id", 302}, {"content", "<think>"}, {"special", false}, {"normalized", false}}});
}

TEST(TokenizerAddedTokens, MatchedBeforeBpeLeftmostLongest) {
  const Tokenizer tok = tiny({{"h", "i"}}, added_list());
  EXPECT_EQ(tok.encode("hi<|ab|>hi"), (Ids{256, 301, 256}));
  EXPECT_EQ(tok.encode("<|a|><|ab|>"), (Ids{300, 301}));
  EXPECT_EQ(tok.encode("<|a"), (Ids{'<', '|', 'a'}));  // an unfinished token is text
  EXPECT_EQ(tok.encode("<think>hi"), (Ids{302, 256}));
  EXPECT_EQ(tok.id_limit(), 303);
  EXPECT_EQ(tok.token_id("<|ab|>"), 301);
  EXPECT_EQ(tok.token_id("hi"), 256);
  EXPECT_FALSE(tok.token_id("nope").has_value());
  EXPECT_THROW(tok.require_token_id("nope"), InputError);
}

TEST(TokenizerAddedTokens, SplitTheTextForThePreTokenizer) {
  // Without the added token "x <|a|>" would be "x", " <|", "a", "|>"; with it the space before stays alone.
  const Tokenizer tok = tiny({}, added_list());
  EXPECT_EQ(tok.encode("x <|a|>"), (Ids{'x', ' ', 300}));
  TokenizedText out;
  tok.encode("x <|a|>y", out);
  EXPECT_EQ(out.ends, (std::vector<uint32_t>{1, 2, 7, 8}));
}

TEST(TokenizerDecode, RoundTripAndSpecialTokens) {
  const Tokenizer tok = tiny({{"h", "e"}, {"l", "l"}, {" ", "w"}}, added_list());
  for (const std::string text : {"hello world", "  spaces\tand\nlines  ", "你好, 🍕!", "<|a|>x<think>y<|ab|>"})
    EXPECT_EQ(tok.decode(tok.encode(text)), text) << text;
  EXPECT_EQ(tok.decode(tok.encode("<|a|>x<think>y<|ab|>"), true), "x<think>y");  // <think> is not special
  EXPECT_EQ(tok.decode(tok.encode("Cafe\xCC\x81")), "Caf\xC3\xA9");              // NFC happened
  EXPECT_THROW(tok.decode(Ids{400}), InputError);
  EXPECT_THROW(tok.decode(Ids{-1}), InputError);
  EXPECT_THROW(tok.encode("bad \xFF byte"), InputError);
}

void expect_load_error(const json& spec, const std::string& fragment) {
  try {
    Tokenizer::from_json(spec, "bad.json");
    ADD_FAILURE() << "no error, expected one about " << fragment;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, RefusesWhatItCannotReproduce) {
  json spec = tiny_spec({{"h", "e"}});
  spec["model"]["type"] = "WordPiece";
  expect_load_error(spec, "WordPiece");
  spec = tiny_spec({{"h", "e"}});
  spec["normalizer"] = {{"type", "NFKC"}};
  expect_load_error(spec, "NFKC");
  spec = tiny_spec({{"h", "e"}});
  spec["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_load_error(spec, "Removed");
  spec = tiny_spec({{"h", "e"}});
  spec["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_load_error(spec, "Whitespace");
  spec = tiny_spec({{"h", "e"}});
  spec["post_processor"] = {{"type", "TemplateProcessing"}};
  expect_load_error(spec, "TemplateProcessing");
  spec = tiny_spec({{"h", "e"}}, json::array({{{"id", 300}, {"content", "<x>"}, {"lstrip", true}}}));
  expect_load_error(spec, "lstrip");
  spec = tiny_spec({{"h", "e"}});
  spec["model"]["vocab"].erase(byte_level_spell("\n"));
  expect_load_error(spec, "0x0a");
  spec = tiny_spec({{"h", "e"}});
  spec["model"]["merges"].push_back("q zz");
  expect_load_error(spec, "merge 1");
  spec = tiny_spec({{"h", "e"}});
  spec["model"]["dropout"] = 0.1;
  expect_load_error(spec, "dropout");
  spec = tiny_spec({{"h", "e"}});
  spec["model"]["vocab"]["zz"] = 1 << 29;  // a table of 2^29 entries: refused before allocating it
  expect_load_error(spec, "vocab entry 'zz' has id 536870912");
  expect_load_error(json{{"version", "1.0"}}, "no \"model\"");
}

TEST(TokenizerLoad, MergesAsStringsAndGpt2Regex) {
  json spec = tiny_spec({});
  spec["model"]["vocab"]["he"] = 256;
  spec["model"]["vocab"]["llo"] = 257;
  spec["model"]["vocab"]["hello"] = 258;
  spec["model"]["vocab"]["ll"] = 259;
  spec["model"]["merges"] = json::array({"h e", "l l", "ll o", "he llo"});
  // ByteLevel with use_regex applies GPT-2's split ("'s|'t|...| ?\p{L}+|...") instead of a Split step.
  spec["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const Tokenizer tok = Tokenizer::from_json(spec, "strings.json");
  EXPECT_EQ(tok.encode("hello"), (Ids{258}));
  EXPECT_EQ(tok.encode("hello123"), (Ids{258, '1', '2', '3'}));
}

TEST(TokenizerSha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace veomni
