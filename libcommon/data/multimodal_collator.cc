// Multimodal collation: per-sample consistency checks, text packing, masks, positions and media concatenation.
#include "data/multimodal_collator.h"

#include <cmath>
#include <cstring>

#include "data/audio_length.h"
#include "data/collator.h"

namespace veomni {

namespace {

Tensor optional_key(const Sample& sample, const std::string& key) {
  const auto it = sample.find(key);
  return it == sample.end() ? Tensor() : it->second;
}

// A bool / u8 / integer 0-1 mask of `length` entries; undefined gives all false.
std::vector<uint8_t> read_mask(const Sample& sample, const std::string& key, int64_t length,
                               const std::string& context) {
  std::vector<uint8_t> mask(static_cast<size_t>(length), 0);
  const Tensor t = optional_key(sample, key);
  if (!t.defined()) return mask;
  VEOMNI_INPUT_CHECK(t.ndim() == 1 && t.dim(0) == length, "{}: {} is {}, expected [{}] like input_ids", context, key,
                     t.describe(), length);
  for (int64_t i = 0; i < length; ++i) {
    const double v = t.item_as_double(i);
    VEOMNI_INPUT_CHECK(v == 0.0 || v == 1.0, "{}: {}[{}] is {}, expected 0 or 1", context, key, i, v);
    mask[static_cast<size_t>(i)] = v != 0.0;
  }
  return mask;
}

int64_t count_true(const std::vector<uint8_t>& mask) {
  int64_t n = 0;
  for (uint8_t m : mask) n += m;
  return n;
}

std::vector<VisionGrid> read_grids(const Sample& sample, const std::string& key, const std::string& context) {
  const Tensor t = optional_key(sample, key);
  if (!t.defined() || t.numel() == 0) return {};
  VEOMNI_INPUT_CHECK(t.dtype() == DType::I64 && t.ndim() == 2 && t.dim(1) == 3, "{}: {} must be i64 [n, 3], got {}",
                     context, key, t.describe());
  std::vector<VisionGrid> grids;
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.dim(0); ++i) {
    const VisionGrid g{p[3 * i], p[3 * i + 1], p[3 * i + 2]};
    // Each side is a count of 16-pixel patches: 2^20 is a picture a million patches wide, so the product (the
    // patch count) cannot overflow and no hostile grid reaches an allocation.
    constexpr int64_t kMaxGridSide = int64_t{1} << 20;
    VEOMNI_INPUT_CHECK(g.t > 0 && g.h > 0 && g.w > 0 && g.t <= kMaxGridSide && g.h <= kMaxGridSide &&
                           g.w <= kMaxGridSide,
                       "{}: {} row {} is [{}, {}, {}], expected sizes in [1, {}]", context, key, i, g.t, g.h, g.w,
                       kMaxGridSide);
    grids.push_back(g);
  }
  return grids;
}

int64_t patches_of(const std::vector<VisionGrid>& grids) {
  int64_t n = 0;
  for (const VisionGrid& g : grids) n += g.patches();
  return n;
}

// Rows of a 2-D float media tensor (0 when absent or empty); its width must match the batch's so far.
int64_t media_rows(const Sample& sample, const std::string& key, int64_t& width, const std::string& context) {
  const Tensor t = optional_key(sample, key);
  if (!t.defined() || t.numel() == 0) return 0;
  VEOMNI_INPUT_CHECK(t.ndim() == 2 && dtype_is_floating(t.dtype()), "{}: {} must be a float [N, D] tensor, got {}",
                     context, key, t.describe());
  VEOMNI_INPUT_CHECK(width < 0 || width == t.dim(1), "{}: {} has {} features per row, an earlier sample {}", context,
                     key, t.dim(1), width);
  width = t.dim(1);
  return t.dim(0);
}

// The media of one kind from every sample, one after another, as f32.
Tensor concat_media(const std::vector<NamedSample>& samples, const std::string& key, int64_t rows, int64_t width) {
  if (rows == 0) return Tensor();
  Tensor out = Tensor::empty({rows, width}, DType::F32);
  int64_t at = 0;
  for (const NamedSample& s : samples) {
    Tensor t = optional_key(*s.sample, key);
    if (!t.defined() || t.numel() == 0) continue;
    if (t.dtype() != DType::F32) t = t.to_dtype(DType::F32);
    out.slice(at, at + t.dim(0)).copy_from(t);
    at += t.dim(0);
  }
  return out;
}

std::vector<int64_t> read_audio_lengths(const Sample& sample, const std::string& context) {
  const Tensor t = optional_key(sample, "audio_feature_lengths");
  if (!t.defined() || t.numel() == 0) return {};
  VEOMNI_INPUT_CHECK(t.ndim() == 1 && !dtype_is_floating(t.dtype()),
                     "{}: audio_feature_lengths must be an integer [clips] tensor, got {}", context, t.describe());
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto len = static_cast<int64_t>(t.item_as_double(i));
    VEOMNI_INPUT_CHECK(len > 0, "{}: audio_feature_lengths[{}] is {}, expected a positive frame count", context, i,
                       len);
    lengths.push_back(len);
  }
  return lengths;
}

