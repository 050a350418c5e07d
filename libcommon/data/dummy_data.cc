// VeOmni-compatible dummy samples (and preference pairs and rollouts) from a portable PRNG, and the streaming writer
// of a dummy dataset.
#include "data/dummy_data.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "core/progress_meter.h"
#include "core/rng.h"
#include "data/audio_length.h"
#include "data/batch.h"
#include "data/chat_template_identity.h"
#include "data/dataset_objective_keys.h"
#include "data/dataset_writer.h"
#include "veomni/version.h"

namespace veomni {

namespace {

// VeOmni's dummy media: two still images and one 10-frame video of 4x4 patches, two 400-frame audio clips.
constexpr int64_t kVocabSize = 1024;
constexpr int64_t kGridSide = 4;
constexpr int64_t kMergeSize = 2;
constexpr int64_t kImages = 2;
constexpr int64_t kVideoFrames = 10;
constexpr int64_t kAudioClips = 2;
constexpr int64_t kAudioClipFrames = 400;
constexpr int64_t kMelBins = 128;
// Before Qwen3-Omni's formula VeOmni reserves 4 frames per audio token: 2 clips x 100 tokens.
constexpr int64_t kReservedAudioTokens = kAudioClips * kAudioClipFrames / 4;

// Uniform in [0, 1) with 24 random bits (every value exactly representable in f32).
float uniform24(Rng& rng) { return static_cast<float>(rng.next_u64() >> 40) * 0x1.0p-24f; }
// Uniform in [0, 1024): the top 10 bits.
int64_t random_token(Rng& rng) { return static_cast<int64_t>(rng.next_u64() >> 54); }
static_assert(kVocabSize == 1 << 10, "random_token draws 10 bits");

int64_t vision_tokens(const std::array<int64_t, 3>& grid) {
  return grid[0] * grid[1] * grid[2] / (kMergeSize * kMergeSize);
}

int64_t patch_rows(const std::vector<std::array<int64_t, 3>>& grids) {
  int64_t rows = 0;
  for (const auto& grid : grids) rows += grid[0] * grid[1] * grid[2];
  return rows;
}

void add_media_layout(DummyLayout& layout, int64_t patch_size) {
  layout.patch_dim = 3 * 2 * patch_size * patch_size;
  layout.image_grids.assign(kImages, {1, kGridSide, kGridSide});
  layout.video_grids.assign(1, {kVideoFrames, kGridSide, kGridSide});
  for (const auto& grid : layout.image_grids) layout.image_tokens += vision_tokens(grid);
  for (const auto& grid : layout.video_grids) layout.video_tokens += vision_tokens(grid);
}

// VL: images first, text, video last; L = seq_len.
void vl_layout(DummyLayout& layout, int64_t patch_size) {
  add_media_layout(layout, patch_size);
  layout.text_tokens = layout.seq_len - layout.image_tokens - layout.video_tokens;
  VEOMNI_INPUT_CHECK(layout.text_tokens >= 0, "--seq-len {} is too short for {}: images and video take {} tokens",
                     layout.seq_len, dummy_type_name(layout.type), layout.image_tokens + layout.video_tokens);
  layout.length = layout.seq_len;
  layout.image_begin = 0;
  layout.video_begin = layout.length - layout.video_tokens;
}

// Omni: text, images, audio, video. The text budget is set from VeOmni's 100-token audio placeholders;
// the audio then takes what Qwen3-Omni's encoder emits for the clips, so L = seq_len - 96 here.
void omni_layout(DummyLayout& layout, int64_t patch_size) {
  add_media_layout(layout, patch_size);
  layout.audio_clip_frames.assign(kAudioClips, kAudioClipFrames);
  layout.text_tokens = layout.seq_len - layout.image_tokens - kReservedAudioTokens - layout.video_tokens;
  VEOMNI_INPUT_CHECK(layout.text_tokens >= 0, "--seq-len {} is too short for {}: media take {} tokens", layout.seq_len,
                     dummy_type_name(layout.type), layout.image_tokens + kReservedAudioTokens + layout.video_tokens);
  for (int64_t frames : layout.audio_clip_frames) layout.audio_tokens += audio_output_length(frames);
  layout.image_begin = layout.text_tokens;
  layout.audio_begin = layout.image_begin + layout.image_tokens;
  layout.video_begin = layout.audio_begin + layout.audio_tokens;
  layout.length = layout.video_begin + layout.video_tokens;
}

Tensor arange_rows(int64_t rows, int64_t length) {
  Tensor t = Tensor::empty(rows == 1 ? Shape{length} : Shape{rows, length}, DType::I64);
  int64_t* p = t.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < length; ++i) p[r * length + i] = i;
  return t;
}

Tensor run_mask(int64_t length, int64_t begin, int64_t count) {
  Tensor mask = Tensor::full<bool>({length}, false);
  bool* p = mask.data<bool>();
  for (int64_t i = begin; i < begin + count; ++i) p[i] = true;
  return mask;
}

Tensor uniform_tensor(Rng& rng, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = uniform24(rng);
  return t;
}

Tensor grid_tensor(const std::vector<std::array<int64_t, 3>>& grids) {
  std::vector<int64_t> values;
  for (const auto& grid : grids) values.insert(values.end(), grid.begin(), grid.end());
  return Tensor::from_vector(values, {static_cast<int64_t>(grids.size()), 3});
}

void add_text_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  Tensor ids = Tensor::empty({layout.length}, DType::I64);
  int64_t* p = ids.data<int64_t>();
  for (int64_t i = 0; i < layout.length; ++i) p[i] = random_token(rng);
  Tensor labels = ids.clone();
  if (layout.length > 0) labels.data<int64_t>()[0] = kIgnoreIndex;
  sample["input_ids"] = ids;
  sample["labels"] = labels;
  sample["attention_mask"] = Tensor::full<int64_t>({layout.length}, 1);
  Tensor positions = arange_rows(layout.type == DummyType::Text ? 1 : 3, layout.length);
  // The Qwen3-Omni thinker's positions are float (seconds-scaled temporal ids), as veomni-preprocess stores them.
  sample["position_ids"] = layout.type == DummyType::Qwen3Omni ? positions.to_dtype(DType::F32) : positions;
}

