// The multimodal body: encoders -> media rows of the input embeddings -> text body with deepstack, and back; the
// multimodal LM: that body with the LM head.
#include "model/thinker/multimodal_lm.h"

#include <memory>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/audio/audio_layout.h"
#include "model/layers/lora_adapter.h"
#include "model/thinker/media_rows.h"
#include "model/thinker/sp_rows.h"
#include "model/vision/vision_grid.h"

namespace veomni {

namespace {

ModelOptions text_options(const ThinkerConfig& config, const MultimodalOptions& options) {
  ModelOptions lm = options.lm;
  lm.param_prefix = config.text_prefix;
  lm.lm_head_name = config.lm_head_name;
  lm.mrope_section = config.mrope_section;
  return lm;
}

// Rows [begin, begin + rows) of `out` take `part` (both [*, D] on one device).
void copy_rows_into(Tensor& out, int64_t begin, const Tensor& part) {
  if (part.numel() == 0) return;
  Tensor target = out.slice(begin, begin + part.dim(0));
  target.copy_from(part);
}

// Images then videos as one tower input: every grid is encoded independently, so one call equals two.
Tensor concat_patches(const Tensor& images, const Tensor& videos, int64_t patch_dim, Device device) {
  const int64_t ni = images.defined() ? images.dim(0) : 0;
  const int64_t nv = videos.defined() ? videos.dim(0) : 0;
  if (nv == 0) return images;
  if (ni == 0) return videos;
  VEOMNI_INPUT_CHECK(images.ndim() == 2 && videos.ndim() == 2 && images.dim(1) == patch_dim &&
                         videos.dim(1) == patch_dim && images.dtype() == videos.dtype(),
                     "batch pixel_values {} and pixel_values_videos {} must both be [*, {}] of one dtype",
                     images.describe(), videos.describe(), patch_dim);
  Tensor both = Tensor::empty({ni + nv, patch_dim}, images.dtype(), device);
  copy_rows_into(both, 0, images.to(device));
  copy_rows_into(both, ni, videos.to(device));
  return both;
}

void check_disjoint(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const char* a_name,
                    const char* b_name) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    VEOMNI_INPUT_CHECK(a[i] != b[j], "batch {} and {} both mark token {}", a_name, b_name, a[i]);
    if (a[i] < b[j]) ++i;
    else ++j;
  }
}

// Output rows [begin, begin + count) of one encoder output, as row indices offset by `base`.
void append_sources(std::vector<int64_t>& sources, int64_t base, int64_t begin, int64_t count) {
  for (int64_t i = 0; i < count; ++i) sources.push_back(base + begin + i);
}

// A batch's mask marks `marked` of an encoder's `rows` outputs starting at `begin`: all of them for a whole row,
// a contiguous run for an SP slice.
void check_mask_rows(int64_t marked, int64_t begin, int64_t rows, bool whole_row, const char* mask,
                     const char* source) {
  if (whole_row) {
    VEOMNI_INPUT_CHECK(begin == 0 && marked == rows, "batch {} marks {} tokens but {} give {}", mask, marked, source,
                       rows);
    return;
  }
  VEOMNI_INPUT_CHECK(begin >= 0 && begin + marked <= rows,
                     "batch {} marks {} tokens from output row {} but {} give only {}", mask, marked, begin, source,
                     rows);
}

}  // namespace

// What the multimodal body's backward needs: the text body's and the encoders' saved values and where the media
// rows went.
struct MultimodalBodySaved final : BodySaved {
  std::unique_ptr<BodySaved> text;
  VisionTower::Saved vision;  // empty when the tower is frozen
  AudioEncoder::Saved audio;  // empty without an audio encoder or when it is frozen
  Tensor input_ids;
  Tensor visual_positions, audio_positions, media_positions;  // i64 on the device: rows of this batch's tokens
  Tensor visual_sources, audio_sources;  // i64: the encoder output row each of those rows takes
  int64_t visual_rows = 0;               // rows of the vision tower's output (whole micro-batch)
  // The tower ran split over the SP group (its output gathered): those hooks, and the gathered rows (padding
  // included). Null / 0 otherwise.
  SequenceHooks* vision_split = nullptr;
  int64_t visual_rows_padded = 0;
  bool vision_ran = false, audio_ran = false;
  // The encoder kept its activations for a backward: it has parameters that train (not frozen by freeze_vit /
  // freeze_audio_tower, nor wholly by LoRA).
  bool vision_trains = false, audio_trains = false;
};

