// veomni-preprocess multimodal: token layouts against whole-string tokenization, labels, masks, positions, bad media.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/common/scratch_dir.h"
#include "core/error.h"
#include "data/constants.h"
#include "data/dataset_reader.h"
#include "data/mrope_positions.h"
#include "media/multimodal_preprocess.h"
#include "media/multimodal_sample.h"
#include "media/video_decode.h"
#include "test_tokenizer_util.h"

namespace veomni {
namespace {

using json = nlohmann::json;
const std::string kMultimodalInputs = std::string(VEOMNI_FIXTURES_DIR) + "/media/inputs";

std::vector<int64_t> i64(const Tensor& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()); }

std::string repeat_token(const std::string& token, int64_t times) {
  std::string out;
  for (int64_t i = 0; i < times; ++i) out += token;
  return out;
}

std::vector<int64_t> encode64(const Tokenizer& tokenizer, const std::string& text) {
  const std::vector<int32_t> ids = tokenizer.encode(text);
  return {ids.begin(), ids.end()};
}

// HF's way: the rendered conversation tokenized as one string, then pads replaced by VeOmni's placeholders.
std::vector<int64_t> with_placeholders(std::vector<int64_t> ids) {
  for (int64_t& id : ids) {
    if (id == 151655) id = kImageInputIndex;
    if (id == 151656) id = kVideoInputIndex;
  }
  return ids;
}

// The trained tokens of a conversation ending in one assistant message: its content and <|im_end|>.
std::vector<int64_t> last_assistant_labels(const Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  const std::vector<int64_t> header = encode64(tokenizer, "<|im_start|>assistant\n");
  std::vector<int64_t> labels(ids.size(), kIgnoreIndex);
  const auto at = std::find_end(ids.begin(), ids.end(), header.begin(), header.end());
  for (auto it = at + static_cast<std::ptrdiff_t>(header.size()); it != ids.end() - 1; ++it)
    labels[static_cast<size_t>(it - ids.begin())] = *it;  // everything up to the final "\n"
  return labels;
}

// Qwen3-Omni's audio encoder output length, written out here from the formula (not audio_length.cc).
int64_t omni_audio_tokens(int64_t frames) {
  const auto floordiv = [](int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); };
  const int64_t leave = frames % 100;
  const int64_t feat = floordiv(leave - 1, 2) + 1;
  return floordiv(floordiv(feat - 1, 2) + 1 - 1, 2) + 1 + (frames / 100) * 13;
}

json part(const std::string& type, const std::string& value) { return {{"type", type}, {type, value}}; }

TEST(MediaMultimodal, TextRunsAreTokenizedWholeAcrossTimestampTexts) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalTemplate chat(*tokenizer);
  const std::vector<MultimodalMessage> messages = {
      {"user", {{PartKind::Text, "Look:"}, {PartKind::Video, "v.mp4"}, {PartKind::Image, "a.png"}}},
      {"assistant", {{PartKind::Text, "Done."}}}};
  const std::vector<MediaExtent> media = {{PartKind::Video, 3, 2, {"<0.3 seconds>", "<1.5 seconds>"}},
                                          {PartKind::Image, 4, 1, {}}};
  const MultimodalTokens tokens = chat.encode(messages, media);
  const std::string video = repeat_token("<|video_pad|>", 3);
  const std::vector<int64_t> expected = with_placeholders(encode64(
      *tokenizer, "<|im_start|>user\nLook:<0.3 seconds><|vision_start|>" + video + "<|vision_end|><1.5 seconds>"
                  "<|vision_start|>" + video + "<|vision_end|><|vision_start|>" + repeat_token("<|image_pad|>", 4) +
                  "<|vision_end|><|im_end|>\n<|im_start|>assistant\nDone.<|im_end|>\n"));
  EXPECT_EQ(tokens.ids, expected);
  const std::vector<int64_t> labels = last_assistant_labels(*tokenizer, expected);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(tokens.trained[i] != 0, labels[i] != kIgnoreIndex) << "token " << i;
}