void add_vision_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  sample["pixel_values"] = uniform_tensor(rng, {patch_rows(layout.image_grids), layout.patch_dim});
  sample["pixel_values_videos"] = uniform_tensor(rng, {patch_rows(layout.video_grids), layout.patch_dim});
  sample["image_grid_thw"] = grid_tensor(layout.image_grids);
  sample["video_grid_thw"] = grid_tensor(layout.video_grids);
  sample["image_mask"] = run_mask(layout.length, layout.image_begin, layout.image_tokens);
  sample["video_mask"] = run_mask(layout.length, layout.video_begin, layout.video_tokens);
}

void add_audio_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  int64_t frames = 0;
  for (int64_t clip : layout.audio_clip_frames) frames += clip;
  sample["input_features"] = uniform_tensor(rng, {frames, kMelBins});
  sample["audio_feature_lengths"] =
      Tensor::from_vector(layout.audio_clip_frames, {static_cast<int64_t>(layout.audio_clip_frames.size())});
  sample["audio_mask"] = run_mask(layout.length, layout.audio_begin, layout.audio_tokens);
}

// Random ids with labels: -100 on [0, prompt), the ids after it.
void random_labelled(Rng& rng, int64_t count, int64_t prompt, int64_t* ids, int64_t* labels) {
  for (int64_t i = 0; i < count; ++i) {
    ids[i] = random_token(rng);
    labels[i] = i < prompt ? kIgnoreIndex : ids[i];
  }
}