struct MultimodalBody::Impl {
  ThinkerConfig config;
  MultimodalOptions options;
  ParamStore store;
  std::unique_ptr<VisionTower> vision;
  std::unique_ptr<AudioEncoder> audio;
  std::unique_ptr<TextBody> lm;

  Impl(const ThinkerConfig& c, const MultimodalOptions& o);
  BodyOutput forward(const MultimodalBatch& batch, bool save);
  // The LM's input embeddings: token embeddings with the encoders' outputs written over the media rows; where they
  // went into saved, the deepstack features of this batch's visual rows into *deepstack.
  Tensor embed(const MultimodalBatch& batch, bool save, MultimodalBodySaved& saved, std::vector<Tensor>& deepstack);
  void backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale);
  // The merged visual rows of this batch; their deepstack features into *deepstack, the tower's saved values into
  // saved.vision.
  Tensor encode_visual(const MultimodalBatch& batch, int64_t image_rows, int64_t video_rows, bool save,
                       MultimodalBodySaved& saved, std::vector<Tensor>& deepstack);
  // Whether an encoder has a parameter that trains: a frozen one runs without a backward.
  bool vision_trains();
  bool audio_trains();
};

bool MultimodalBody::Impl::vision_trains() {
  if (options.freeze_vit) return false;
  for (size_t index : vision->group_indices())
    for (const Parameter* p : store.groups()[index].params)
      if (p->trainable) return true;
  return false;
}

bool MultimodalBody::Impl::audio_trains() {
  if (!audio || options.freeze_audio_tower) return false;
  for (const Parameter* p : audio->parameters())
    if (p->trainable) return true;
  return false;
}

MultimodalBody::Impl::Impl(const ThinkerConfig& c, const MultimodalOptions& o) : config(c), options(o) {
  if (options.lm.lora_config.enabled()) store.set_lora(std::make_shared<LoraRegistry>(options.lm.lora_config));
  VisionOptions vision_options;
  vision_options.device = options.lm.device;
  vision_options.compute_dtype = options.lm.compute_dtype;
  vision = std::make_unique<VisionTower>(store, config.vision, vision_options);
  if (options.lm.materialize)
    for (size_t index : vision->group_indices())
      for (Parameter* p : store.groups()[index].params)
        p->value = Tensor::zeros(p->local_shape(), options.lm.compute_dtype, options.lm.device);
  if (config.has_audio) {
    AudioEncoderOptions audio_options;
    audio_options.device = options.lm.device;
    audio_options.compute_dtype = options.lm.compute_dtype;
    audio_options.materialize = options.lm.materialize;
    audio = std::make_unique<AudioEncoder>(store, config.audio, audio_options);
  }
  lm = std::make_unique<TextBody>(config.text, text_options(config, options), store);
}

