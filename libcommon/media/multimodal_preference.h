// Multimodal preference records for veomni-preprocess preference --model-type: TRL-layout pairs whose prompt holds
// image, video and audio parts, to one pair sample (man veomni-data(5), PREFERENCE PAIRS) with the media twice.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "data/tokenizer.h"
#include "media/multimodal_media.h"
#include "media/multimodal_sample.h"
#include "media/multimodal_tokens.h"

namespace veomni {

// One sample as the two halves' multimodal samples concatenated: every [L] key chosen then rejected, position_ids
// [3, L] along their second axis (each half's positions start at 0), every media key the chosen half's items then
// the rejected half's; plus chosen_length i64 [1].
Sample concat_pair_halves(const Sample& chosen, const Sample& rejected);

// Record -> pair sample. The record is {"prompt": [...], "chosen": [...], "rejected": [...]} or {"chosen": [...],
// "rejected": [...]} whose shared leading messages are the prompt (as veomni-preprocess preference reads text pairs),
// the messages in the form veomni-preprocess multimodal reads (text, image, video and audio parts); the answers are
// assistant messages of text. The prompt's media are decoded once and held by both halves; each half is rendered with
// the multimodal chat template, its prompt's labels -100 (earlier assistant turns included). Optional
// "ref_chosen_logps" and "ref_rejected_logps" come together. Thread-safe; InputError naming the key, message and part.
class MultimodalPairEncoder {
 public:
  MultimodalPairEncoder(const Tokenizer& tokenizer, MultimodalMediaConfig config,
                        std::optional<std::string> system_prompt = {});

  EncodedMultimodal encode(const nlohmann::json& record, const std::string& media_dir) const;

 private:
  MultimodalTemplate chat_;
  MultimodalMediaConfig config_;
  std::optional<std::string> system_prompt_;
};

}  // namespace veomni