// A pair sharing its prompt: [prompt, chosen answer] then [prompt, rejected answer].
void add_preference_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  const int64_t length = layout.length, chosen = layout.chosen_tokens, prompt = layout.prompt_tokens;
  Tensor ids = Tensor::empty({length}, DType::I64), labels = Tensor::empty({length}, DType::I64);
  int64_t* id = ids.data<int64_t>();
  int64_t* label = labels.data<int64_t>();
  random_labelled(rng, chosen, prompt, id, label);
  random_labelled(rng, length - chosen, prompt, id + chosen, label + chosen);
  std::copy(id, id + prompt, id + chosen);
  std::copy(label, label + prompt, label + chosen);
  Tensor positions = Tensor::empty({length}, DType::I64);
  for (int64_t i = 0; i < length; ++i) positions.data<int64_t>()[i] = i < chosen ? i : i - chosen;
  sample["input_ids"] = ids;
  sample["labels"] = labels;
  sample["attention_mask"] = Tensor::full<int64_t>({length}, 1);
  sample["position_ids"] = positions;
  sample[kChosenLengthKey] = Tensor::from_vector(std::vector<int64_t>{chosen}, {1});
  if (!layout.ref_logps) return;
  // Summed log-probs of the answers: negative, about -4 per answer token at most.
  const auto logps = [&](int64_t answer) { return -4.0f * uniform24(rng) * static_cast<float>(answer); };
  sample[kRefChosenLogpsKey] = Tensor::from_vector(std::vector<float>{logps(chosen - prompt)}, {1});
  sample[kRefRejectedLogpsKey] = Tensor::from_vector(std::vector<float>{logps(length - chosen - prompt)}, {1});
}

// A [length] mask with the same run in both halves of a pair: [begin, begin + count) and that from `chosen` on.
Tensor pair_run_mask(int64_t length, int64_t chosen, int64_t begin, int64_t count) {
  Tensor mask = run_mask(length, begin, count);
  bool* p = mask.data<bool>();
  for (int64_t i = chosen + begin; i < chosen + begin + count; ++i) p[i] = true;
  return mask;
}

// The rows of `t` followed by the same rows again: the rejected half's copy of the prompt's media.
Tensor twice(const Tensor& t) {
  Shape shape = t.shape();
  const int64_t rows = shape[0];
  shape[0] = 2 * rows;
  Tensor out = Tensor::empty(shape, t.dtype());
  out.slice(0, rows).copy_from(t);
  out.slice(rows, 2 * rows).copy_from(t);
  return out;
}

// The media of a multimodal pair's prompt, drawn once and held by both halves; media tokens get id 0 (as
// veomni-preprocess stores them; the prompt's labels are -100 already) and positions (3, L) restart at the rejected.
void add_pair_media_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  const int64_t length = layout.length, chosen = layout.chosen_tokens;
  sample["pixel_values"] = twice(uniform_tensor(rng, {patch_rows(layout.image_grids), layout.patch_dim}));
  sample["pixel_values_videos"] = twice(uniform_tensor(rng, {patch_rows(layout.video_grids), layout.patch_dim}));
  sample["image_grid_thw"] = twice(grid_tensor(layout.image_grids));
  sample["video_grid_thw"] = twice(grid_tensor(layout.video_grids));
  sample["image_mask"] = pair_run_mask(length, chosen, layout.image_begin, layout.image_tokens / 2);
  sample["video_mask"] = pair_run_mask(length, chosen, layout.video_begin, layout.video_tokens / 2);
  if (layout.media == DummyType::Qwen3Omni) {
    int64_t frames = 0;
    for (int64_t clip : layout.audio_clip_frames) frames += clip;
    sample["input_features"] = twice(uniform_tensor(rng, {frames, kMelBins}));
    sample["audio_feature_lengths"] = twice(
        Tensor::from_vector(layout.audio_clip_frames, {static_cast<int64_t>(layout.audio_clip_frames.size())}));
    sample["audio_mask"] = pair_run_mask(length, chosen, layout.audio_begin, layout.audio_tokens / 2);
  }
  int64_t* ids = sample["input_ids"].data<int64_t>();
  for (const char* mask : {"image_mask", "video_mask", "audio_mask"}) {
    const auto found = sample.find(mask);
    if (found == sample.end()) continue;
    for (int64_t i = 0; i < length; ++i)
      if (found->second.data<bool>()[i]) ids[i] = 0;
  }
  Tensor positions = Tensor::empty({3, length}, DType::I64);
  for (int64_t st = 0; st < 3; ++st)
    for (int64_t i = 0; i < length; ++i) positions.data<int64_t>()[st * length + i] = i < chosen ? i : i - chosen;
  // The Qwen3-Omni thinker's positions are float, as for its single samples.
  sample["position_ids"] = layout.media == DummyType::Qwen3Omni ? positions.to_dtype(DType::F32) : positions;
}

