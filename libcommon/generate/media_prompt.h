// Prompts with images, video or audio for veomni-generate: a prompt as a multimodal sample (the keys
// veomni-preprocess multimodal stores, made by the same code), and the prefill of a batch of such prompts through
// the multimodal model's encoders into the language model's KV cache.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/sample.h"
#include "generate/generator.h"
#include "model/thinker/multimodal_lm.h"

namespace veomni {

// The ids a sample's prompt generates from (input_ids: media rows hold 0) and the position of its first generated
// token: its largest M-RoPE position + 1 (transformers' rope_deltas). InputError naming `location` for a sample
// without input_ids or with positions of another length.
std::vector<int64_t> sample_prompt_ids(const Sample& sample, const std::string& location);
int64_t sample_next_position(const Sample& sample, const std::string& location);

// Builds the prefill of each batch (Generator::set_prefill_builder): the batch's prompts packed by the multimodal
// collator (a prompt with a sample takes its positions, masks and media; one without is text, positions 0..n-1 in
// the three streams), embedded by MultimodalBody::input_embeds (the encoders' outputs over the media rows, the
// deepstack features after the first layers), as the training forward embeds a micro-batch.
class MultimodalPrefill {
 public:
  // samples[i]: the sample of prompt i of the whole input, or none for a text prompt. The body must outlive the
  // builder.
  MultimodalPrefill(MultimodalBody& body, std::vector<std::optional<Sample>> samples);
  PrefillInputs operator()(const std::vector<std::vector<int64_t>>& prompts, int64_t first_index) const;

 private:
  MultimodalBody& body_;
  std::shared_ptr<const std::vector<std::optional<Sample>>> samples_;  // shared: PrefillBuilder copies the builder
};

}  // namespace veomni