// The merged embeddings of the images, then of the videos; the deepstack features likewise.
Tensor MultimodalBody::Impl::encode_visual(const MultimodalBatch& batch, int64_t image_rows, int64_t video_rows,
                                           bool save, MultimodalBodySaved& saved, std::vector<Tensor>& deepstack) {
  std::vector<VisionGrid> grids = batch.image_grids;
  grids.insert(grids.end(), batch.video_grids.begin(), batch.video_grids.end());
  VEOMNI_INPUT_CHECK(batch.image_grids.empty() || batch.pixel_values.defined(),
                     "batch has {} image grids but no pixel_values", batch.image_grids.size());
  VEOMNI_INPUT_CHECK(batch.video_grids.empty() || batch.pixel_values_videos.defined(),
                     "batch has {} video grids but no pixel_values_videos", batch.video_grids.size());
  Tensor pixels = concat_patches(batch.image_grids.empty() ? Tensor() : batch.pixel_values,
                                 batch.video_grids.empty() ? Tensor() : batch.pixel_values_videos,
                                 config.vision.patch_dim(), options.lm.device);
  SequenceHooks* sequence = options.lm.hooks.sequence;
  // The tower's heads must split over the group too; otherwise every rank encodes all patches (exact as well).
  const bool split = options.vision_sequence_parallel && sequence && sequence->sp_size() > 1 && !grids.empty() &&
                     config.vision.num_heads % sequence->sp_size() == 0;
  const int64_t local = batch.text.input_ids.numel();
  const VisionSpSlice slice{sequence, local > 0 ? batch.text.sp_offset / local : 0};
  VisionTower::Output out = vision->forward(pixels, grids, save, split ? &slice : nullptr);
  saved.vision = std::move(out.saved);
  if (split) {
    // Gather the slices (the padding's rows come last, past every row the sources name).
    saved.vision_split = sequence;
    out.merged = sp_gather_rows(*sequence, out.merged);
    for (Tensor& feature : out.deepstack) feature = sp_gather_rows(*sequence, feature);
    saved.visual_rows_padded = out.merged.dim(0);
  }
  VEOMNI_CHECK(split ? out.merged.dim(0) >= image_rows + video_rows : out.merged.dim(0) == image_rows + video_rows,
               "vision tower gave {} rows for {} + {} visual tokens", out.merged.dim(0), image_rows, video_rows);
  deepstack.clear();
  for (const Tensor& feature : out.deepstack) deepstack.push_back(gather_rows(feature, saved.visual_sources));
  return gather_rows(out.merged, saved.visual_sources);
}

Tensor MultimodalBody::Impl::embed(const MultimodalBatch& batch, bool save, MultimodalBodySaved& saved,
                                   std::vector<Tensor>& deepstack) {
  const Batch& text = batch.text;
  VEOMNI_INPUT_CHECK(text.input_ids.defined() && text.input_ids.ndim() == 1,
                     "batch input_ids must be an i64 [S] tensor, got {}", text.input_ids.describe());
  const int64_t s = text.input_ids.numel();
  const Device device = options.lm.device;

  const std::vector<int64_t> image_pos = mask_positions(batch.image_mask, s, "image_mask");
  const std::vector<int64_t> video_pos = mask_positions(batch.video_mask, s, "video_mask");
  const std::vector<int64_t> audio_pos = mask_positions(batch.audio_mask, s, "audio_mask");
  check_disjoint(image_pos, video_pos, "image_mask", "video_mask");
  check_disjoint(image_pos, audio_pos, "image_mask", "audio_mask");
  check_disjoint(video_pos, audio_pos, "video_mask", "audio_mask");

  const int64_t merge = config.vision.merge_unit();
  const int64_t image_rows = total_patches(batch.image_grids) / merge;
  const int64_t video_rows = total_patches(batch.video_grids) / merge;
  const bool whole = batch.whole_row();
  const auto n_image = static_cast<int64_t>(image_pos.size());
  const auto n_video = static_cast<int64_t>(video_pos.size());
  const auto n_audio = static_cast<int64_t>(audio_pos.size());
  check_mask_rows(n_image, batch.image_row_begin, image_rows, whole, "image_mask", "the image grids' merged patches");
  check_mask_rows(n_video, batch.video_row_begin, video_rows, whole, "video_mask", "the video grids' merged patches");
  int64_t audio_rows = 0;
  if (!batch.audio_feature_lengths.empty()) {
    VEOMNI_INPUT_CHECK(audio != nullptr, "batch has audio features but model type {} has no audio encoder",
                       config.model_type);
    audio_rows = audio_layout(batch.audio_feature_lengths, config.audio).num_tokens();
  }
  check_mask_rows(n_audio, batch.audio_row_begin, audio_rows, whole, "audio_mask", "the audio features' tokens");

  std::vector<int64_t> visual = image_pos;
  visual.insert(visual.end(), video_pos.begin(), video_pos.end());
  std::vector<int64_t> media = visual;
  media.insert(media.end(), audio_pos.begin(), audio_pos.end());
  std::vector<int64_t> visual_src, audio_src;
  append_sources(visual_src, 0, batch.image_row_begin, n_image);
  append_sources(visual_src, image_rows, batch.video_row_begin, n_video);
  append_sources(audio_src, 0, batch.audio_row_begin, n_audio);
  saved.visual_positions = positions_tensor(visual, device);
  saved.audio_positions = positions_tensor(audio_pos, device);
  saved.media_positions = positions_tensor(media, device);
  saved.visual_sources = positions_tensor(visual_src, device);
  saved.audio_sources = positions_tensor(audio_src, device);
  saved.visual_rows = image_rows + video_rows;

  Tensor ids = text.input_ids.to(device);
  Tensor h = lm->embed_tokens(ids);
  zero_rows(h, saved.media_positions);
  // Every encoder runs on every micro-batch, with or without media (an empty pass joins the parameter groups'
  // collectives with no work): ranks stay in step under FSDP whatever their data holds.
  saved.vision_ran = true;
  saved.vision_trains = save && vision_trains();
  add_rows(h, saved.visual_positions,
           encode_visual(batch, image_rows, video_rows, saved.vision_trains, saved, deepstack));
  if (audio) {
    saved.audio_ran = true;
    saved.audio_trains = save && audio_trains();
    const Tensor features = batch.audio_feature_lengths.empty()
                                ? Tensor::empty({0, config.audio.num_mel_bins}, DType::F32)
                                : batch.input_features;
    AudioEncoder::Output out = audio->forward(features, batch.audio_feature_lengths,
                                              saved.audio_trains);
    saved.audio = std::move(out.saved);
    add_rows(h, saved.audio_positions, gather_rows(out.out, saved.audio_sources));
  }
  saved.input_ids = ids;
  return h;
}