// A multimodal pair's halves: a text head, images, audio (Qwen3-Omni), video, then the answer. The media are those
// of the family's dummy sample; the head takes half of what the chosen half leaves, its answer the rest.
void pair_media_layout(DummyLayout& layout) {
  VEOMNI_INPUT_CHECK(layout.media == DummyType::Qwen3VL || layout.media == DummyType::Qwen3Omni,
                     "--media must be qwen3vl or qwen3omni, got {}", dummy_type_name(layout.media));
  add_media_layout(layout, 16);
  if (layout.media == DummyType::Qwen3Omni) {
    layout.audio_clip_frames.assign(kAudioClips, kAudioClipFrames);
    for (int64_t frames : layout.audio_clip_frames) layout.audio_tokens += audio_output_length(frames);
  }
  const int64_t media = layout.image_tokens + layout.audio_tokens + layout.video_tokens;
  VEOMNI_INPUT_CHECK(layout.chosen_tokens >= media + 2,
                     "--seq-len {} is too short for {} preference pairs: each half holds the prompt's {} media "
                     "tokens, a prompt and an answer token (hint: --seq-len {} or more)",
                     layout.seq_len, dummy_type_name(layout.media), media, 2 * (media + 2));
  const int64_t head = (layout.chosen_tokens - media) / 2;
  layout.image_begin = head;
  layout.audio_begin = head + layout.image_tokens;
  layout.video_begin = layout.audio_begin + layout.audio_tokens;
  layout.prompt_tokens = head + media;
  layout.text_tokens = layout.length - 2 * media;
  layout.image_tokens *= 2;
  layout.audio_tokens *= 2;
  layout.video_tokens *= 2;
}

// A multimodal rollout: the family's dummy sample (its media where that sample has them); the response is the
// second half of its text tokens.
void rollout_media_layout(DummyLayout& layout) {
  VEOMNI_INPUT_CHECK(layout.media == DummyType::Qwen3VL || layout.media == DummyType::Qwen3Omni,
                     "--media must be qwen3vl or qwen3omni, got {}", dummy_type_name(layout.media));
  if (layout.media == DummyType::Qwen3VL) vl_layout(layout, 16);
  else omni_layout(layout, 16);
}

// Per-token rollout values where labels predict something, 0 elsewhere.
void add_rollout_values(Sample& sample, const Tensor& labels, Rng& rng) {
  const int64_t length = labels.numel();
  for (const char* key : kRolloutKeys) {
    const bool log_prob = std::string_view(key).find("log_prob") != std::string_view::npos;
    Tensor values = Tensor::zeros({length}, DType::F32);
    for (int64_t i = 0; i < length; ++i)
      if (labels.data<int64_t>()[i] != kIgnoreIndex)
        values.data<float>()[i] = log_prob ? -4.0f * uniform24(rng) : 2.0f * uniform24(rng) - 1.0f;
    sample[key] = values;
  }
}

// The family's sample with labels -100 on media tokens and on the first half of its text tokens (the prompt), and
// rollout values on the response.
void add_media_rollout_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  DummyLayout family = layout;
  family.type = layout.media;
  add_text_keys(sample, family, rng);
  add_vision_keys(sample, family, rng);
  if (layout.media == DummyType::Qwen3Omni) add_audio_keys(sample, family, rng);
  Tensor& labels = sample["labels"];
  int64_t* label = labels.data<int64_t>();
  std::vector<bool> media(static_cast<size_t>(layout.length), false);
  for (const char* mask : {"image_mask", "video_mask", "audio_mask"})
    if (const auto found = sample.find(mask); found != sample.end())
      for (int64_t i = 0; i < layout.length; ++i)
        if (found->second.data<bool>()[i]) media[static_cast<size_t>(i)] = true;
  // The first half of the text tokens is the prompt (the families put their text before, after or between media).
  int64_t text_seen = 0;
  for (int64_t i = 0; i < layout.length; ++i) {
    if (media[static_cast<size_t>(i)]) label[i] = kIgnoreIndex;
    else if (text_seen++ < layout.text_tokens / 2) label[i] = kIgnoreIndex;
  }
  add_rollout_values(sample, labels, rng);
}