TEST(MediaMultimodal, Qwen3VlVideoKeepsTheOuterMarkersAroundTimestampedBlocks) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalTemplate chat(*tokenizer);
  const std::vector<MultimodalMessage> messages = {
      {"user", {{PartKind::Video, "v.mp4"}, {PartKind::Text, "What moves?"}}},
      {"assistant", {{PartKind::Text, "A square."}, {PartKind::Video, "w.mp4"}}}};
  const std::vector<MediaExtent> media = {{PartKind::Video, 2, 2, {"<0.3 seconds>", "<1.5 seconds>"}, true},
                                          {PartKind::Video, 1, 1, {"<0.0 seconds>"}, true}};
  const MultimodalTokens tokens = chat.encode(messages, media);
  const std::string pads = repeat_token("<|video_pad|>", 2);
  const std::vector<int64_t> expected = with_placeholders(encode64(
      *tokenizer, "<|im_start|>user\n<|vision_start|><0.3 seconds><|vision_start|>" + pads +
                      "<|vision_end|><1.5 seconds><|vision_start|>" + pads +
                      "<|vision_end|><|vision_end|>What moves?<|im_end|>\n<|im_start|>assistant\nA square."
                      "<|vision_start|><0.0 seconds><|vision_start|><|video_pad|><|vision_end|><|vision_end|>"
                      "<|im_end|>\n"));
  EXPECT_EQ(tokens.ids, expected);
  // The outer pair is 151652 ... 151653 (transformers 5.17: 4 <|vision_start|> for a 3-patch video).
  EXPECT_EQ(tokens.ids[3], 151652);
  EXPECT_EQ(tokens.ids[4], 27);  // "<" opens the timestamp as its own text run
  // Trained: the assistant's tokens (its markers and timestamps too) but never the media pads.
  const std::vector<int64_t> labels = last_assistant_labels(*tokenizer, expected);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(tokens.trained[i] != 0, labels[i] != kIgnoreIndex && expected[i] >= 0) << "token " << i;
}

TEST(MediaMultimodal, TheQwen3TokenizerLacksAudioTokensSoOmniIdsAreUsed) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalTokenIds ids = multimodal_token_ids(*tokenizer);
  EXPECT_FALSE(ids.audio_from_tokenizer);
  EXPECT_EQ(ids.audio_start, 151669);
  EXPECT_EQ(ids.audio_end, 151670);
  EXPECT_EQ(ids.audio_pad, 151675);
  EXPECT_EQ(ids.vision_start, 151652);
  EXPECT_EQ(ids.vision_end, 151653);
}

