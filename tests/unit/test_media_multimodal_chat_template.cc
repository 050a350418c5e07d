// veomni-preprocess multimodal with the model's chat template: media blocks of a rendering expanded as ChatML's are,
// placeholder mismatches, and Qwen3-VL's template in the pipeline against transformers' rendering.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/scratch_dir.h"
#include "core/error.h"
#include "data/constants.h"
#include "data/dataset_reader.h"
#include "media/multimodal_preprocess.h"
#include "media/multimodal_tokens.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

using ojson = nlohmann::ordered_json;
const std::string kChatInputs = std::string(VEOMNI_FIXTURES_DIR) + "/media/inputs";
const std::string kTemplates = std::string(VEOMNI_FIXTURES_DIR) + "/chat_templates";

MultimodalMessage message(const std::string& role, std::vector<ContentPart> parts) { return {role, std::move(parts)}; }

MediaExtent image(int64_t tokens) { return {.kind = PartKind::Image, .tokens = tokens}; }

MediaExtent video() {
  return {.kind = PartKind::Video, .tokens = 2, .blocks = 2, .block_texts = {"<0.5 seconds>", "<1.5 seconds>"},
          .outer_markers = true};
}

// The bytes of `text` from the first `from` on to the end of the next `to` (included).
ByteSpan span_of(const std::string& text, const std::string& from, const std::string& to) {
  const size_t begin = text.find(from) + from.size();
  return {begin, text.find(to, begin) + to.size()};
}

TEST(MultimodalChatTemplate, RenderedBlocksExpandAsOurChatMLDoes) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalTemplate chat(*tokenizer);
  const std::vector<MultimodalMessage> messages = {
      message("user", {{PartKind::Image, "a.png"}, {PartKind::Text, "What and"}, {PartKind::Video, "v.mp4"}}),
      message("assistant", {{PartKind::Text, "A cat "}, {PartKind::Image, "b.png"}, {PartKind::Text, " here."}})};
  const std::vector<MediaExtent> media = {image(3), video(), image(2)};
  const std::string text =
      "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What and<|vision_start|><|video_pad|>"
      "<|vision_end|><|im_end|>\n<|im_start|>assistant\nA cat <|vision_start|><|image_pad|><|vision_end|> here."
      "<|im_end|>\n";
  const std::vector<ByteSpan> spans = {span_of(text, "<|im_start|>assistant\n", "<|im_end|>")};
  const MultimodalTokens ours = chat.encode(messages, media);
  const MultimodalTokens rendered = chat.encode_rendering(text, spans, media);
  EXPECT_EQ(rendered.ids, ours.ids);
  EXPECT_EQ(rendered.trained, ours.trained);
  EXPECT_EQ(std::count(rendered.ids.begin(), rendered.ids.end(), kImageInputIndex), 5);
  EXPECT_EQ(std::count(rendered.ids.begin(), rendered.ids.end(), kVideoInputIndex), 4);
}

void expect_template_input_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one holding: " << part;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(MultimodalChatTemplate, PlaceholdersNotMatchingTheMediaAreInputErrors) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalTemplate chat(*tokenizer);
  const std::string none = "<|im_start|>user\nHi<|im_end|>\n";
  expect_template_input_error([&] { chat.encode_rendering(none, {}, {image(2)}); },
                     "the chat template renders 0 media placeholder(s) (<|image_pad|>, <|video_pad|>, <|audio_pad|>) "
                     "for the record's 1 media part(s)");
  const std::string one = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>\n";
  expect_template_input_error([&] { chat.encode_rendering(one, {}, {video()}); },
                     "the chat template's media placeholder 0 is for image but the record's media part 0 is video");
  expect_template_input_error([&] { chat.encode_rendering(one, {}, {}); }, "renders 1 media placeholder(s)");
  expect_template_input_error(
      [&] { chat.encode_rendering("<|vision_start|>Hi<|image_pad|><|vision_end|>", {}, {image(2)}); },
      "renders <|image_pad|> at byte 18 without <|vision_start|> before it and <|vision_end|> after it");
  expect_template_input_error([&] { chat.encode_rendering(one + "<|vision_end|>", {}, {image(2)}); },
                     "renders <|vision_end|> outside a media block");
}

// transformers' rendering of one conversation in the fixture file, keys in their order (tools | tojson keeps it).
ojson transformers_rendering(const std::string& name) {
  std::ifstream in(kTemplates + "/transformers_renderings.jsonl");
  for (std::string line; std::getline(in, line);) {
    ojson case_ = ojson::parse(line);
    if (case_["name"] == name) return case_;
  }
  ADD_FAILURE() << "no case " << name << " in transformers_renderings.jsonl";
  return {};
}

class MultimodalChatTemplatePipeline : public testing::ScratchDir {};

// Qwen3-VL's template renders tools as a system message and the tool message as a user turn, unlike our ChatML: the
// ids are transformers' with the image's pad expanded to its 70 tokens (48x64 resized to 224x320, zeroed ids).
TEST_F(MultimodalChatTemplatePipeline, Qwen3VlTemplateGivesTransformersIdsWithThePadExpanded) {
  ASSERT_NE(testing::qwen3_tokenizer(), nullptr);
  const ojson expected_case = transformers_rendering("vl_tools");
  ojson record = expected_case["record"];
  record["messages"][0]["content"][0]["image"] = "image_rgb_48x64.png";
  std::ofstream(path("in.jsonl")) << record.dump() << "\n";
  MultimodalPreprocessOptions o;
  o.tokenizer_path = testing::kQwen3TokenizerPath;
  o.inputs = {path("in.jsonl")};
  o.out = path("model.h5");
  o.media_root = kChatInputs;
  o.threads = 1;
  o.chat_template = kTemplates + "/qwen3_vl_chat_template.json";
  const MultimodalPreprocessSummary summary = preprocess_multimodal(o);
  EXPECT_EQ(summary.images, 1);

  std::vector<int64_t> expected;
  for (const int64_t id : expected_case["ids"].get<std::vector<int64_t>>()) {
    if (id == 151655)
      expected.insert(expected.end(), 70, 0);
    else
      expected.push_back(id);
  }
  const Sample sample = DatasetReader(path("model.h5")).read(0);
  const Tensor& ids = sample.at("input_ids");
  EXPECT_EQ(std::vector<int64_t>(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel()), expected);
  // Trained: the tool call and "No rain." with their <|im_end|>, from the assistant spans of the prefixes.
  const Tensor& labels = sample.at("labels");
  std::vector<int32_t> trained;
  for (int64_t i = 0; i < labels.numel(); ++i)
    if (labels.data<int64_t>()[i] != kIgnoreIndex) trained.push_back(static_cast<int32_t>(labels.data<int64_t>()[i]));
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Here\"}}\n</tool_call>";
  std::vector<int32_t> want = testing::qwen3_tokenizer()->encode(call + "<|im_end|>");
  const std::vector<int32_t> answer = testing::qwen3_tokenizer()->encode("No rain.<|im_end|>");
  want.insert(want.end(), answer.begin(), answer.end());
  EXPECT_EQ(trained, want);

  // Our ChatML renders the same record otherwise (no tools, a "tool" turn).
  o.chat_template = "chatml";
  o.out = path("chatml.h5");
  preprocess_multimodal(o);
  EXPECT_NE(DatasetReader(path("chatml.h5")).read(0).at("input_ids").numel(), ids.numel());
}

}  // namespace
}  // namespace veomni