// A prompt and its response with per-token values on the response (0 on the prompt).
void add_rollout_keys(Sample& sample, const DummyLayout& layout, Rng& rng) {
  const int64_t length = layout.length, prompt = layout.prompt_tokens;
  Tensor ids = Tensor::empty({length}, DType::I64), labels = Tensor::empty({length}, DType::I64);
  random_labelled(rng, length, prompt, ids.data<int64_t>(), labels.data<int64_t>());
  sample["input_ids"] = ids;
  sample["labels"] = labels;
  sample["attention_mask"] = Tensor::full<int64_t>({length}, 1);
  sample["position_ids"] = arange_rows(1, length);
  add_rollout_values(sample, labels, rng);
}

// Logs "wrote n/N samples" at most every few seconds, with the rate and the time left.
class Progress {
 public:
  explicit Progress(int64_t total) : meter_(static_cast<double>(total), std::chrono::seconds(3)) {}
  void update(int64_t done) {
    if (!meter_.due(static_cast<double>(done))) return;
    spdlog::info("wrote {}/{} samples ({:.1f}%), {:.1f} samples/s, about {:.0f} s left", done, meter_.total(),
                 100.0 * meter_.fraction(), meter_.rate(), meter_.seconds_left());
  }

 private:
  ProgressMeter meter_;
};

}  // namespace

DummyType dummy_type_from_name(std::string_view name) {
  if (name == "text") return DummyType::Text;
  if (name == "qwen2vl") return DummyType::Qwen2VL;
  if (name == "qwen3vl") return DummyType::Qwen3VL;
  if (name == "qwen3omni") return DummyType::Qwen3Omni;
  if (name == "preference") return DummyType::Preference;
  if (name == "rollout") return DummyType::Rollout;
  throw InputError(fmt::format(
      "unknown dummy data type '{}' (expected text, qwen2vl, qwen3vl, qwen3omni, preference or rollout)", name));
}

const char* dummy_type_name(DummyType type) {
  switch (type) {
    case DummyType::Text: return "text";
    case DummyType::Qwen2VL: return "qwen2vl";
    case DummyType::Qwen3VL: return "qwen3vl";
    case DummyType::Qwen3Omni: return "qwen3omni";
    case DummyType::Preference: return "preference";
    case DummyType::Rollout: return "rollout";
  }
  return "?";
}

const char* DummyLayout::dataset_kind() const {
  // A multimodal pair's or rollout's file is of its media family's kind.
  const DummyType family = type == DummyType::Preference || type == DummyType::Rollout ? media : type;
  switch (family) {
    case DummyType::Text:
    case DummyType::Preference:
    case DummyType::Rollout: return "text";
    case DummyType::Qwen2VL:
    case DummyType::Qwen3VL: return "vl";
    case DummyType::Qwen3Omni: return "omni";
  }
  return "?";
}

