// Media prompts through MultimodalEncoder (the tokenizer, the model directory's preprocessor_config.json), or, in a
// build without the media library, an error naming the first one.
#include "media_prompts.h"

#include <filesystem>

#include "core/error.h"

#ifdef VEOMNI_HAVE_MEDIA
#include "data/tokenizer.h"
#include "media/multimodal_media.h"
#include "media/multimodal_sample.h"
#endif

namespace veomni {

namespace {

// The checks that do not need the media library.
void check_media_prompt(const PromptRecord& record, const GenerationModel& model, const std::string& chat_template) {
  VEOMNI_INPUT_CHECK(!model.multimodal_type.empty(),
                     "{}: the conversation has image, video or audio parts, but the model ({}, {}) takes text only "
                     "(hint: media parts need a Qwen3-VL, Qwen3-VL-MoE or Qwen3-Omni HF directory)",
                     record.location, model.model_type, model.source);
  VEOMNI_INPUT_CHECK(chat_template == "chatml",
                     "{}: a conversation with media parts is rendered with ChatML, not --chat-template {} (hint: "
                     "--chat-template chatml)",
                     record.location, chat_template);
  const std::string tokenizer = model.tokenizer_dir + "/tokenizer.json";
  VEOMNI_INPUT_CHECK(!model.tokenizer_dir.empty() && std::filesystem::exists(tokenizer),
                     "{}: a conversation with media parts needs the model's tokenizer, and {} does not exist",
                     record.location, tokenizer);
}

}  // namespace

#ifdef VEOMNI_HAVE_MEDIA

std::vector<std::optional<Sample>> encode_media_prompts(const std::vector<PromptRecord>& records,
                                                        GenerationModel& model, const std::string& model_dir,
                                                        const std::string& chat_template) {
  std::vector<std::optional<Sample>> samples(records.size());
  std::optional<Tokenizer> tokenizer;
  std::optional<MultimodalEncoder> encoder;
  for (size_t i = 0; i < records.size(); ++i) {
    const PromptRecord& record = records[i];
    if (!record.has_media()) continue;
    check_media_prompt(record, model, chat_template);
    if (!encoder) {
      load_media_encoders(model);
      // veomni-preprocess multimodal's processor settings: the model directory's preprocessor_config.json, else the
      // family's defaults.
      const MultimodalModel family = multimodal_model_from_name(
          model.multimodal_type == "qwen3_omni_moe" ? "qwen3_omni_moe" : "qwen3_vl");
      const std::string processor = model_dir + "/preprocessor_config.json";
      tokenizer.emplace(Tokenizer::from_file(model.tokenizer_dir + "/tokenizer.json"));
      encoder.emplace(*tokenizer, std::filesystem::exists(processor) ? media_config_from_json(processor, family)
                                                                     : default_media_config(family));
    }
    const nlohmann::json conversation = {{"messages", nlohmann::json::parse(record.messages.dump())}};
    try {
      samples[i] = encoder->encode(conversation, record.media_dir, nullptr, /*generation_prompt=*/true).sample;
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", record.location, e.what()));
    }
  }
  return samples;
}

#else

std::vector<std::optional<Sample>> encode_media_prompts(const std::vector<PromptRecord>& records,
                                                        GenerationModel& model, const std::string& /*model_dir*/,
                                                        const std::string& chat_template) {
  for (const PromptRecord& record : records) {
    if (!record.has_media()) continue;
    check_media_prompt(record, model, chat_template);
    throw InputError(fmt::format("{}: image, video and audio parts need the media library, which this build does "
                                 "not have (libpng, libjpeg, libsndfile, libsoxr, FFmpeg)",
                                 record.location));
  }
  return std::vector<std::optional<Sample>>(records.size());
}

#endif

}  // namespace veomni