// Positions [3, L] of one sample written at column `at` of the [3, total] buffer, converted to the model's dtype.
void copy_positions(const Sample& sample, int64_t length, int64_t at, int64_t total, DType dtype,
                    const std::string& context, Tensor& out) {
  const Tensor p = optional_key(sample, "position_ids");
  VEOMNI_INPUT_CHECK(!p.defined() || (p.ndim() == 2 && p.dim(0) == 3 && p.dim(1) == length),
                     "{}: position_ids is {}, expected [3, {}] (3-D multimodal positions)", context,
                     p.defined() ? p.describe() : std::string(), length);
  for (int64_t st = 0; st < 3; ++st)
    for (int64_t i = 0; i < length; ++i) {
      const double v = p.defined() ? p.item_as_double(st * length + i) : static_cast<double>(i);
      const int64_t index = st * total + at + i;
      if (dtype == DType::F32) {
        out.data<float>()[index] = static_cast<float>(v);
      } else {
        VEOMNI_INPUT_CHECK(v == std::floor(v), "{}: position_ids[{}][{}] = {} is not an integer, which this model "
                                               "(integer M-RoPE positions) needs", context, st, i, v);
        out.data<int64_t>()[index] = static_cast<int64_t>(v);
      }
    }
}

// A preference pair's rejected sequence starts its M-RoPE positions again at 0, in every stream (VeOmni's layout).
void check_pair_positions(const Sample& sample, int64_t chosen_length, const std::string& context) {
  const Tensor p = optional_key(sample, "position_ids");
  VEOMNI_INPUT_CHECK(p.defined(), "{}: a preference pair needs position_ids (restarting at 0 where the rejected "
                     "sequence begins)", context);
  if (p.ndim() != 2 || chosen_length >= p.dim(1)) return;  // the shape and the range are checked with the text
  for (int64_t st = 0; st < p.dim(0); ++st)
    VEOMNI_INPUT_CHECK(p.item_as_double(st * p.dim(1) + chosen_length) == 0.0,
                       "{}: position_ids do not restart at 0 where the rejected sequence begins (token {}, "
                       "chosen_length)", context, chosen_length);
}

// A preference pair's halves are two whole conversations, each holding its own copy of the prompt's media: the
// tokens a mask marks before chosen_length must be exactly those of the first k items (images, videos or clips), so
// that no item begins in the chosen sequence and ends in the rejected one.
void check_pair_media_split(const std::vector<uint8_t>& mask, const std::vector<int64_t>& item_tokens,
                            int64_t chosen_length, const char* mask_key, const char* items_key,
                            const std::string& context) {
  int64_t chosen_marked = 0;
  for (int64_t i = 0; i < chosen_length; ++i) chosen_marked += mask[static_cast<size_t>(i)];
  int64_t before = 0;
  for (size_t k = 0; k < item_tokens.size() && before < chosen_marked; ++k) {
    VEOMNI_INPUT_CHECK(before + item_tokens[k] <= chosen_marked,
                       "{}: {} item {} of the preference pair straddles its two sequences: {} marks {} tokens before "
                       "chosen_length {}, but the items before it take {} and it takes {} (hint: each half holds the "
                       "whole prompt with its own copy of the media, the chosen half's items first)",
                       context, items_key, k, mask_key, chosen_marked, chosen_length, before, item_tokens[k]);
    before += item_tokens[k];
  }
}

