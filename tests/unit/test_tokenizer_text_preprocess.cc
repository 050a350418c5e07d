// preprocess_text on the real tokenizer: exact ids, labels, masks, positions; system prompt, truncation, packing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/dataset_reader.h"
#include "data/text_preprocess.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

namespace fs = std::filesystem;
using V = std::vector<int64_t>;
using veomni::testing::X;

const std::string kTokenizerConversations = std::string(VEOMNI_FIXTURES_DIR) + "/tokenizer/conversations.jsonl";

// Record 0: user "Hello world", assistant "你好，世界！ 123".
const V kIds0 = {151644, 872,  198,   9707, 1879, 151645, 198, 151644, 77091,  198,
                 108386, 3837, 99489, 6313, 220,  16,     17,  18,     151645, 198};
const V kLabels0 = {X, X, X, X, X, X, X, X, X, X, 108386, 3837, 99489, 6313, 220, 16, 17, 18, 151645, X};
// Record 1: system "Hello world", user "Hi", assistant "Hello world".
const V kIds1 = {151644, 8948,   198, 9707,   1879,  151645, 198,  151644, 872,    198,
                 13048,  151645, 198, 151644, 77091, 198,    9707, 1879,   151645, 198};
const V kLabels1 = {X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, 9707, 1879, 151645, X};
// Record 2: {"text": "Hello world"} gets <|endoftext|>; every token is a target.
const V kIds2 = {9707, 1879, 151643};
// Record 3 has no assistant message: dropped.

V sample_values(const Sample& s, const std::string& key) {
  const Tensor& t = s.at(key);
  EXPECT_EQ(t.dtype(), DType::I64) << key;
  const int64_t* p = t.data<int64_t>();
  return {p, p + t.numel()};
}

