// Multimodal prompts as samples, and their packed prefill through the multimodal body's input embeddings.
#include "generate/media_prompt.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/multimodal_collator.h"

namespace veomni {

namespace {

const Tensor& sample_key(const Sample& sample, const char* key, const std::string& location) {
  const auto it = sample.find(key);
  VEOMNI_INPUT_CHECK(it != sample.end() && it->second.defined(), "{}: the prompt's sample has no {}", location, key);
  return it->second;
}

}  // namespace

std::vector<int64_t> sample_prompt_ids(const Sample& sample, const std::string& location) {
  const Tensor& ids = sample_key(sample, "input_ids", location);
  VEOMNI_INPUT_CHECK(ids.dtype() == DType::I64 && ids.ndim() == 1 && ids.numel() > 0,
                     "{}: the prompt's input_ids are {}, expected a non-empty i64 [L]", location, ids.describe());
  return {ids.data<int64_t>(), ids.data<int64_t>() + ids.numel()};
}

int64_t sample_next_position(const Sample& sample, const std::string& location) {
  const Tensor& positions = sample_key(sample, "position_ids", location);
  const int64_t length = sample_key(sample, "input_ids", location).numel();
  VEOMNI_INPUT_CHECK(positions.shape() == (Shape{3, length}), "{}: the prompt's position_ids are {}, expected [3, {}]",
                     location, positions.describe(), length);
  double largest = 0;
  for (int64_t i = 0; i < positions.numel(); ++i) largest = std::max(largest, positions.item_as_double(i));
  return std::llround(largest) + 1;
}

MultimodalPrefill::MultimodalPrefill(MultimodalBody& body, std::vector<std::optional<Sample>> samples)
    : body_(body), samples_(std::make_shared<const std::vector<std::optional<Sample>>>(std::move(samples))) {}

PrefillInputs MultimodalPrefill::operator()(const std::vector<std::vector<int64_t>>& prompts,
                                            int64_t first_index) const {
  const ThinkerConfig& config = body_.config();
  std::vector<Sample> text_samples(prompts.size());  // the text prompts' samples: input_ids only
  std::vector<NamedSample> named;
  PrefillInputs out;
  int64_t tokens = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const auto index = static_cast<size_t>(first_index) + b;
    const std::string context = "prompt " + std::to_string(index);
    const auto n = static_cast<int64_t>(prompts[b].size());
    tokens += n;
    if (index < samples_->size() && (*samples_)[index]) {
      const Sample& sample = *(*samples_)[index];
      VEOMNI_CHECK(sample_prompt_ids(sample, context) == prompts[b], "{}: its ids differ from its sample's", context);
      named.push_back({&sample, context});
      out.next_positions.push_back(sample_next_position(sample, context));
      continue;
    }
    text_samples[b]["input_ids"] = Tensor::from_vector(prompts[b], {n});
    named.push_back({&text_samples[b], context});
    out.next_positions.push_back(n);
  }
  MultimodalCollateOptions options;
  options.max_seq_len = tokens;
  options.merge_unit = config.vision.merge_unit();
  options.has_audio = config.has_audio;
  options.position_dtype = config.has_audio ? DType::F32 : DType::I64;  // Qwen3-Omni's positions are f32
  options.vocab_size = config.text.vocab_size;
  const MultimodalBatch batch = collate_multimodal(named, options);
  MultimodalBody::InputEmbeds embeds = body_.input_embeds(batch);
  out.embeds = std::move(embeds.embeds);
  out.after_layer = std::move(embeds.after_layer);
  out.positions = batch.text.position_ids;
  return out;
}

}  // namespace veomni
