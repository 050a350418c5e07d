// Building the talker's prefill and trailing text from the chat turns of a prompt and the thinker's reply.
#include "generate/talker_prompt.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_keys.h"
#include "kernels/ops.h"
#include "model/talker/speech_common.h"

namespace veomni {

bool OmniSpeechIds::is_multimodal(int64_t id) const {
  return std::find(multimodal.begin(), multimodal.end(), id) != multimodal.end();
}

OmniSpeechIds omni_speech_ids_from_json(const nlohmann::json& config, const std::string& source) {
  VEOMNI_INPUT_CHECK(config.is_object(), "{}: expected a JSON object, got {}", source, config.dump());
  const JsonKeys keys(config, source);
  OmniSpeechIds ids;
  ids.im_start = keys.integer("im_start_token_id", ids.im_start);
  ids.im_end = keys.integer("im_end_token_id", ids.im_end);
  ids.system = keys.integer("system_token_id", ids.system);
  ids.user = keys.integer("user_token_id", ids.user);
  ids.assistant = keys.integer("assistant_token_id", ids.assistant);
  ids.tts_pad = keys.integer("tts_pad_token_id", ids.tts_pad);
  ids.tts_bos = keys.integer("tts_bos_token_id", ids.tts_bos);
  ids.tts_eos = keys.integer("tts_eos_token_id", ids.tts_eos);
  if (keys.has("thinker_config")) {
    const JsonKeys thinker(keys.object("thinker_config"), source + " thinker_config");
    ids.multimodal = {thinker.integer("audio_token_id", ids.multimodal[0]),
                      thinker.integer("image_token_id", ids.multimodal[1]),
                      thinker.integer("video_token_id", ids.multimodal[2])};
  }
  return ids;
}

namespace {

// The chat turns: where each <|im_start|> of the prompt begins one, its end the next one's start (the last turn
// runs to the end of prompt + reply).
struct Turn {
  int64_t begin = 0, end = 0, role = 0;
};

std::vector<Turn> chat_turns(const OmniSpeechIds& ids, const std::vector<int64_t>& prompt, int64_t total,
                             const std::string& where) {
  std::vector<int64_t> starts;
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] == ids.im_start) starts.push_back(static_cast<int64_t>(i));
  VEOMNI_INPUT_CHECK(!starts.empty(),
                     "{}: no <|im_start|> (id {}): speaking needs a chat prompt (messages, or input_ids laid out as "
                     "the chat template lays them out)",
                     where, ids.im_start);
  std::vector<Turn> turns;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t begin = starts[i];
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : total;
    VEOMNI_INPUT_CHECK(begin + 1 < static_cast<int64_t>(prompt.size()),
                       "{}: the prompt ends with <|im_start|> at position {}: no role follows it", where, begin);
    const int64_t role = prompt[static_cast<size_t>(begin + 1)];
    VEOMNI_INPUT_CHECK(role == ids.system || role == ids.user || role == ids.assistant,
                       "{}: token {} after <|im_start|> at position {} is not a role (system {}, user {}, assistant "
                       "{})",
                       where, role, begin, ids.system, ids.user, ids.assistant);
    turns.push_back({begin, end, role});
  }
  VEOMNI_INPUT_CHECK(turns.back().role == ids.assistant,
                     "{}: the prompt must end with an open assistant turn (<|im_start|>assistant\\n, the chat "
                     "template's generation prompt) for the talker to speak the reply",
                     where);
  return turns;
}

// Row r of the result: hidden_projection(hidden[r]) at multimodal placeholders, text_projection(embeds[r]) elsewhere.
Tensor user_turn(const Talker& talker, const OmniSpeechIds& ids, const std::vector<int64_t>& sequence,
                 const Turn& turn, const Tensor& embeds, const Tensor& hidden) {
  Tensor out = talker.project_text(embeds.slice(turn.begin, turn.end));
  for (int64_t r = turn.begin; r < turn.end; ++r) {
    if (!ids.is_multimodal(sequence[static_cast<size_t>(r)])) continue;
    Tensor row = out.slice(r - turn.begin, r - turn.begin + 1);
    row.copy_from(talker.project_hidden(hidden.slice(r, r + 1)));
  }
  return out;
}