V arange(int64_t n) {
  V v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

class TextPreprocess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(veomni::testing::qwen3_tokenizer());  // fails with the setup hint when the file is missing
    dir_ = fs::temp_directory_path() / ("veomni-preprocess-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.tokenizer_path = veomni::testing::kQwen3TokenizerPath;
    options_.inputs = {kTokenizerConversations};
    options_.out = (dir_ / "out.h5").string();
    options_.threads = 2;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  TextPreprocessOptions options_;
};

TEST_F(TextPreprocess, ConversationsLabelsAndMasks) {
  const TextPreprocessSummary summary = preprocess_text(options_);
  EXPECT_EQ(summary.records, 4);
  EXPECT_EQ(summary.samples, 3);
  EXPECT_EQ(summary.rows, 3);
  EXPECT_EQ(summary.tokens, 43);
  EXPECT_EQ(summary.trained_tokens, 9 + 3 + 3);
  EXPECT_EQ(summary.dropped_no_target, 1);
  EXPECT_EQ(summary.bad, 0);
  EXPECT_EQ(summary.files, std::vector<std::string>{options_.out});

  const DatasetReader reader(options_.out);
  ASSERT_EQ(reader.num_samples(), 3);
  EXPECT_EQ(reader.info().kind, "text");
  EXPECT_EQ(reader.info().producer, "veomni-preprocess");
  EXPECT_EQ(reader.info().packing, "none");
  EXPECT_EQ(reader.info().tokenizer,
            "tokenizer.json sha256:aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4");
  const std::vector<std::pair<V, V>> expected = {{kIds0, kLabels0}, {kIds1, kLabels1}, {kIds2, kIds2}};
  for (int64_t i = 0; i < 3; ++i) {
    const Sample s = reader.read(i);
    const auto& [ids, labels] = expected[static_cast<size_t>(i)];
    EXPECT_EQ(sample_values(s, "input_ids"), ids) << "sample " << i;
    EXPECT_EQ(sample_values(s, "labels"), labels) << "sample " << i;
    EXPECT_EQ(sample_values(s, "attention_mask"), V(ids.size(), 1)) << "sample " << i;
    EXPECT_EQ(sample_values(s, "position_ids"), arange(static_cast<int64_t>(ids.size()))) << "sample " << i;
  }
}

TEST_F(TextPreprocess, SystemPromptIsAddedWhereMissing) {
  options_.record.system_prompt = "Hello world";
  preprocess_text(options_);
  const DatasetReader reader(options_.out);
  const V system = {151644, 8948, 198, 9707, 1879, 151645, 198};
  V ids = system;
  ids.insert(ids.end(), kIds0.begin(), kIds0.end());
  EXPECT_EQ(sample_values(reader.read(0), "input_ids"), ids);
  EXPECT_EQ(sample_values(reader.read(1), "input_ids"), kIds1);  // already starts with a system message
  EXPECT_EQ(sample_values(reader.read(2), "input_ids"), kIds2);  // plain text has no system prompt
}

TEST_F(TextPreprocess, Truncation) {
  options_.record.max_seq_len = 5;
  options_.record.truncation = Truncation::Left;
  TextPreprocessSummary summary = preprocess_text(options_);
  EXPECT_EQ(summary.truncated, 2);
  const DatasetReader left(options_.out);
  ASSERT_EQ(left.num_samples(), 3);
  EXPECT_EQ(sample_values(left.read(0), "input_ids"), (V{16, 17, 18, 151645, 198}));
  EXPECT_EQ(sample_values(left.read(0), "labels"), (V{16, 17, 18, 151645, X}));
  EXPECT_EQ(sample_values(left.read(1), "labels"), (V{X, 9707, 1879, 151645, X}));

  // Keeping the start of both conversations leaves no assistant token: both are dropped.
  options_.record.truncation = Truncation::Right;
  summary = preprocess_text(options_);
  EXPECT_EQ(summary.samples, 1);
  EXPECT_EQ(summary.dropped_no_target, 3);

  options_.record.truncation = Truncation::Drop;
  summary = preprocess_text(options_);
  EXPECT_EQ(summary.samples, 1);
  EXPECT_EQ(summary.dropped_too_long, 3);  // the user-only conversation (7 tokens) too
  EXPECT_EQ(summary.dropped_no_target, 0);
  EXPECT_EQ(summary.truncated, 0);
  EXPECT_EQ(sample_values(DatasetReader(options_.out).read(0), "input_ids"), kIds2);
}

TEST_F(TextPreprocess, PackedRowsRestartPositions) {
  options_.pack = true;
  options_.record.max_seq_len = 24;
  const TextPreprocessSummary summary = preprocess_text(options_);
  // Best fit decreasing: 20 | 20 | 3 -> rows {0, 2} (23 tokens) and {1} (20 tokens).
  EXPECT_EQ(summary.rows, 2);
  EXPECT_EQ(summary.padding_tokens, 48 - 43);
  const DatasetReader reader(options_.out);
  EXPECT_NE(reader.info().packing.find("rows of 24 tokens"), std::string::npos) << reader.info().packing;
  const Sample row0 = reader.read(0);
  V ids = kIds0, labels = kLabels0, positions = arange(20), mask(23, 1);
  ids.insert(ids.end(), kIds2.begin(), kIds2.end());
  labels.insert(labels.end(), {X, 1879, 151643});  // nothing predicts the first token of a later sample
  positions.insert(positions.end(), {0, 1, 2});
  ids.push_back(151643);  // padding
  labels.push_back(X);
  positions.push_back(0);
  mask.push_back(0);
  EXPECT_EQ(sample_values(row0, "input_ids"), ids);
  EXPECT_EQ(sample_values(row0, "labels"), labels);
  EXPECT_EQ(sample_values(row0, "position_ids"), positions);
  EXPECT_EQ(sample_values(row0, "attention_mask"), mask);
  const Sample row1 = reader.read(1);
  V padded_ids = kIds1, padded_labels = kLabels1, padded_positions = arange(20);
  padded_ids.insert(padded_ids.end(), 4, 151643);
  padded_labels.insert(padded_labels.end(), 4, X);
  padded_positions.insert(padded_positions.end(), {0, 1, 2, 3});
  EXPECT_EQ(sample_values(row1, "input_ids"), padded_ids);
  EXPECT_EQ(sample_values(row1, "labels"), padded_labels);
  EXPECT_EQ(sample_values(row1, "position_ids"), padded_positions);
}

TEST_F(TextPreprocess, JsonArrayAndThreadCountGiveTheSameDataset) {
  preprocess_text(options_);
  const DatasetReader jsonl(options_.out);
  // The same records as one JSON array, tokenized on one thread.
  const fs::path array_path = dir_ / "records.json";
  {
    std::ifstream in(kTokenizerConversations);
    std::ofstream out(array_path);
    out << "[\n";
    bool first = true;
    for (std::string line; std::getline(in, line);) {
      out << (first ? "" : ",\n") << line;
      first = false;
    }
    out << "\n]\n";
  }
  TextPreprocessOptions other = options_;
  other.inputs = {array_path.string()};
  other.out = (dir_ / "array.h5").string();
  other.threads = 1;
  preprocess_text(other);
  const DatasetReader array(other.out);
  ASSERT_EQ(array.num_samples(), jsonl.num_samples());
  for (int64_t i = 0; i < array.num_samples(); ++i)
    for (const char* key : {"input_ids", "labels", "attention_mask", "position_ids"})
      EXPECT_EQ(sample_values(array.read(i), key), sample_values(jsonl.read(i), key)) << key << " of sample " << i;
}

TEST_F(TextPreprocess, BadRecordNamesFileAndLineAndWritesNothing) {
  const fs::path bad = dir_ / "bad.jsonl";
  std::ofstream(bad) << "{\"text\": \"fine\"}\n\n{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}\n";
  options_.inputs = {bad.string()};
  try {
    preprocess_text(options_);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(bad.string() + ":3: message 0: unknown role 'bot'"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(options_.out));
  options_.skip_bad = true;
  const TextPreprocessSummary summary = preprocess_text(options_);
  EXPECT_EQ(summary.bad, 1);
  EXPECT_EQ(summary.samples, 1);
  ASSERT_EQ(summary.bad_examples.size(), 1u);
}

}  // namespace
}  // namespace veomni
