// Multimodal preference pairs: the prompt and answers of a record, the prompt's media decoded once, each half rendered
// and built as a multimodal sample, the halves joined into one pair sample.
#include "media/multimodal_preference.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "data/preference_record.h"
#include "data/dataset_objective_keys.h"
#include "media/multimodal_record.h"

namespace veomni {

namespace {

using json = nlohmann::json;

struct PairMessages {
  std::vector<MultimodalMessage> prompt, chosen, rejected;  // chosen and rejected: the answers only
};

// The messages under `key` (parse_multimodal_record's form), with the key named in any error.
std::vector<MultimodalMessage> messages_of(const json& record, const char* key, MultimodalModel model,
                                           const std::string& media_dir, const std::optional<std::string>& system) {
  try {
    return parse_multimodal_record(json{{"messages", record[key]}}, model, media_dir, system);
  } catch (const InputError& e) {
    throw InputError(fmt::format("\"{}\": {}", key, e.what()));
  }
}

void check_answer(const std::vector<MultimodalMessage>& answer, const char* key, size_t first_index) {
  VEOMNI_INPUT_CHECK(!answer.empty(), "\"{}\" has no answer after the prompt", key);
  bool any_content = false;
  for (size_t k = 0; k < answer.size(); ++k) {
    VEOMNI_INPUT_CHECK(answer[k].role == "assistant",
                       "\"{}\" message {} is a {} message; the answer after the prompt holds assistant messages only",
                       key, first_index + k, answer[k].role);
    for (size_t j = 0; j < answer[k].parts.size(); ++j) {
      const ContentPart& part = answer[k].parts[j];
      VEOMNI_INPUT_CHECK(part.kind == PartKind::Text,
                         "\"{}\" message {} part {} is an {} part; answers are text (media belong in the prompt)", key,
                         first_index + k, j, part_kind_name(part.kind));
      any_content = any_content || !part.value.empty();
    }
  }
  VEOMNI_INPUT_CHECK(any_content, "the {} answer is empty", key);
}

bool same_message(const MultimodalMessage& a, const MultimodalMessage& b) {
  if (a.role != b.role || a.parts.size() != b.parts.size()) return false;
  for (size_t j = 0; j < a.parts.size(); ++j)
    if (a.parts[j].kind != b.parts[j].kind || a.parts[j].value != b.parts[j].value) return false;
  return true;
}

// {"chosen": [conversation], "rejected": [conversation]}: the shared leading messages are the prompt.
PairMessages split_shared_prompt(std::vector<MultimodalMessage> chosen, std::vector<MultimodalMessage> rejected) {
  size_t shared = 0;
  while (shared < chosen.size() && shared < rejected.size() && same_message(chosen[shared], rejected[shared]))
    ++shared;
  VEOMNI_INPUT_CHECK(shared > 0, "\"chosen\" and \"rejected\" have different prompts: their first messages differ");
  VEOMNI_INPUT_CHECK(shared < chosen.size() && shared < rejected.size(),
                     "\"{}\" has no answer: all its messages are the prompt it shares with the other",
                     shared == chosen.size() ? "chosen" : "rejected");
  PairMessages out;
  out.prompt.assign(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(shared));
  out.chosen.assign(chosen.begin() + static_cast<std::ptrdiff_t>(shared), chosen.end());
  out.rejected.assign(rejected.begin() + static_cast<std::ptrdiff_t>(shared), rejected.end());
  check_answer(out.chosen, "chosen", shared);
  check_answer(out.rejected, "rejected", shared);
  return out;
}

// a then b along `axis` (0, or 1 of a 2-D tensor); the other sizes must agree.
Tensor concat(const Tensor& a, const Tensor& b, int axis, const std::string& key) {
  VEOMNI_CHECK(a.dtype() == b.dtype() && a.ndim() == b.ndim() && (axis == 0 || a.ndim() == 2),
               "the pair's halves disagree on '{}': {} vs {}", key, a.describe(), b.describe());
  Shape shape = a.shape();
  shape[static_cast<size_t>(axis)] += b.dim(axis);
  Tensor out = Tensor::empty(shape, a.dtype());
  auto* dst = static_cast<char*>(out.raw_data());
  if (axis == 0) {
    if (a.nbytes() > 0) std::memcpy(dst, a.raw_data(), a.nbytes());
    if (b.nbytes() > 0) std::memcpy(dst + a.nbytes(), b.raw_data(), b.nbytes());
    return out;
  }
  const size_t element = dtype_size(a.dtype());
  const auto row_a = static_cast<size_t>(a.dim(1)) * element, row_b = static_cast<size_t>(b.dim(1)) * element;
  for (int64_t r = 0; r < a.dim(0); ++r) {
    std::memcpy(dst + static_cast<size_t>(r) * (row_a + row_b), static_cast<const char*>(a.raw_data()) + r * row_a,
                row_a);
    std::memcpy(dst + static_cast<size_t>(r) * (row_a + row_b) + row_a,
                static_cast<const char*>(b.raw_data()) + r * row_b, row_b);
  }
  return out;
}

}  // namespace

Sample concat_pair_halves(const Sample& chosen, const Sample& rejected) {
  Sample pair;
  for (const auto& [key, tensor] : chosen) {
    const auto other = rejected.find(key);
    VEOMNI_CHECK(other != rejected.end(), "the rejected half has no '{}'", key);
    pair[key] = concat(tensor, other->second, key == "position_ids" ? 1 : 0, key);
  }
  const int64_t chosen_length = chosen.at("input_ids").dim(0);
  pair[kChosenLengthKey] = Tensor::from_vector(std::vector<int64_t>{chosen_length}, {1});
  return pair;
}

MultimodalPairEncoder::MultimodalPairEncoder(const Tokenizer& tokenizer, MultimodalMediaConfig config,
                                             std::optional<std::string> system_prompt)
    : chat_(tokenizer), config_(std::move(config)), system_prompt_(std::move(system_prompt)) {}

EncodedMultimodal MultimodalPairEncoder::encode(const json& record, const std::string& media_dir) const {
  VEOMNI_INPUT_CHECK(record.is_object(), "the record is {}, expected a JSON object", record.type_name());
  const bool has_chosen = record.contains("chosen"), has_rejected = record.contains("rejected");
  VEOMNI_INPUT_CHECK(has_chosen && has_rejected,
                     "the record needs \"chosen\" and \"rejected\" (optionally with \"prompt\"); it has {}",
                     has_chosen ? "no \"rejected\"" : has_rejected ? "no \"chosen\"" : "neither");
  const MultimodalModel model = config_.model;
  PairMessages messages;
  if (record.contains("prompt") && !record["prompt"].is_string()) {
    messages.prompt = messages_of(record, "prompt", model, media_dir, system_prompt_);
    messages.chosen = messages_of(record, "chosen", model, media_dir, std::nullopt);
    messages.rejected = messages_of(record, "rejected", model, media_dir, std::nullopt);
    check_answer(messages.chosen, "chosen", 0);
    check_answer(messages.rejected, "rejected", 0);
  } else {
    messages = split_shared_prompt(messages_of(record, "chosen", model, media_dir, system_prompt_),
                                   messages_of(record, "rejected", model, media_dir, system_prompt_));
  }
  const bool ref_chosen = record.contains("ref_chosen_logps"), ref_rejected = record.contains("ref_rejected_logps");
  VEOMNI_INPUT_CHECK(ref_chosen == ref_rejected, "the record has \"{}\" but no \"{}\" (give both or neither)",
                     ref_chosen ? "ref_chosen_logps" : "ref_rejected_logps",
                     ref_chosen ? "ref_rejected_logps" : "ref_chosen_logps");

  EncodedMultimodal out;
  std::vector<ProcessedMedia> media;
  std::vector<MediaExtent> extents;
  for (size_t k = 0; k < messages.prompt.size(); ++k)
    for (size_t j = 0; j < messages.prompt[k].parts.size(); ++j) {
      const ContentPart& part = messages.prompt[k].parts[j];
      if (part.kind == PartKind::Text) continue;
      try {
        media.push_back(process_media(part, config_));
      } catch (const InputError& e) {
        const std::string what = e.what();
        const std::string where = what.find(part.value) == std::string::npos ? part.value + ": " : "";
        throw InputError(
            fmt::format("prompt message {} part {} ({}): {}{}", k, j, part_kind_name(part.kind), where, what));
      }
      extents.push_back(media_extent(media.back(), config_));
      out.images += 2 * (part.kind == PartKind::Image);  // held by both halves
      out.videos += 2 * (part.kind == PartKind::Video);
      out.audio_clips += 2 * (part.kind == PartKind::Audio);
    }
  const MultimodalTokens prompt = chat_.encode(messages.prompt, extents);
  const auto half = [&](const std::vector<MultimodalMessage>& answer) {
    std::vector<MultimodalMessage> conversation = messages.prompt;
    conversation.insert(conversation.end(), answer.begin(), answer.end());
    MultimodalTokens tokens = chat_.encode(conversation, extents);
    // Every message starts with <|im_start|>, so the conversation's ids begin with the prompt's.
    VEOMNI_CHECK(std::equal(prompt.ids.begin(), prompt.ids.end(), tokens.ids.begin()),
                 "the rendered prompt is not a prefix of its conversation");
    std::fill(tokens.trained.begin(), tokens.trained.begin() + prompt.size(), uint8_t{0});
    for (uint8_t t : tokens.trained) out.trained += t;
    out.length += tokens.size();
    return build_multimodal_sample(tokens, media, chat_.ids(), config_);
  };
  const Sample chosen = half(messages.chosen);
  out.sample = concat_pair_halves(chosen, half(messages.rejected));
  if (ref_chosen) {
    out.sample[kRefChosenLogpsKey] =
        Tensor::from_vector(std::vector<float>{record_ref_logps(record, "ref_chosen_logps")}, {1});
    out.sample[kRefRejectedLogpsKey] =
        Tensor::from_vector(std::vector<float>{record_ref_logps(record, "ref_rejected_logps")}, {1});
  }
  return out;
}

}  // namespace veomni