// rows[i] = a[i] + b[i] for two [n, hidden] tensors.
Tensor added(const Tensor& a, const Tensor& b) {
  Tensor out = a.clone();
  ops::add_(out, b);
  return out;
}

}  // namespace

bool user_turns_hold_multimodal(const OmniSpeechIds& ids, const std::vector<int64_t>& prompt) {
  bool in_user = false;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] == ids.im_start) in_user = i + 1 < prompt.size() && prompt[i + 1] == ids.user;
    if (in_user && ids.is_multimodal(prompt[i])) return true;
  }
  return false;
}

TalkerPrompt build_talker_prompt(const Talker& talker, const OmniSpeechIds& ids, int64_t speaker_token,
                                 const std::vector<int64_t>& prompt, const std::vector<int64_t>& reply,
                                 const Tensor& thinker_embeds, const Tensor& thinker_hidden, const Tensor& tts_special,
                                 const std::string& where) {
  const TalkerConfig& config = talker.config();
  std::vector<int64_t> sequence = prompt;
  sequence.insert(sequence.end(), reply.begin(), reply.end());
  const auto total = static_cast<int64_t>(sequence.size());
  VEOMNI_CHECK(thinker_embeds.ndim() == 2 && thinker_embeds.dim(0) == total - 1,
               "thinker embeddings {} for a sequence of {} tokens", thinker_embeds.describe(), total);
  if (reply.size() < 2)  // the model's doing, not the input's: the run fails
    throw Error(fmt::format("{}: the thinker's reply has {} token(s): the talker starts from the reply's first token "
                            "and never speaks its last, so there is nothing to speak (hint: a larger "
                            "--max-new-tokens)",
                            where, reply.size()));
  const std::vector<Turn> turns = chat_turns(ids, prompt, total - 1, where);
  VEOMNI_CHECK(!user_turns_hold_multimodal(ids, prompt) || thinker_hidden.defined(),
               "multimodal placeholders without the accept layer's hidden states");

  const Tensor special = talker.project_text(tts_special);  // tts_bos, tts_eos, tts_pad
  const Tensor tts_bos = special.slice(0, 1), tts_eos = special.slice(1, 2), tts_pad = special.slice(2, 3);
  Tensor prefill;
  const auto append = [&prefill](const Tensor& rows) { prefill = prefill.defined() ? concat_rows(prefill, rows) : rows; };
  for (size_t i = 0; i + 1 < turns.size(); ++i)  // the system turns and earlier assistant turns are not spoken
    if (turns[i].role == ids.user) append(user_turn(talker, ids, sequence, turns[i], thinker_embeds, thinker_hidden));

  // The assistant turn: <|im_start|> assistant \n, four tts pads, tts_bos, the reply's first token, over zeros
  // (the role tokens) and the codec's nothink, think_bos, think_eos, speaker, pad and bos embeddings.
  const Turn& last = turns.back();
  const Tensor assistant = talker.project_text(thinker_embeds.slice(last.begin, last.end));
  Tensor text = assistant.slice(0, 3);
  for (int i = 0; i < 4; ++i) text = concat_rows(text, tts_pad);
  text = concat_rows(concat_rows(text, tts_bos), assistant.slice(3, 4));
  const Tensor codec = concat_rows(
      Tensor::zeros({3, config.text.hidden_size}, text.dtype(), text.device()),
      talker.embed_codec({config.codec_nothink_id, config.codec_think_bos_id, config.codec_think_eos_id,
                          speaker_token, config.codec_pad_id, config.codec_bos_id}));
  append(added(text, codec));

  TalkerPrompt out;
  out.prefill = prefill;
  out.trailing_text = concat_rows(assistant.slice(4, assistant.dim(0)), tts_eos);
  out.tts_pad = tts_pad.clone();
  return out;
}

}  // namespace veomni
