// Multimodal conversation records for veomni-preprocess multimodal: messages of text, image, video and audio parts.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace veomni {

// The model family whose processor and chat template a dataset follows.
enum class MultimodalModel { Qwen3VL, Qwen3OmniMoe };

// "qwen3_vl" or "qwen3_omni_moe" (HF model_type); InputError for other names.
MultimodalModel multimodal_model_from_name(std::string_view name);
const char* multimodal_model_name(MultimodalModel model);

enum class PartKind { Text, Image, Video, Audio };
const char* part_kind_name(PartKind kind);

struct ContentPart {
  PartKind kind = PartKind::Text;
  std::string value;  // the text, or the media file's path (resolved against the media directory)
};

struct MultimodalMessage {
  std::string role;
  std::vector<ContentPart> parts;  // a string content is one text part
};

// The messages of a record {"messages": [{"role": ..., "content": "text" | [part, ...]}, ...]}; a part is
// {"type": "text", "text": ...}, {"type": "image", "image": PATH}, {"type": "video", "video": PATH} or
// {"type": "audio", "audio": PATH}. Relative paths are joined to media_dir. system_prompt is prepended when the first
// message is not a system one. InputError naming the message and part for anything else, and for audio parts under
// Qwen3-VL (its processor has no audio).
std::vector<MultimodalMessage> parse_multimodal_record(const nlohmann::json& record, MultimodalModel model,
                                                       const std::string& media_dir,
                                                       const std::optional<std::string>& system_prompt = {});

}  // namespace veomni