// What one sample contributes, checked against itself.
struct SampleMedia {
  int64_t length = 0;
  std::vector<uint8_t> image_mask, video_mask, audio_mask;
  std::vector<VisionGrid> image_grids, video_grids;
  std::vector<int64_t> audio_lengths;
  int64_t pixel_rows = 0, video_pixel_rows = 0, feature_rows = 0;
};

struct Widths {
  int64_t pixels = -1, video_pixels = -1, features = -1;
};

void check_count(int64_t marked, int64_t expected, const std::string& mask, const std::string& what,
                 const std::string& context) {
  VEOMNI_INPUT_CHECK(marked == expected, "{}: {} marks {} tokens but {} give {}", context, mask, marked, what,
                     expected);
}

SampleMedia read_sample_media(const NamedSample& named, const MultimodalCollateOptions& options, Widths& widths) {
  const Sample& sample = *named.sample;
  const std::string& context = named.context;
  const Tensor ids = sample_key(sample, "input_ids", context);
  VEOMNI_INPUT_CHECK(ids.ndim() == 1 && ids.dtype() == DType::I64, "{}: input_ids must be i64 [L], got {}", context,
                     ids.describe());
  SampleMedia m;
  m.length = ids.dim(0);
  VEOMNI_INPUT_CHECK(m.length <= options.max_seq_len,
                     "{}: {} tokens exceed data.max_seq_len {}; a multimodal sample cannot be truncated (its media "
                     "would lose their tokens) (hint: raise data.max_seq_len)",
                     context, m.length, options.max_seq_len);
  m.image_mask = read_mask(sample, "image_mask", m.length, context);
  m.video_mask = read_mask(sample, "video_mask", m.length, context);
  m.audio_mask = read_mask(sample, "audio_mask", m.length, context);
  for (int64_t i = 0; i < m.length; ++i) {
    const size_t k = static_cast<size_t>(i);
    VEOMNI_INPUT_CHECK(m.image_mask[k] + m.video_mask[k] + m.audio_mask[k] <= 1,
                       "{}: token {} is marked by more than one of image_mask, video_mask, audio_mask", context, i);
  }
  m.image_grids = read_grids(sample, "image_grid_thw", context);
  m.video_grids = read_grids(sample, "video_grid_thw", context);
  m.pixel_rows = media_rows(sample, "pixel_values", widths.pixels, context);
  m.video_pixel_rows = media_rows(sample, "pixel_values_videos", widths.video_pixels, context);
  VEOMNI_INPUT_CHECK(m.pixel_rows == patches_of(m.image_grids),
                     "{}: pixel_values has {} rows but image_grid_thw gives {} patches", context, m.pixel_rows,
                     patches_of(m.image_grids));
  VEOMNI_INPUT_CHECK(m.video_pixel_rows == patches_of(m.video_grids),
                     "{}: pixel_values_videos has {} rows but video_grid_thw gives {} patches", context,
                     m.video_pixel_rows, patches_of(m.video_grids));
  for (const VisionGrid& g : m.image_grids)
    VEOMNI_INPUT_CHECK(g.patches() % options.merge_unit == 0, "{}: image grid [{}, {}, {}] is not a whole number of "
                       "{}-patch merge windows", context, g.t, g.h, g.w, options.merge_unit);
  for (const VisionGrid& g : m.video_grids)
    VEOMNI_INPUT_CHECK(g.patches() % options.merge_unit == 0, "{}: video grid [{}, {}, {}] is not a whole number of "
                       "{}-patch merge windows", context, g.t, g.h, g.w, options.merge_unit);
  check_count(count_true(m.image_mask), patches_of(m.image_grids) / options.merge_unit, "image_mask",
              "the image_grid_thw merged patches", context);
  check_count(count_true(m.video_mask), patches_of(m.video_grids) / options.merge_unit, "video_mask",
              "the video_grid_thw merged patches", context);

  if (!options.has_audio) {
    VEOMNI_INPUT_CHECK(count_true(m.audio_mask) == 0 && read_audio_lengths(sample, context).empty(),
                       "{}: the sample has audio but the model has no audio encoder (a Qwen3-Omni model has one)",
                       context);
    return m;
  }
  m.audio_lengths = read_audio_lengths(sample, context);
  m.feature_rows = media_rows(sample, "input_features", widths.features, context);
  int64_t frames = 0, tokens = 0;
  for (int64_t len : m.audio_lengths) {
    frames += len;
    tokens += audio_output_length(len);
  }
  VEOMNI_INPUT_CHECK(m.feature_rows == frames, "{}: input_features has {} rows but audio_feature_lengths add up to {}",
                     context, m.feature_rows, frames);
  check_count(count_true(m.audio_mask), tokens, "audio_mask", "the audio_feature_lengths' audio tokens", context);
  return m;
}

