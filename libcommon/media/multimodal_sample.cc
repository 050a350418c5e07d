// Assembling a multimodal sample: positions on placeholder ids, masks, zeroed ids, labels and the media tensors.
#include "media/multimodal_sample.h"

#include <cstring>

#include "core/error.h"
#include "data/batch.h"
#include "data/constants.h"
#include "data/mrope_positions.h"

namespace veomni {

namespace {

VisionGrid to_grid(const VisionPatches& patches) {
  return {patches.grid_thw[0], patches.grid_thw[1], patches.grid_thw[2]};
}

std::vector<const ProcessedMedia*> of_kind(const std::vector<ProcessedMedia>& media, PartKind kind) {
  std::vector<const ProcessedMedia*> out;
  for (const ProcessedMedia& m : media)
    if (m.kind == kind) out.push_back(&m);
  return out;
}

// Rows of f32 [rows_i, width] tensors stacked into one [sum rows_i, width].
Tensor stack_rows(const std::vector<const Tensor*>& parts, int64_t width) {
  int64_t rows = 0;
  for (const Tensor* t : parts) rows += t->dim(0);
  Tensor out = Tensor::empty({rows, width}, DType::F32);
  float* dst = out.data<float>();
  for (const Tensor* t : parts) {
    VEOMNI_CHECK(t->ndim() == 2 && t->dim(1) == width && t->dtype() == DType::F32, "media rows {} vs width {}",
                 t->describe(), width);
    std::memcpy(dst, t->data<float>(), static_cast<size_t>(t->numel()) * sizeof(float));
    dst += t->numel();
  }
  return out;
}

Tensor vision_values(const std::vector<const ProcessedMedia*>& media, int64_t patch_dim) {
  std::vector<const Tensor*> parts;
  for (const ProcessedMedia* m : media) parts.push_back(&m->patches.pixel_values);
  return stack_rows(parts, patch_dim);
}

Tensor grid_rows(const std::vector<const ProcessedMedia*>& media) {
  std::vector<int64_t> values;
  for (const ProcessedMedia* m : media) values.insert(values.end(), m->patches.grid_thw.begin(), m->patches.grid_thw.end());
  return Tensor::from_vector(values, {static_cast<int64_t>(media.size()), 3});
}

Tensor mask_of(const std::vector<int64_t>& ids, int64_t placeholder) {
  Tensor mask = Tensor::full<bool>({static_cast<int64_t>(ids.size())}, false);
  bool* p = mask.data<bool>();
  for (size_t i = 0; i < ids.size(); ++i) p[i] = ids[i] == placeholder;
  return mask;
}

template <typename T>
Tensor positions_tensor(const MropePositions<T>& positions) {
  return Tensor::from_vector(positions.position_ids, {3, positions.length()});
}

Tensor qwen3_vl_positions(const std::vector<int64_t>& ids, const std::vector<ProcessedMedia>& media,
                          const MultimodalMediaConfig& config) {
  Qwen3VlMedia grids;
  for (const ProcessedMedia* m : of_kind(media, PartKind::Image)) grids.images.push_back(to_grid(m->patches));
  for (const ProcessedMedia* m : of_kind(media, PartKind::Video)) grids.videos.push_back(to_grid(m->patches));
  Qwen3VlRopeOptions options;
  options.spatial_merge_size = config.image.merge_size;
  return positions_tensor(qwen3_vl_rope_index(ids, grids, with_veomni_placeholders(options)));
}

Tensor qwen3_omni_positions(const std::vector<int64_t>& ids, const std::vector<ProcessedMedia>& media,
                            const MultimodalTokenIds& token_ids, const MultimodalMediaConfig& config) {
  Qwen3OmniMedia inputs;
  for (const ProcessedMedia* m : of_kind(media, PartKind::Image)) inputs.images.push_back(to_grid(m->patches));
  for (const ProcessedMedia* m : of_kind(media, PartKind::Video)) {
    inputs.videos.push_back(to_grid(m->patches));
    inputs.video_second_per_grid.push_back(m->second_per_grid);
  }
  for (const ProcessedMedia* m : of_kind(media, PartKind::Audio)) inputs.audio_feature_lengths.push_back(m->features.dim(0));
  Qwen3OmniRopeOptions options;
  options.vision_start_token_id = token_ids.vision_start;
  options.audio_start_token_id = token_ids.audio_start;
  options.spatial_merge_size = config.image.merge_size;
  return positions_tensor(qwen3_omni_rope_index(ids, inputs, with_veomni_placeholders(options)));
}

void add_audio_keys(Sample& sample, const std::vector<ProcessedMedia>& media, const std::vector<int64_t>& ids,
                    const MultimodalMediaConfig& config) {
  const std::vector<const ProcessedMedia*> clips = of_kind(media, PartKind::Audio);
  std::vector<const Tensor*> features;
  std::vector<int64_t> lengths;
  for (const ProcessedMedia* m : clips) {
    features.push_back(&m->features);
    lengths.push_back(m->features.dim(0));
  }
  sample["audio_mask"] = mask_of(ids, kAudioInputIndex);
  sample["input_features"] = stack_rows(features, config.audio.n_mels);
  sample["audio_feature_lengths"] = Tensor::from_vector(lengths, {static_cast<int64_t>(lengths.size())});
}

}  // namespace

Sample build_multimodal_sample(const MultimodalTokens& tokens, const std::vector<ProcessedMedia>& media,
                               const MultimodalTokenIds& token_ids, const MultimodalMediaConfig& config) {
  const std::vector<int64_t>& ids = tokens.ids;
  const int64_t length = tokens.size();
  const bool omni = config.model == MultimodalModel::Qwen3OmniMoe;
  Sample sample;
  sample["position_ids"] =
      omni ? qwen3_omni_positions(ids, media, token_ids, config) : qwen3_vl_positions(ids, media, config);
  sample["image_mask"] = mask_of(ids, kImageInputIndex);
  sample["video_mask"] = mask_of(ids, kVideoInputIndex);
  if (omni) add_audio_keys(sample, media, ids, config);

  Tensor input_ids = Tensor::empty({length}, DType::I64);
  Tensor labels = Tensor::empty({length}, DType::I64);
  int64_t* in = input_ids.data<int64_t>();
  int64_t* lab = labels.data<int64_t>();
  for (int64_t i = 0; i < length; ++i) {
    const int64_t id = ids[static_cast<size_t>(i)];
    const bool placeholder = id == kImageInputIndex || id == kVideoInputIndex || id == kAudioInputIndex;
    in[i] = placeholder ? 0 : id;
    lab[i] = tokens.trained[static_cast<size_t>(i)] && !placeholder ? id : kIgnoreIndex;
  }
  sample["input_ids"] = input_ids;
  sample["labels"] = labels;
  sample["attention_mask"] = Tensor::full<int64_t>({length}, 1);

  const int64_t patch_dim = 3 * config.image.temporal_patch_size * config.image.patch_size * config.image.patch_size;
  const std::vector<const ProcessedMedia*> images = of_kind(media, PartKind::Image);
  const std::vector<const ProcessedMedia*> videos = of_kind(media, PartKind::Video);
  sample["pixel_values"] = vision_values(images, patch_dim);
  sample["image_grid_thw"] = grid_rows(images);
  sample["pixel_values_videos"] = vision_values(videos, patch_dim);
  sample["video_grid_thw"] = grid_rows(videos);
  return sample;
}

MultimodalEncoder::MultimodalEncoder(const Tokenizer& tokenizer, MultimodalMediaConfig config,
                                     std::optional<std::string> system_prompt)
    : chat_(tokenizer), config_(std::move(config)), system_prompt_(std::move(system_prompt)) {}

EncodedMultimodal MultimodalEncoder::encode(const nlohmann::json& record, const std::string& media_dir,
                                            const ModelRendering* rendering, bool generation_prompt) const {
  VEOMNI_CHECK(!(rendering && generation_prompt), "a generation prompt is opened by ChatML encoding only");
  const std::vector<MultimodalMessage> messages =
      parse_multimodal_record(record, config_.model, media_dir, system_prompt_);
  EncodedMultimodal out;
  std::vector<ProcessedMedia> media;
  std::vector<MediaExtent> extents;
  for (size_t k = 0; k < messages.size(); ++k) {
    for (size_t j = 0; j < messages[k].parts.size(); ++j) {
      const ContentPart& part = messages[k].parts[j];
      if (part.kind == PartKind::Text) continue;
      try {
        media.push_back(process_media(part, config_));
      } catch (const InputError& e) {
        // Decoders name the file; say which part it was, and the path where a message left it out.
        const std::string what = e.what();
        const std::string where = what.find(part.value) == std::string::npos ? part.value + ": " : "";
        throw InputError(fmt::format("message {} part {} ({}): {}{}", k, j, part_kind_name(part.kind), where, what));
      }
      extents.push_back(media_extent(media.back(), config_));
      out.images += part.kind == PartKind::Image;
      out.videos += part.kind == PartKind::Video;
      out.audio_clips += part.kind == PartKind::Audio;
    }
  }
  const MultimodalTokens tokens =
      rendering ? chat_.encode_rendering(rendering->text, rendering->spans, extents)
                : chat_.encode(messages, extents, generation_prompt);
  out.length = tokens.size();
  for (uint8_t t : tokens.trained) out.trained += t;
  out.sample = build_multimodal_sample(tokens, media, chat_.ids(), config_);
  return out;
}

}  // namespace veomni