TEST(MediaMultimodal, Qwen3VlTwoImagesAndAVideo) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalMediaConfig config = default_media_config(MultimodalModel::Qwen3VL);
  const MultimodalEncoder encoder(*tokenizer, config);
  const json record = {
      {"messages",
       {{{"role", "user"},
         {"content",
          {part("image", "image_rgb_48x64.png"), part("text", "Compare them."), part("image", "image_photo_100x300.jpg"),
           part("video", "video_h264.mp4"), part("text", "What moves?")}}},
        {{"role", "assistant"}, {"content", "A square, to the right."}}}}};
  const EncodedMultimodal encoded = encoder.encode(record, kMultimodalInputs);
  const Sample& s = encoded.sample;
  EXPECT_EQ(encoded.images, 2);
  EXPECT_EQ(encoded.videos, 1);

  const std::vector<int64_t> image_grids = i64(s.at("image_grid_thw"));
  const std::vector<int64_t> video_grid = i64(s.at("video_grid_thw"));
  ASSERT_EQ(image_grids.size(), 6u);
  ASSERT_EQ(video_grid.size(), 3u);
  // The sampled frames' times, one per temporal patch (the video helper's functions, checked against HF there).
  const VideoInfo info = probe_video(kMultimodalInputs + "/video_h264.mp4");
  const std::vector<double> seconds = qwen3_vl_frame_timestamps(
      sample_frame_indices(info.num_frames, info.fps, config.video), info.fps, config.video.temporal_patch_size);
  ASSERT_EQ(static_cast<int64_t>(seconds.size()), video_grid[0]);

  const auto image = [&](size_t k) {
    return "<|vision_start|>" +
           repeat_token("<|image_pad|>", image_grids[3 * k] * image_grids[3 * k + 1] * image_grids[3 * k + 2] / 4) +
           "<|vision_end|>";
  };
  // Transformers 5.17 keeps the template's outer markers around the timestamped per-frame blocks.
  std::string video = "<|vision_start|>";
  for (double t : seconds)
    video += qwen3_vl_timestamp_text(t) + "<|vision_start|>" +
             repeat_token("<|video_pad|>", video_grid[1] * video_grid[2] / 4) + "<|vision_end|>";
  video += "<|vision_end|>";
  const std::vector<int64_t> real_ids = encode64(
      *tokenizer, "<|im_start|>user\n" + image(0) + "Compare them." + image(1) + video +
                      "What moves?<|im_end|>\n<|im_start|>assistant\nA square, to the right.<|im_end|>\n");
  const std::vector<int64_t> placeholder_ids = with_placeholders(real_ids);
  ASSERT_EQ(encoded.length, static_cast<int64_t>(real_ids.size()));

  // Ids zeroed at media, masks where the placeholders were, labels on the assistant's answer only.
  const std::vector<int64_t> input_ids = i64(s.at("input_ids"));
  const Tensor& image_mask = s.at("image_mask");
  const Tensor& video_mask = s.at("video_mask");
  ASSERT_EQ(image_mask.dtype(), DType::Bool);
  int64_t image_tokens = 0, video_tokens = 0;
  for (size_t i = 0; i < real_ids.size(); ++i) {
    const bool is_image = placeholder_ids[i] == kImageInputIndex, is_video = placeholder_ids[i] == kVideoInputIndex;
    EXPECT_EQ(image_mask.data<bool>()[i], is_image) << i;
    EXPECT_EQ(video_mask.data<bool>()[i], is_video) << i;
    EXPECT_EQ(input_ids[i], is_image || is_video ? 0 : real_ids[i]) << i;
    image_tokens += is_image;
    video_tokens += is_video;
  }
  EXPECT_EQ(image_tokens, (image_grids[0] * image_grids[1] * image_grids[2] + image_grids[3] * image_grids[4] *
                           image_grids[5]) / 4);
  EXPECT_EQ(video_tokens, video_grid[0] * video_grid[1] * video_grid[2] / 4);
  EXPECT_EQ(i64(s.at("labels")), last_assistant_labels(*tokenizer, real_ids));
  EXPECT_EQ(i64(s.at("attention_mask")), std::vector<int64_t>(real_ids.size(), 1));

  // Positions: get_rope_index on the placeholder ids, the same as on the real pad ids.
  Qwen3VlMedia grids;
  grids.images = {{image_grids[0], image_grids[1], image_grids[2]}, {image_grids[3], image_grids[4], image_grids[5]}};
  grids.videos = {{video_grid[0], video_grid[1], video_grid[2]}};
  const MropePositions<int64_t> on_real = qwen3_vl_rope_index(real_ids, grids);
  EXPECT_EQ(qwen3_vl_rope_index(placeholder_ids, grids, with_veomni_placeholders(Qwen3VlRopeOptions{})).position_ids,
            on_real.position_ids);
  ASSERT_EQ(s.at("position_ids").shape(), (Shape{3, encoded.length}));
  EXPECT_EQ(i64(s.at("position_ids")), on_real.position_ids);

  EXPECT_EQ(s.at("pixel_values").shape(),
            (Shape{image_grids[0] * image_grids[1] * image_grids[2] + image_grids[3] * image_grids[4] * image_grids[5],
                   1536}));
  EXPECT_EQ(s.at("pixel_values_videos").shape(), (Shape{video_grid[0] * video_grid[1] * video_grid[2], 1536}));
  EXPECT_EQ(s.count("audio_mask"), 0u);
}