std::vector<int64_t> grid_tokens(const std::vector<VisionGrid>& grids, int64_t merge_unit) {
  std::vector<int64_t> tokens;
  for (const VisionGrid& g : grids) tokens.push_back(g.patches() / merge_unit);
  return tokens;
}

// A pair's image, video and audio items each lie within one of its sequences (see check_pair_media_split).
void check_pair_media(const SampleMedia& m, int64_t chosen_length, int64_t merge_unit, const std::string& context) {
  if (chosen_length <= 0 || chosen_length >= m.length) return;  // the text collator names a bad chosen_length
  check_pair_media_split(m.image_mask, grid_tokens(m.image_grids, merge_unit), chosen_length, "image_mask",
                         "image_grid_thw", context);
  check_pair_media_split(m.video_mask, grid_tokens(m.video_grids, merge_unit), chosen_length, "video_mask",
                         "video_grid_thw", context);
  std::vector<int64_t> clip_tokens;
  for (int64_t len : m.audio_lengths) clip_tokens.push_back(audio_output_length(len));
  check_pair_media_split(m.audio_mask, clip_tokens, chosen_length, "audio_mask", "audio_feature_lengths", context);
}

// Rows [begin, begin + local) of a packed mask as a bool tensor, and how many true entries precede `begin`.
Tensor slice_mask(const std::vector<uint8_t>& packed, int64_t begin, int64_t local, int64_t& before) {
  before = 0;
  for (int64_t i = 0; i < begin; ++i) before += packed[static_cast<size_t>(i)];
  Tensor t = Tensor::empty({local}, DType::Bool);
  bool any = false;
  for (int64_t i = 0; i < local; ++i) {
    const bool v = packed[static_cast<size_t>(begin + i)] != 0;
    t.data<bool>()[i] = v;
    any = any || v;
  }
  return any ? t : Tensor();
}

}  // namespace

