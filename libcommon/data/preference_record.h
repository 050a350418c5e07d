// What the preference preprocessors (text and multimodal) read the same way from a JSONL record.
#pragma once
#include <nlohmann/json.hpp>

namespace veomni {

// The record's number under `key` (ref_chosen_logps / ref_rejected_logps) as a finite f32; InputError naming the key
// for a non-number or a value that is not finite in 32 bits.
float record_ref_logps(const nlohmann::json& record, const char* key);

}  // namespace veomni