TEST(MediaMultimodal, Qwen3OmniImageAndAudio) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalEncoder encoder(*tokenizer, default_media_config(MultimodalModel::Qwen3OmniMoe));
  const json record = {{"messages",
                        {{{"role", "user"},
                          {"content",
                           {part("image", "image_rgb_48x64.png"), part("audio", "audio_speech_16k_mono.wav"),
                            part("text", "Describe both.")}}},
                         {{"role", "assistant"}, {"content", "A picture and speech."}}}}};
  const EncodedMultimodal encoded = encoder.encode(record, kMultimodalInputs);
  const Sample& s = encoded.sample;
  EXPECT_EQ(encoded.audio_clips, 1);
  const std::vector<int64_t> grid = i64(s.at("image_grid_thw"));
  const std::vector<int64_t> frames = i64(s.at("audio_feature_lengths"));
  ASSERT_EQ(grid.size(), 3u);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(s.at("input_features").shape(), (Shape{frames[0], 128}));
  const int64_t audio_tokens = omni_audio_tokens(frames[0]);

  // The Qwen3 tokenizer has no audio tokens: the audio block is spliced in with Qwen3-Omni's ids.
  std::vector<int64_t> ids = encode64(*tokenizer, "<|im_start|>user\n<|vision_start|>" +
                                                      repeat_token("<|image_pad|>", grid[0] * grid[1] * grid[2] / 4) +
                                                      "<|vision_end|>");
  ids.push_back(151669);
  ids.insert(ids.end(), static_cast<size_t>(audio_tokens), kAudioInputIndex);
  ids.push_back(151670);
  const std::vector<int64_t> tail =
      encode64(*tokenizer, "Describe both.<|im_end|>\n<|im_start|>assistant\nA picture and speech.<|im_end|>\n");
  ids.insert(ids.end(), tail.begin(), tail.end());
  ids = with_placeholders(ids);
  ASSERT_EQ(encoded.length, static_cast<int64_t>(ids.size()));

  std::vector<int64_t> zeroed = ids;
  for (int64_t& id : zeroed)
    if (id < 0) id = 0;
  EXPECT_EQ(i64(s.at("input_ids")), zeroed);
  int64_t audio_mask = 0;
  for (int64_t i = 0; i < encoded.length; ++i) {
    EXPECT_EQ(s.at("audio_mask").data<bool>()[i], ids[static_cast<size_t>(i)] == kAudioInputIndex);
    audio_mask += s.at("audio_mask").data<bool>()[i];
  }
  EXPECT_EQ(audio_mask, audio_tokens);
  EXPECT_EQ(i64(s.at("labels")), last_assistant_labels(*tokenizer, zeroed));

  Qwen3OmniMedia media;
  media.images = {{grid[0], grid[1], grid[2]}};
  media.audio_feature_lengths = frames;
  const MropePositions<float> expected =
      qwen3_omni_rope_index(ids, media, with_veomni_placeholders(Qwen3OmniRopeOptions{}));
  const Tensor& positions = s.at("position_ids");
  ASSERT_EQ(positions.dtype(), DType::F32);
  ASSERT_EQ(positions.shape(), (Shape{3, encoded.length}));
  EXPECT_EQ(std::vector<float>(positions.data<float>(), positions.data<float>() + positions.numel()),
            expected.position_ids);
  // The audio block continues the text positions after the image: its first token is max(image) + 1 + 1.
  EXPECT_EQ(s.at("pixel_values_videos").shape(), (Shape{0, 1536}));
  EXPECT_EQ(s.at("video_grid_thw").shape(), (Shape{0, 3}));
}