BodyOutput MultimodalBody::Impl::forward(const MultimodalBatch& batch, bool save) {
  auto saved = std::make_unique<MultimodalBodySaved>();
  std::vector<Tensor> deepstack;  // the features added after the first layers (this batch's visual rows)
  const Tensor h = embed(batch, save, *saved, deepstack);
  const Tensor& visual_positions = saved->visual_positions;
  auto add_deepstack = [&](size_t layer, Tensor& hidden) {
    if (layer < deepstack.size()) add_rows(hidden, visual_positions, deepstack[layer]);
  };
  BodyOutput out = lm->forward_embeds(batch.text, h, add_deepstack, save);
  deepstack.clear();  // the features are inputs of additions only: backward needs none of them
  if (save) {
    saved->text = std::move(out.saved);
    out.saved = std::move(saved);
  }
  return out;
}

void MultimodalBody::Impl::backward(std::unique_ptr<BodySaved> saved_values, Tensor d_hidden, float aux_grad_scale) {
  auto* saved_ptr = dynamic_cast<MultimodalBodySaved*>(saved_values.get());
  VEOMNI_CHECK(saved_ptr && saved_ptr->text, "multimodal body backward without the saved values of its forward");
  MultimodalBodySaved& saved = *saved_ptr;
  const bool vision_trains = saved.vision_ran && saved.vision_trains;
  const bool audio_trains = saved.audio_ran && saved.audio_trains;
  std::vector<Tensor> d_deepstack;  // the deepstack features' gradients
  d_deepstack.assign(vision_trains ? static_cast<size_t>(vision->num_deepstack_features()) : 0, Tensor());
  // Gradients of the encoders' whole outputs: this batch's rows at their source rows, zero elsewhere (the other
  // SP ranks' rows).
  auto encoder_grad = [](const Tensor& d_rows, const Tensor& sources, int64_t rows) {
    Tensor full = Tensor::zeros({rows, d_rows.dim(1)}, d_rows.dtype(), d_rows.device());
    add_rows(full, sources, d_rows);
    return full;
  };
  const int64_t tower_rows = saved.vision_split ? saved.visual_rows_padded : saved.visual_rows;
  auto collect_deepstack = [&](size_t layer, Tensor& dh) {
    if (layer < d_deepstack.size() && saved.visual_positions.numel() > 0)
      d_deepstack[layer] = encoder_grad(gather_rows(dh, saved.visual_positions), saved.visual_sources, tower_rows);
  };
  Tensor d_embeds =
      lm->backward_embeds(std::move(saved.text), std::move(d_hidden), aux_grad_scale, collect_deepstack);
  Tensor d_visual = vision_trains ? encoder_grad(gather_rows(d_embeds, saved.visual_positions), saved.visual_sources,
                                                 tower_rows)
                                  : Tensor();
  Tensor d_audio = audio_trains ? encoder_grad(gather_rows(d_embeds, saved.audio_positions), saved.audio_sources,
                                               saved.audio.layout.num_tokens())
                                : Tensor();
  // The media rows were overwritten: the token embeddings there did not reach the loss.
  zero_rows(d_embeds, saved.media_positions);
  lm->embed_tokens_backward(saved.input_ids, d_embeds);
  d_embeds = Tensor();
  if (vision_trains && saved.vision_split) {
    // Every rank of the group reduce-scatters each output's gradient (zeros where it has no visual rows) back to
    // its slice, in the same order.
    d_visual = sp_reduce_scatter_rows(*saved.vision_split, d_visual);
    for (Tensor& d : d_deepstack) {
      if (!d.defined()) d = Tensor::zeros({tower_rows, d_visual.dim(1)}, d_visual.dtype(), d_visual.device());
      d = sp_reduce_scatter_rows(*saved.vision_split, d);
    }
  }
  if (vision_trains) vision->backward(std::move(saved.vision), d_visual, d_deepstack);
  if (audio_trains) audio->backward(std::move(saved.audio), d_audio);
  saved_values.reset();
}

