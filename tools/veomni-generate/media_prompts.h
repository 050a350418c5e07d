// The prompts of veomni-generate that hold image, video or audio parts, made into multimodal samples by
// veomni-preprocess multimodal's encoder (ChatML with the assistant's turn opened), where this build has the media
// library.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "data/sample.h"
#include "generate/generation_model.h"
#include "generate/prompt_file.h"

namespace veomni {

// One entry per record: the sample of a record with media parts, none for the others (nothing is read when no
// record has media; else the model's media encoders are loaded, load_media_encoders). Media paths resolve against
// each record's media_dir. InputError naming the record's file:line
// for media on a model without media encoders, a chat template other than chatml, a model without tokenizer.json,
// a missing, unreadable or corrupt media file, or a build without the media library.
std::vector<std::optional<Sample>> encode_media_prompts(const std::vector<PromptRecord>& records,
                                                        GenerationModel& model, const std::string& model_dir,
                                                        const std::string& chat_template);

}  // namespace veomni
