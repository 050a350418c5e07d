// The real Qwen3 tokenizer.json: HF-known ids, the HF fixture file when present, round trips, ChatML labels.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/tokenizer_unicode.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

using Ids = std::vector<int32_t>;
using veomni::testing::qwen3_tokenizer;

const std::string kCorpus = std::string(VEOMNI_FIXTURES_DIR) + "/tokenizer/corpus.jsonl";
const std::string kHfIds = std::string(VEOMNI_FIXTURES_DIR) + "/tokenizer/qwen3_ids.jsonl";

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(TokenizerQwen3, FileAndVocabulary) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->fingerprint(),
            "tokenizer.json sha256:aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4");
  EXPECT_EQ(tok->model().id_limit(), 151643);
  EXPECT_EQ(tok->model().num_merges(), 151387u);
  EXPECT_EQ(tok->added_tokens().size(), 26u);
  EXPECT_EQ(tok->id_limit(), 151669);
  EXPECT_EQ(tok->token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok->token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok->token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok->token_id("<|vision_start|>"), 151652);
  EXPECT_EQ(tok->token_id("<|vision_end|>"), 151653);
  EXPECT_EQ(tok->token_id("<|image_pad|>"), 151655);
  EXPECT_EQ(tok->token_id("<|video_pad|>"), 151656);
}

// The ids REFERENCE.md records from HF transformers.
TEST(TokenizerQwen3, KnownIds) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(tok->encode(" Hello world"), (Ids{21927, 1879}));
  EXPECT_EQ(tok->encode("你好，世界！ 123"), (Ids{108386, 3837, 99489, 6313, 220, 16, 17, 18}));
  EXPECT_EQ(tok->encode("<|im_start|>user\n"), (Ids{151644, 872, 198}));
  EXPECT_EQ(tok->encode("<|im_start|>assistant\n"), (Ids{151644, 77091, 198}));
  EXPECT_EQ(tok->encode(""), Ids{});
}

TEST(TokenizerQwen3, CorpusRoundTrip) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<nlohmann::json> corpus = read_jsonl(kCorpus);
  ASSERT_GE(corpus.size(), 50u);
  for (const nlohmann::json& line : corpus) {
    const std::string text = line["text"];
    const Ids ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids), nfc_normalize(text)) << text;
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->id_limit()) << text;
  }
}

// The ids HF tokenizers gives (scripts/gen_tokenizer_fixtures.py, run where Python has `tokenizers`).
TEST(TokenizerQwen3, MatchesHuggingFaceFixtures) {
  if (!std::filesystem::exists(kHfIds))
    GTEST_SKIP() << kHfIds << " not generated yet: python3 scripts/gen_tokenizer_fixtures.py "
                 << veomni::testing::kQwen3TokenizerPath;
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<nlohmann::json> lines = read_jsonl(kHfIds);
  ASSERT_EQ(lines.size(), read_jsonl(kCorpus).size()) << "regenerate " << kHfIds << " from the corpus";
  for (const nlohmann::json& line : lines) {
    const std::string text = line["text"];
    const Ids expected = line["ids"];
    EXPECT_EQ(tok->encode(text), expected) << text;
    EXPECT_EQ(tok->decode(expected), nfc_normalize(text)) << text;
  }
}

TEST(TokenizerQwen3, ChatTemplateIdsAndLabels) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const ChatTemplate chat(*tok);
  const std::vector<ChatMessage> messages = {{"user", "Hello world"}, {"assistant", "你好，世界！ 123"}};
  EXPECT_EQ(ChatTemplate::render(messages),
            "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n你好，世界！ 123<|im_end|>\n");
  const LabeledTokens out = chat.encode(messages);
  EXPECT_EQ(out.ids, (Ids{151644, 872,   198, 9707,   1879, 151645, 198,                                    // user
                          151644, 77091, 198, 108386, 3837, 99489,  6313, 220, 16, 17, 18, 151645, 198}));  // assistant
  EXPECT_EQ(out.trained, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0,                                         //
                                               0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  // Tokenizing the rendered text in one go gives the same ids.
  EXPECT_EQ(tok->encode(ChatTemplate::render(messages)), out.ids);
}

TEST(TokenizerQwen3, ChatTemplateHeaderStraddlingToken) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  // Content starting with a newline: "\n\n" is one token across the header's "\n" and the content: it is trained.
  const std::vector<ChatMessage> messages = {{"assistant", "\nHi"}};
  const LabeledTokens out = ChatTemplate(*tok).encode(messages);
  const Ids two_newlines = tok->encode("\n\n");
  ASSERT_EQ(two_newlines.size(), 1u);
  EXPECT_EQ(out.ids, (Ids{151644, 77091, two_newlines[0], tok->encode("Hi")[0], 151645, 198}));
  EXPECT_EQ(out.trained, (std::vector<uint8_t>{0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(tok->encode(ChatTemplate::render(messages)), out.ids);
}

TEST(TokenizerQwen3, ChatTemplateRejectsUnknownRole) {
  const Tokenizer* tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<ChatMessage> messages = {{"bot", "hi"}};
  EXPECT_THROW(ChatTemplate(*tok).encode(messages), InputError);
}

}  // namespace
}  // namespace veomni
