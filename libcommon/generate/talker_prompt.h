// The talker's inputs from a Qwen3-Omni conversation and the thinker's reply, built as transformers'
// Qwen3OmniMoeForConditionalGeneration.generate(return_audio=True) builds them: system turns dropped, user turns as
// projected thinker embeddings (projected hidden states of the accept layer at multimodal placeholders), the last
// assistant turn as its role tokens, tts pads, tts_bos and the first reply token over the codec special tokens and
// the speaker, the rest of the reply left as trailing text closed by tts_eos.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tensor.h"
#include "model/talker/talker.h"

namespace veomni {

// The special ids of a Qwen3-Omni config.json (top level and thinker_config).
struct OmniSpeechIds {
  int64_t im_start = 151644, im_end = 151645, system = 8948, user = 872, assistant = 77091;
  int64_t tts_pad = 151671, tts_bos = 151672, tts_eos = 151673;
  std::vector<int64_t> multimodal = {151675, 151655, 151656};  // audio, image, video placeholders

  bool is_multimodal(int64_t id) const;
};

// Reads the ids from a parsed config.json (defaults are transformers 5.17's); errors name `source` and the key.
OmniSpeechIds omni_speech_ids_from_json(const nlohmann::json& config, const std::string& source);

struct TalkerPrompt {
  Tensor prefill;        // [P, talker hidden]
  Tensor trailing_text;  // [N, talker hidden]: the reply's projected embeddings after the first, then tts_eos
  Tensor tts_pad;        // [1, talker hidden]
};

// Where the user turns hold multimodal placeholders (which then need the accept layer's hidden states).
bool user_turns_hold_multimodal(const OmniSpeechIds& ids, const std::vector<int64_t>& prompt);

// prompt: the thinker's prompt ids; reply: its new ids (the last is never spoken, as transformers has no hidden
// state for it). thinker_embeds: the thinker's token embeddings of prompt + reply minus its last token,
// [prompt + reply - 1, thinker hidden]; thinker_hidden: the accept layer's hidden states of the same rows, needed
// (defined) only where user_turns_hold_multimodal. tts_special: the thinker's embeddings of tts_bos, tts_eos,
// tts_pad [3, thinker hidden]. InputError naming `where` for a prompt that is not a chat ending in an open assistant
// turn or a role other than system/user/assistant; veomni::Error (exit 1) for a reply shorter than two tokens
// (nothing to speak).
TalkerPrompt build_talker_prompt(const Talker& talker, const OmniSpeechIds& ids, int64_t speaker_token,
                                 const std::vector<int64_t>& prompt, const std::vector<int64_t>& reply,
                                 const Tensor& thinker_embeds, const Tensor& thinker_hidden, const Tensor& tts_special,
                                 const std::string& where);

}  // namespace veomni