DummyLayout dummy_layout(DummyType type, int64_t seq_len, DummyType media) {
  VEOMNI_INPUT_CHECK(seq_len >= 1, "--seq-len must be at least 1, got {}", seq_len);
  VEOMNI_INPUT_CHECK(seq_len <= kMaxSampleTokens, "--seq-len must be at most {} (tokens per sample), got {}",
                     kMaxSampleTokens, seq_len);
  DummyLayout layout;
  layout.type = type;
  layout.seq_len = seq_len;
  layout.media = media;
  VEOMNI_INPUT_CHECK(media == DummyType::Text || type == DummyType::Preference || type == DummyType::Rollout,
                     "--media needs --type preference or rollout (it puts media in the prompt of pairs and rollouts)");
  switch (type) {
    case DummyType::Text: layout.length = layout.text_tokens = seq_len; break;
    case DummyType::Qwen2VL: vl_layout(layout, 14); break;
    case DummyType::Qwen3VL: vl_layout(layout, 16); break;
    case DummyType::Qwen3Omni: omni_layout(layout, 16); break;
    case DummyType::Preference:
      VEOMNI_INPUT_CHECK(seq_len >= 4, "--seq-len {} is too short for preference: a pair needs 4 tokens (a prompt and "
                         "an answer token in each sequence)", seq_len);
      layout.length = layout.text_tokens = seq_len;
      layout.chosen_tokens = seq_len / 2;
      layout.prompt_tokens = layout.chosen_tokens / 2;
      if (media != DummyType::Text) pair_media_layout(layout);
      break;
    case DummyType::Rollout:
      VEOMNI_INPUT_CHECK(seq_len >= 2, "--seq-len {} is too short for rollout: a prompt and a response token", seq_len);
      layout.length = layout.text_tokens = seq_len;
      if (media != DummyType::Text) rollout_media_layout(layout);
      layout.prompt_tokens = layout.length / 2;
      break;
  }
  return layout;
}

Sample make_dummy_sample(const DummyLayout& layout, uint64_t seed, int64_t index) {
  Rng rng(mix64(seed) ^ mix64(static_cast<uint64_t>(index) + 0x632be59bd9b4e019ull));
  Sample sample;
  if (layout.type == DummyType::Preference) {
    add_preference_keys(sample, layout, rng);
    if (layout.media != DummyType::Text) add_pair_media_keys(sample, layout, rng);
    return sample;
  }
  if (layout.type == DummyType::Rollout) {
    if (layout.media != DummyType::Text) add_media_rollout_keys(sample, layout, rng);
    else add_rollout_keys(sample, layout, rng);
    return sample;
  }
  add_text_keys(sample, layout, rng);
  if (layout.type != DummyType::Text) add_vision_keys(sample, layout, rng);
  if (layout.type == DummyType::Qwen3Omni) add_audio_keys(sample, layout, rng);
  return sample;
}

DummyDatasetSummary write_dummy_dataset(const DummyDatasetOptions& options) {
  VEOMNI_INPUT_CHECK(options.num_samples >= 0, "--num-samples must not be negative, got {}", options.num_samples);
  VEOMNI_INPUT_CHECK(options.num_samples <= kMaxDummySamples, "--num-samples must be at most {}, got {}",
                     kMaxDummySamples, options.num_samples);
  DummyDatasetSummary summary;
  summary.layout = dummy_layout(options.type, options.seq_len, options.media);
  VEOMNI_INPUT_CHECK(!options.ref_logps || options.type == DummyType::Preference,
                     "--ref-logps needs --type preference (reference log-probs belong to pairs)");
  summary.layout.ref_logps = options.ref_logps;
  DatasetInfo info;
  info.kind = summary.layout.dataset_kind();
  info.producer = "veomni-dummy-data";
  info.producer_version = kVersion;
  info.max_seq_len = options.seq_len;
  info.chat_template = kNoChatTemplateIdentity;
  DatasetWriterOptions writer_options;
  writer_options.compression_level = options.compression_level;
  ShardedDatasetWriter writer(options.out, options.num_samples, options.num_shards, info, writer_options);

  Progress progress(options.num_samples);
  for (int64_t i = 0; i < options.num_samples; ++i) {
    Sample sample = make_dummy_sample(summary.layout, options.seed, i);
    writer.append(sample);
    if (i == 0) summary.first_sample = std::move(sample);
    summary.tokens += summary.layout.length;
    progress.update(i + 1);
  }
  writer.close();
  summary.num_samples = options.num_samples;
  summary.files = writer.paths();
  for (const std::string& file : summary.files) summary.bytes += std::filesystem::file_size(file);
  return summary;
}

}  // namespace veomni
