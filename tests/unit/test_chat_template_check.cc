// Unit tests of data.chat_template: template identities, the header attribute's round trip, and the run's check.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "data/chat_template_identity.h"
#include "data/dataset_digest.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "data/tokenizer_sha256.h"
#include "tests/common/scratch_dir.h"
#include "train/chat_template_check.h"
#include "train/train_config.h"

using namespace veomni;

namespace {

using ChatTemplateCheck = veomni::testing::ScratchDir;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A one-sample text dataset whose header records `chat_template` ("" writes no attribute, as older files).
void write_template_dataset(const std::string& path, const std::string& chat_template) {
  DatasetInfo info;
  info.kind = "text";
  info.producer = "test";
  info.chat_template = chat_template;
  ShardedDatasetWriter writer(path, 1, 1, info, {});
  Sample sample;
  sample["input_ids"] = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  sample["labels"] = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  writer.append(sample);
  writer.close();
}

std::string check_error_of(const ChatTemplateExpectation& expected, const DatasetInfo& info) {
  try {
    check_dataset_chat_template(expected, "data.train_path", "a.h5", info);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ChatTemplateIdentity, JinjaIsTheHashOfTheSourceAndChatmlIsItsName) {
  EXPECT_EQ(jinja_template_identity("{{ x }}"), "jinja sha256:" + sha256_hex("{{ x }}"));
  EXPECT_NE(jinja_template_identity("{{ x }}"), jinja_template_identity("{{ y }}"));
  EXPECT_EQ(chat_template_identity("chatml", ""), "chatml");
  const std::string file = std::string(VEOMNI_FIXTURES_DIR) + "/chat_templates/chatml.jinja";
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(chat_template_identity(file, ""), jinja_template_identity(text));
  EXPECT_THROW(chat_template_identity("/nonexistent/t.jinja", ""), InputError);
}

TEST_F(ChatTemplateCheck, TheHeaderRecordsTheTemplateAndOlderFilesReadAsUnrecorded) {
  write_template_dataset(path("new.h5"), "jinja sha256:ab");
  write_template_dataset(path("old.h5"), "");
  EXPECT_EQ(DatasetReader(path("new.h5")).info().chat_template, "jinja sha256:ab");
  EXPECT_EQ(DatasetReader(path("old.h5")).info().chat_template, "");
  const std::vector<std::string> lines = describe_dataset(path("old.h5"));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "chat_template: (not recorded)"), lines.end());
}

TEST_F(ChatTemplateCheck, DigestsFollowTheSamplesNotTheHeader) {
  write_template_dataset(path("a.h5"), "chatml");
  write_template_dataset(path("b.h5"), "none");
  const std::vector<std::string> a = describe_dataset(path("a.h5")), b = describe_dataset(path("b.h5"));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.back(), b.back());  // key labels: same samples, same digest
  EXPECT_NE(a[6], b[6]);          // chat_template lines differ
  EXPECT_EQ(a.back().rfind("key labels: ", 0), 0u) << a.back();
}

TEST(ChatTemplateCheckRules, MatchPassesAndEveryOtherCaseNamesFileKeyAndHint) {
  const ChatTemplateExpectation none{};
  DatasetInfo info;
  info.chat_template = "chatml";
  EXPECT_EQ(check_error_of(none, info), "");  // not asked: nothing checked
  const ChatTemplateExpectation chatml{"chatml", "chatml"};
  EXPECT_EQ(check_error_of(chatml, info), "");
  const ChatTemplateExpectation model{"model", "jinja sha256:00ff"};
  std::string error = check_error_of(model, info);
  EXPECT_NE(error.find("a.h5 (data.train_path) was rendered with our built-in ChatML (chatml), but "
                       "data.chat_template 'model' is the Jinja template with sha256:00ff"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("--chat-template model"), std::string::npos) << error;
  info.chat_template = "";
  EXPECT_NE(check_error_of(chatml, info).find("does not record the chat template"), std::string::npos);
  info.chat_template = "none";
  info.producer = "veomni-dummy-data";
  EXPECT_NE(check_error_of(chatml, info).find("no chat template rendered (veomni-dummy-data)"), std::string::npos);
}

TEST_F(ChatTemplateCheck, ModelResolvesBesideTheTokenizerOrTheModelConfig) {
  write_text(path("chat_template.jinja"), "{{ messages }}");
  TrainConfig config;
  config.model.config_path = dir_.string();
  config.data.chat_template = "model";
  EXPECT_EQ(expected_chat_template(config).identity, jinja_template_identity("{{ messages }}"));
  config.model.tokenizer_path = path("elsewhere");
  try {
    expected_chat_template(config);
    FAIL() << "a tokenizer folder without a template was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data.chat_template 'model': "), std::string::npos) << e.what();
  }
  config.data.chat_template = "";
  EXPECT_FALSE(expected_chat_template(config).enabled());
}