TEST(MediaMultimodal, RecordErrorsNameThePart) {
  const Tokenizer* tokenizer = testing::qwen3_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const MultimodalEncoder vl(*tokenizer, default_media_config(MultimodalModel::Qwen3VL));
  // Lists of parts are built with json::array: a braced list of one object would be that object.
  const auto error = [&](const std::vector<json>& parts) {
    try {
      vl.encode({{"messages", {{{"role", "user"}, {"content", json(parts)}}}}}, kMultimodalInputs);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({part("audio", "audio_speech_16k_mono.wav")}).find("audio parts need --model-type qwen3_omni_moe"),
            std::string::npos);
  EXPECT_NE(error({part("text", "sneaky <|image_pad|>")}).find("message 0 part 0: the text holds <|image_pad|>"),
            std::string::npos);
  EXPECT_NE(error({{{"type", "picture"}, {"picture", "x"}}}).find("unknown type 'picture'"), std::string::npos);
  EXPECT_NE(error({{{"type", "image"}}}).find("a image part needs a \"image\" string"), std::string::npos);
  const std::string missing = error({part("text", "x"), part("image", "no_such.png")});
  EXPECT_NE(missing.find("message 0 part 1 (image)"), std::string::npos) << missing;
  EXPECT_NE(missing.find(kMultimodalInputs + "/no_such.png"), std::string::npos) << missing;
  const std::string corrupt = error({part("video", "video_zero_frames.avi")});
  EXPECT_NE(corrupt.find("video_zero_frames.avi"), std::string::npos) << corrupt;
}

class MediaMultimodalPipeline : public testing::ScratchDir {
 protected:
  void write(const std::string& name, const std::vector<json>& records) {
    std::ofstream out(path(name));
    for (const json& r : records) out << r.dump() << "\n";
  }
  static json conversation(const json& user_content) {
    return {{"messages", json::array({json{{"role", "user"}, {"content", user_content}},
                                      json{{"role", "assistant"}, {"content", "Fine."}}})}};
  }
  static json parts(const std::vector<json>& list) { return json(list); }
  MultimodalPreprocessOptions options(const std::string& input) const {
    MultimodalPreprocessOptions o;
    o.tokenizer_path = testing::kQwen3TokenizerPath;
    o.inputs = {path(input)};
    o.out = path("out.h5");
    o.media_root = kMultimodalInputs;
    o.threads = 2;
    return o;
  }
};

TEST_F(MediaMultimodalPipeline, BadMediaNamesFileLineAndPathOrIsSkipped) {
  {
    std::ofstream(path("corrupt.png")) << "not a png";
  }
  write("records.jsonl", {conversation(parts({part("image", "image_rgb_48x64.png")})),
                          conversation(parts({part("image", "missing.png")})),
                          conversation(parts({part("image", path("corrupt.png"))})), conversation("text only")});
  try {
    preprocess_multimodal(options("records.jsonl"));
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path("records.jsonl") + ":2: message 0 part 0 (image)"), std::string::npos) << what;
    EXPECT_NE(what.find(kMultimodalInputs + "/missing.png"), std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(path("out.h5")));

  MultimodalPreprocessOptions o = options("records.jsonl");
  o.skip_bad = true;
  const MultimodalPreprocessSummary summary = preprocess_multimodal(o);
  EXPECT_EQ(summary.records, 4);
  EXPECT_EQ(summary.samples, 2);
  EXPECT_EQ(summary.bad, 2);
  EXPECT_EQ(summary.images, 1);
  ASSERT_EQ(summary.bad_examples.size(), 2u);
  EXPECT_NE(summary.bad_examples[1].find("corrupt.png"), std::string::npos) << summary.bad_examples[1];

  // Every sample has every key: the text-only one holds empty media arrays.
  const DatasetReader reader(path("out.h5"));
  ASSERT_EQ(reader.num_samples(), 2);
  EXPECT_EQ(reader.info().kind, "vl");
  const Sample text_only = reader.read(1);
  EXPECT_EQ(text_only.size(), 10u);
  EXPECT_EQ(text_only.at("pixel_values").shape(), (Shape{0, 1536}));
  EXPECT_EQ(text_only.at("image_grid_thw").shape(), (Shape{0, 3}));
  EXPECT_EQ(reader.read(0).at("pixel_values").shape()[1], 1536);
}

TEST_F(MediaMultimodalPipeline, LongSamplesAreDroppedOrRefusedNeverTruncated) {
  write("records.jsonl", {conversation(parts({part("image", "image_rgb_48x64.png")})), conversation("short")});
  MultimodalPreprocessOptions o = options("records.jsonl");
  o.max_seq_len = 40;  // the image alone takes 70 tokens (224x320 after smart_resize)
  MultimodalPreprocessSummary summary = preprocess_multimodal(o);
  EXPECT_EQ(summary.samples, 1);
  EXPECT_EQ(summary.dropped_too_long, 1);
  o.error_on_too_long = true;
  try {
    preprocess_multimodal(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("records.jsonl:1: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("more than --max-seq-len 40"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace veomni
