// Validation of multimodal conversation records and resolution of their media paths.
#include "media/multimodal_record.h"

#include <filesystem>

#include "core/error.h"
#include "data/chat_template.h"

namespace veomni {

namespace {

using json = nlohmann::json;

PartKind part_kind_from_name(const std::string& name, size_t message, size_t part) {
  if (name == "text") return PartKind::Text;
  if (name == "image") return PartKind::Image;
  if (name == "video") return PartKind::Video;
  if (name == "audio") return PartKind::Audio;
  throw InputError(fmt::format("message {} part {}: unknown type '{}' (expected text, image, video or audio)", message,
                               part, name));
}

std::string resolve_media_path(const std::string& path, const std::string& media_dir) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || media_dir.empty()) return path;
  return (std::filesystem::path(media_dir) / p).string();
}

ContentPart parse_part(const json& part, MultimodalModel model, const std::string& media_dir, size_t message,
                       size_t index) {
  VEOMNI_INPUT_CHECK(part.is_object(), "message {} part {} is {}, expected an object", message, index,
                     part.type_name());
  VEOMNI_INPUT_CHECK(part.contains("type") && part["type"].is_string(), "message {} part {} has no \"type\" string",
                     message, index);
  const std::string type = part["type"].get<std::string>();
  ContentPart out{part_kind_from_name(type, message, index), {}};
  VEOMNI_INPUT_CHECK(part.contains(type) && part[type].is_string(), "message {} part {}: a {} part needs a \"{}\" string",
                     message, index, type, type);
  out.value = part[type].get<std::string>();
  if (out.kind == PartKind::Text) return out;
  VEOMNI_INPUT_CHECK(!out.value.empty(), "message {} part {}: empty {} path", message, index, type);
  VEOMNI_INPUT_CHECK(out.kind != PartKind::Audio || model == MultimodalModel::Qwen3OmniMoe,
                     "message {} part {}: audio parts need --model-type qwen3_omni_moe (Qwen3-VL has no audio)",
                     message, index);
  out.value = resolve_media_path(out.value, media_dir);
  return out;
}

MultimodalMessage parse_message(const json& m, MultimodalModel model, const std::string& media_dir, size_t k) {
  VEOMNI_INPUT_CHECK(m.is_object(), "message {} is {}, expected an object", k, m.type_name());
  VEOMNI_INPUT_CHECK(m.contains("role") && m["role"].is_string(), "message {} has no \"role\" string", k);
  VEOMNI_INPUT_CHECK(m.contains("content"), "message {} has no \"content\"", k);
  MultimodalMessage message{m["role"].get<std::string>(), {}};
  VEOMNI_INPUT_CHECK(is_chat_role(message.role),
                     "message {}: unknown role '{}' (expected system, user, assistant or tool)", k, message.role);
  const json& content = m["content"];
  if (content.is_string()) {
    message.parts.push_back({PartKind::Text, content.get<std::string>()});
    return message;
  }
  VEOMNI_INPUT_CHECK(content.is_array(), "message {}: \"content\" is {}, expected a string or a list of parts", k,
                     content.type_name());
  for (size_t j = 0; j < content.size(); ++j) message.parts.push_back(parse_part(content[j], model, media_dir, k, j));
  return message;
}

}  // namespace

MultimodalModel multimodal_model_from_name(std::string_view name) {
  if (name == "qwen3_vl") return MultimodalModel::Qwen3VL;
  if (name == "qwen3_omni_moe") return MultimodalModel::Qwen3OmniMoe;
  throw InputError(fmt::format("unknown model type '{}' (expected qwen3_vl or qwen3_omni_moe)", name));
}

const char* multimodal_model_name(MultimodalModel model) {
  return model == MultimodalModel::Qwen3VL ? "qwen3_vl" : "qwen3_omni_moe";
}

const char* part_kind_name(PartKind kind) {
  switch (kind) {
    case PartKind::Text: return "text";
    case PartKind::Image: return "image";
    case PartKind::Video: return "video";
    case PartKind::Audio: return "audio";
  }
  return "?";
}

std::vector<MultimodalMessage> parse_multimodal_record(const json& record, MultimodalModel model,
                                                       const std::string& media_dir,
                                                       const std::optional<std::string>& system_prompt) {
  VEOMNI_INPUT_CHECK(record.is_object(), "the record is {}, expected a JSON object", record.type_name());
  VEOMNI_INPUT_CHECK(record.contains("messages"), "the record has no \"messages\"");
  const json& list = record["messages"];
  VEOMNI_INPUT_CHECK(list.is_array(), "\"messages\" is {}, expected an array", list.type_name());
  VEOMNI_INPUT_CHECK(!list.empty(), "\"messages\" is empty");
  std::vector<MultimodalMessage> messages;
  for (size_t k = 0; k < list.size(); ++k) messages.push_back(parse_message(list[k], model, media_dir, k));
  if (system_prompt && messages.front().role != "system")
    messages.insert(messages.begin(), MultimodalMessage{"system", {{PartKind::Text, *system_prompt}}});
  return messages;
}

}  // namespace veomni