MultimodalBatch collate_multimodal(const std::vector<NamedSample>& samples, const MultimodalCollateOptions& options) {
  VEOMNI_CHECK(!samples.empty(), "collate_multimodal of an empty micro-batch");
  VEOMNI_CHECK(options.sp_size >= 1 && options.sp_rank >= 0 && options.sp_rank < options.sp_size,
               "bad SP rank {}/{}", options.sp_rank, options.sp_size);
  VEOMNI_CHECK(options.position_dtype == DType::I64 || options.position_dtype == DType::F32,
               "position dtype must be i64 or f32");
  Widths widths;
  std::vector<SampleMedia> media;
  std::vector<TokenSample> tokens;
  for (const NamedSample& s : samples) {
    media.push_back(read_sample_media(s, options, widths));
    TokenSample t;
    t.context = s.context;
    t.input_ids = sample_key(*s.sample, "input_ids", s.context);
    t.labels = optional_key(*s.sample, "labels");
    VEOMNI_INPUT_CHECK(!t.labels.defined() || (t.labels.dtype() == DType::I64 && t.labels.ndim() == 1 &&
                                               t.labels.dim(0) == t.input_ids.dim(0)),
                       "{}: labels {} do not match input_ids {}", s.context,
                       t.labels.defined() ? t.labels.describe() : std::string(), t.input_ids.describe());
    read_objective_keys(*s.sample, t);
    if (t.chosen_length > 0) {
      check_pair_positions(*s.sample, t.chosen_length, s.context);
      check_pair_media(media.back(), t.chosen_length, options.merge_unit, s.context);
    }
    tokens.push_back(t);
  }
  CollateOptions text_options;
  text_options.max_seq_len = options.max_seq_len;
  text_options.sp_size = options.sp_size;
  text_options.vocab_size = options.vocab_size;
  const PackedRow row = pack_samples(tokens, text_options);
  const int64_t total = row.input_ids.dim(0);

  Tensor positions = Tensor::zeros({3, total}, options.position_dtype);
  std::vector<uint8_t> image(static_cast<size_t>(total), 0), video(image), audio(image);
  int64_t at = 0;
  MultimodalBatch batch;
  int64_t pixel_rows = 0, video_pixel_rows = 0, feature_rows = 0;
  for (size_t k = 0; k < samples.size(); ++k) {
    const SampleMedia& m = media[k];
    copy_positions(*samples[k].sample, m.length, at, total, options.position_dtype, samples[k].context, positions);
    std::copy(m.image_mask.begin(), m.image_mask.end(), image.begin() + at);
    std::copy(m.video_mask.begin(), m.video_mask.end(), video.begin() + at);
    std::copy(m.audio_mask.begin(), m.audio_mask.end(), audio.begin() + at);
    batch.image_grids.insert(batch.image_grids.end(), m.image_grids.begin(), m.image_grids.end());
    batch.video_grids.insert(batch.video_grids.end(), m.video_grids.begin(), m.video_grids.end());
    batch.audio_feature_lengths.insert(batch.audio_feature_lengths.end(), m.audio_lengths.begin(),
                                       m.audio_lengths.end());
    pixel_rows += m.pixel_rows;
    video_pixel_rows += m.video_pixel_rows;
    feature_rows += m.feature_rows;
    at += m.length;
  }
  batch.pixel_values = concat_media(samples, "pixel_values", pixel_rows, widths.pixels);
  batch.pixel_values_videos = concat_media(samples, "pixel_values_videos", video_pixel_rows, widths.video_pixels);
  if (options.has_audio)
    batch.input_features = concat_media(samples, "input_features", feature_rows, widths.features);

  batch.text = slice_for_sp_rank(row, options.sp_size, options.sp_rank);
  const int64_t local = total / options.sp_size;
  const int64_t begin = batch.text.sp_offset;
  batch.text.position_ids = Tensor::empty({3, local}, options.position_dtype);
  const size_t element = dtype_size(options.position_dtype);
  for (int64_t st = 0; st < 3; ++st)
    std::memcpy(static_cast<char*>(batch.text.position_ids.raw_data()) + static_cast<size_t>(st * local) * element,
                static_cast<const char*>(positions.raw_data()) + static_cast<size_t>(st * total + begin) * element,
                static_cast<size_t>(local) * element);
  batch.image_mask = slice_mask(image, begin, local, batch.image_row_begin);
  batch.video_mask = slice_mask(video, begin, local, batch.video_row_begin);
  batch.audio_mask = slice_mask(audio, begin, local, batch.audio_row_begin);
  return batch;
}

}  // namespace veomni