MultimodalBody::MultimodalBody(const ThinkerConfig& config, const MultimodalOptions& options)
    : impl_(std::make_unique<Impl>(config, options)) {}

MultimodalBody::~MultimodalBody() = default;

const ThinkerConfig& MultimodalBody::config() const { return impl_->config; }
TextBody& MultimodalBody::language_model() { return *impl_->lm; }
VisionTower& MultimodalBody::vision() { return *impl_->vision; }
AudioEncoder* MultimodalBody::audio() { return impl_->audio.get(); }
ParamStore& MultimodalBody::params() { return impl_->store; }
const ModelConfig& MultimodalBody::text_config() const { return impl_->config.text; }
HeadSite MultimodalBody::head_site() { return impl_->lm->head_site(); }
SequenceHooks* MultimodalBody::sequence_hooks() const { return impl_->options.lm.hooks.sequence; }

void MultimodalBody::init_weights(uint64_t seed) {
  impl_->vision->init_weights(seed);
  if (impl_->audio) impl_->audio->init_weights(seed);
  impl_->lm->init_weights(seed);
}

void MultimodalBody::set_param_hooks(ParamHooks* hooks) {
  impl_->vision->set_param_hooks(hooks);
  if (impl_->audio) impl_->audio->set_param_hooks(hooks);
  impl_->lm->set_param_hooks(hooks);
}

BodyOutput MultimodalBody::forward(const MultimodalBatch& batch, bool save) { return impl_->forward(batch, save); }

MultimodalBody::InputEmbeds MultimodalBody::input_embeds(const MultimodalBatch& batch) {
  MultimodalBodySaved saved;
  auto deepstack = std::make_shared<std::vector<Tensor>>();
  InputEmbeds out;
  out.embeds = impl_->embed(batch, false, saved, *deepstack);
  out.after_layer = [deepstack, positions = saved.visual_positions](size_t layer, Tensor& h) {
    if (layer < deepstack->size()) add_rows(h, positions, (*deepstack)[layer]);
  };
  return out;
}

void MultimodalBody::backward(std::unique_ptr<BodySaved> saved, Tensor d_hidden, float aux_grad_scale) {
  impl_->backward(std::move(saved), std::move(d_hidden), aux_grad_scale);
}

MultimodalLM::MultimodalLM(const ThinkerConfig& config, const MultimodalOptions& options)
    : body_(config, options), head_(body_.head_site(), config.text, config.lm_head_name) {
  head_.set_param_hooks(options.lm.hooks.params);  // the head group runs under the body's construction-time hooks too
}

MultimodalLM::~MultimodalLM() = default;

void MultimodalLM::set_param_hooks(ParamHooks* hooks) {
  body_.set_param_hooks(hooks);
  head_.set_param_hooks(hooks);
}

SftPass MultimodalLM::forward(const MultimodalBatch& batch, bool save, Tensor* logits_out) {
  return sft_forward(body_, head_, batch, save, logits_out);
}

void MultimodalLM::backward(SftPass&& pass, float ce_grad_scale, float aux_grad_scale) {
  sft_backward(body_, head_, std::move(pass), ce_grad_scale, aux_grad_scale);
}

}  // namespace veomni
