// Qwen3-VL and Qwen3-Omni thinker get_rope_index as transformers 5.17 computes them, for one sample.
#include "data/mrope_positions.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "core/error.h"
#include "data/audio_length.h"

namespace veomni {

namespace {

// Indices (into input_ids) of the tokens that attend; transformers computes positions over these only.
std::vector<int64_t> attended_indices(const std::vector<int64_t>& input_ids, const std::vector<int64_t>& mask,
                                      const char* model) {
  VEOMNI_INPUT_CHECK(!input_ids.empty(), "{} positions: input_ids is empty", model);
  VEOMNI_INPUT_CHECK(mask.empty() || mask.size() == input_ids.size(),
                     "{} positions: attention_mask has {} entries but input_ids has {}", model, mask.size(),
                     input_ids.size());
  std::vector<int64_t> kept;
  kept.reserve(input_ids.size());
  for (size_t i = 0; i < input_ids.size(); ++i) {
    if (!mask.empty()) {
      VEOMNI_INPUT_CHECK(mask[i] == 0 || mask[i] == 1, "{} positions: attention_mask[{}] is {} (expected 0 or 1)",
                         model, i, mask[i]);
      if (mask[i] == 0) continue;
    }
    kept.push_back(static_cast<int64_t>(i));
  }
  return kept;
}

void check_grids(const std::vector<VisionGrid>& grids, int64_t merge, const char* what, const char* model) {
  VEOMNI_INPUT_CHECK(merge >= 1, "{} positions: spatial_merge_size is {} (must be >= 1)", model, merge);
  for (size_t i = 0; i < grids.size(); ++i) {
    const VisionGrid& g = grids[i];
    VEOMNI_INPUT_CHECK(g.t >= 1 && g.h >= merge && g.w >= merge && g.h % merge == 0 && g.w % merge == 0,
                       "{} positions: {} {} has grid [{}, {}, {}]; t must be >= 1 and h, w positive multiples of "
                       "the spatial merge size {}",
                       model, what, i, g.t, g.h, g.w, merge);
  }
}

// Scatters row-major (3, n) positions of the attended tokens into a (3, L) array whose other entries are 0.
template <typename T>
std::vector<T> scatter_attended(const std::array<std::vector<T>, 3>& rows, const std::vector<int64_t>& kept,
                                size_t length) {
  std::vector<T> out(3 * length, T(0));
  for (size_t r = 0; r < 3; ++r)
    for (size_t i = 0; i < kept.size(); ++i) out[r * length + static_cast<size_t>(kept[i])] = rows[r][i];
  return out;
}

// ---- Qwen3-VL ----------------------------------------------------------------------------------------------

enum class VlKind { Text, Image, Video };

// A maximal run of attended tokens of one kind, [begin, end) in attended order (itertools.groupby in transformers).
struct VlRun {
  VlKind kind;
  size_t begin;
  size_t end;
};

std::vector<VlRun> vl_runs(const std::vector<int64_t>& input_ids, const std::vector<int64_t>& kept,
                           const Qwen3VlRopeOptions& options) {
  auto kind_of = [&](int64_t id) {
    if (id == options.image_token_id) return VlKind::Image;
    if (id == options.video_token_id) return VlKind::Video;
    return VlKind::Text;
  };
  std::vector<VlRun> runs;
  for (size_t i = 0; i < kept.size(); ++i) {
    const VlKind kind = kind_of(input_ids[static_cast<size_t>(kept[i])]);
    if (runs.empty() || runs.back().kind != kind) runs.push_back({kind, i, i});
    runs.back().end = i + 1;
  }
  return runs;
}

// Every frame of every video as its own t = 1 grid (the text separates frames by timestamps), with its names.
struct VlFrame {
  VisionGrid grid;
  std::string name;
};

std::vector<VlFrame> video_frames(const std::vector<VisionGrid>& videos) {
  std::vector<VlFrame> frames;
  for (size_t v = 0; v < videos.size(); ++v)
    for (int64_t f = 0; f < videos[v].t; ++f)
      frames.push_back({{1, videos[v].h, videos[v].w}, fmt::format("video {} frame {}", v, f)});
  return frames;
}

MropePositions<int64_t> vl_positions(const std::array<std::vector<int64_t>, 3>& rows,
                                     const std::vector<int64_t>& kept, size_t length) {
  int64_t max_position = std::numeric_limits<int64_t>::min();
  for (const auto& row : rows)
    for (int64_t v : row) max_position = std::max(max_position, v);
  MropePositions<int64_t> out;
  out.position_ids = scatter_attended(rows, kept, length);
  out.rope_delta = max_position + 1 - static_cast<int64_t>(kept.size());
  return out;
}

}  // namespace

MropePositions<int64_t> qwen3_vl_rope_index(const std::vector<int64_t>& input_ids, const Qwen3VlMedia& media,
                                            const Qwen3VlRopeOptions& options,
                                            const std::vector<int64_t>& attention_mask) {
  constexpr const char* kModel = "qwen3_vl";
  const std::vector<int64_t> kept = attended_indices(input_ids, attention_mask, kModel);
  VEOMNI_INPUT_CHECK(!kept.empty(), "{} positions: no token attends (attention_mask is all 0)", kModel);
  const int64_t merge = options.spatial_merge_size;
  check_grids(media.images, merge, "image", kModel);
  check_grids(media.videos, merge, "video", kModel);
  std::vector<VlFrame> images;
  for (size_t i = 0; i < media.images.size(); ++i) images.push_back({media.images[i], fmt::format("image {}", i)});
  const std::vector<VlFrame> frames = video_frames(media.videos);

  std::array<std::vector<int64_t>, 3> rows;
  size_t next_image = 0, next_frame = 0;
  int64_t current = 0;
  for (const VlRun& run : vl_runs(input_ids, kept, options)) {
    const int64_t run_length = static_cast<int64_t>(run.end - run.begin);
    const int64_t first_token = kept[run.begin];
    if (run.kind == VlKind::Text) {
      for (int64_t i = 0; i < run_length; ++i)
        for (auto& row : rows) row.push_back(current + i);
      current += run_length;
      continue;
    }
    const bool is_image = run.kind == VlKind::Image;
    const std::vector<VlFrame>& grids = is_image ? images : frames;
    size_t& next = is_image ? next_image : next_frame;
    VEOMNI_INPUT_CHECK(next < grids.size(),
                       "{} positions: the {} tokens at input position {} have no grid left: the text holds more {} "
                       "runs than the {} {} given",
                       kModel, is_image ? "image" : "video", first_token, is_image ? "image" : "video frame",
                       grids.size(), is_image ? "image grids" : "video frames");
    const VlFrame& frame = grids[next++];
    const int64_t gh = frame.grid.h / merge, gw = frame.grid.w / merge;
    VEOMNI_INPUT_CHECK(run_length == frame.grid.t * gh * gw,
                       "{} positions: {} tokens in a row at input position {} but {} (grid [{}, {}, {}]) needs {}",
                       kModel, run_length, first_token, frame.name, frame.grid.t, frame.grid.h, frame.grid.w,
                       frame.grid.t * gh * gw);
    for (int64_t t = 0; t < frame.grid.t; ++t)
      for (int64_t y = 0; y < gh; ++y)
        for (int64_t x = 0; x < gw; ++x) {
          rows[0].push_back(current + t);
          rows[1].push_back(current + y);
          rows[2].push_back(current + x);
        }
    current += std::max(gh, gw);
  }
  VEOMNI_INPUT_CHECK(next_image == images.size() && next_frame == frames.size(),
                     "{} positions: the text holds {} image and {} video-frame token runs but {} image grids and {} "
                     "video frames were given",
                     kModel, next_image, next_frame, images.size(), frames.size());
  return vl_positions(rows, kept, input_ids.size());
}

namespace {

// ---- Qwen3-Omni ----------------------------------------------------------------------------------------------

constexpr const char* kOmni = "qwen3_omni";

// Position columns (t, h, w) in float32.
struct Columns {
  std::vector<float> t, h, w;
  size_t size() const { return t.size(); }
};

// transformers' llm_pos_ids_list: columns appended chunk by chunk. The next block starts at the last chunk's
// max + 1 (not the overall max), so the chunking is kept exactly.
class FloatChunks {
 public:
  float next_start() const { return chunks_ == 0 ? 0.0f : last_max_ + 1.0f; }
  size_t size() const { return rows_[0].size(); }
  const std::array<std::vector<float>, 3>& rows() const { return rows_; }
  float overall_max() const { return overall_max_; }

  // arange(n) + start on all three rows.
  void arange(int64_t n, float start) {
    VEOMNI_CHECK(n >= 1, "empty position chunk");
    begin_chunk();
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(i) + start;
      push(v, v, v);
    }
  }
  // Columns [begin, end) of `columns` as one chunk.
  void columns(const Columns& c, size_t begin, size_t end) {
    VEOMNI_CHECK(begin < end && end <= c.size(), "bad column range [{}, {}) of {}", begin, end, c.size());
    begin_chunk();
    for (size_t i = begin; i < end; ++i) push(c.t[i], c.h[i], c.w[i]);
  }

 private:
  void begin_chunk() {
    ++chunks_;
    last_max_ = -std::numeric_limits<float>::infinity();
  }
  void push(float t, float h, float w) {
    rows_[0].push_back(t);
    rows_[1].push_back(h);
    rows_[2].push_back(w);
    last_max_ = std::max({last_max_, t, h, w});
    overall_max_ = std::max({overall_max_, t, h, w});
  }

  std::array<std::vector<float>, 3> rows_;
  int64_t chunks_ = 0;
  float last_max_ = 0.0f;
  float overall_max_ = -std::numeric_limits<float>::infinity();
};

// get_llm_pos_ids_for_vision: t from t_index, h and w from the merged grid, all offset by start.
Columns vision_columns(float start, const std::vector<float>& t_index, int64_t gh, int64_t gw) {
  Columns c;
  for (float t : t_index)
    for (int64_t y = 0; y < gh; ++y)
      for (int64_t x = 0; x < gw; ++x) {
        c.t.push_back(t + start);
        c.h.push_back(static_cast<float>(y) + start);
        c.w.push_back(static_cast<float>(x) + start);
      }
  return c;
}

Columns arange_columns(int64_t n, float start) {
  Columns c;
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i) + start;
    c.t.push_back(v);
    c.h.push_back(v);
    c.w.push_back(v);
  }
  return c;
}

// Walks the <|vision_start|> / <|audio_start|> blocks of the attended tokens like the transformers loop.
class OmniBlocks {
 public:
  OmniBlocks(const std::vector<int64_t>& input_ids, const std::vector<int64_t>& kept, const Qwen3OmniMedia& media,
             const Qwen3OmniRopeOptions& options)
      : kept_(kept), media_(media), options_(options) {
    tokens_.reserve(kept.size());
    for (int64_t i : kept) tokens_.push_back(input_ids[static_cast<size_t>(i)]);
  }

  FloatChunks build() {
    count_blocks();
    const int64_t n = static_cast<int64_t>(tokens_.size());
    const bool has_vision_tokens = contains(options_.image_token_id) || contains(options_.video_token_id);
    const bool has_audio_tokens = contains(options_.audio_token_id);
    for (int64_t block = 0; block < blocks_; ++block) {
      float start_position = chunks_.next_start();
      const bool seek_vision = has_vision_tokens && (remain_videos_ > 0 || remain_images_ > 0);
      const bool seek_audio = has_audio_tokens && remain_audios_ > 0;
      VEOMNI_INPUT_CHECK(seek_vision || seek_audio,
                         "{} positions: block {} of {} has no image/video/audio tokens left to start it", kOmni,
                         block, blocks_);
      const int64_t vision_at = seek_vision ? find(options_.vision_start_token_id, "<|vision_start|>") : n + 1;
      const int64_t audio_at = seek_audio ? find(options_.audio_start_token_id, "<|audio_start|>") : n + 1;
      const int64_t block_at = std::min(vision_at, audio_at);
      const int64_t text_length = block_at - st_;
      if (text_length != 0) {
        chunks_.arange(text_length, start_position);
        start_position += static_cast<float>(text_length);
      }
      const bool audio_in_video = block_at == vision_at && vision_at + 1 == audio_at;
      const int64_t edge = audio_in_video ? 2 : 1;
      chunks_.arange(edge, start_position);
      start_position += static_cast<float>(edge);
      const int64_t content_at = block_at + edge;
      int64_t content;
      if (block_at == audio_at) {
        content = audio_block(start_position, content_at);
      } else if (tokens_[static_cast<size_t>(vision_at + 1)] == options_.image_token_id) {
        content = image_block(start_position, content_at);
      } else if (tokens_[static_cast<size_t>(vision_at + 1)] == options_.video_token_id) {
        content = video_block(start_position, content_at);
      } else {
        VEOMNI_INPUT_CHECK(audio_in_video,
                           "{} positions: <|vision_start|> at input position {} is followed by token {}, not an "
                           "image, video or <|audio_start|> token",
                           kOmni, input_position(vision_at), tokens_[static_cast<size_t>(vision_at + 1)]);
        content = audio_in_video_block(start_position, content_at);
      }
      st_ += text_length + edge + content + edge;
      chunks_.arange(edge, chunks_.next_start());
    }
    if (st_ < n) chunks_.arange(n - st_, chunks_.next_start());
    check_all_used();
    return std::move(chunks_);
  }

 private:
  // Blocks as transformers counts them: images and videos by the token after <|vision_start|>, audio by
  // <|audio_start|> (audio-in-video blocks count as audio, and as videos when use_audio_in_video).
  void count_blocks() {
    int64_t images = 0, videos = 0, audios = 0;
    const int64_t video_marker = options_.use_audio_in_video ? options_.audio_start_token_id : options_.video_token_id;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i] == options_.audio_start_token_id) ++audios;
      if (tokens_[i] != options_.vision_start_token_id) continue;
      VEOMNI_INPUT_CHECK(i + 1 < tokens_.size(),
                         "{} positions: <|vision_start|> at input position {} is the last attended token", kOmni,
                         kept_[i]);
      images += tokens_[i + 1] == options_.image_token_id;
      videos += tokens_[i + 1] == video_marker;
    }
    remain_images_ = images;
    remain_videos_ = videos;
    remain_audios_ = audios;
    blocks_ = options_.use_audio_in_video ? images + audios : images + videos + audios;
  }

  bool contains(int64_t id) const { return std::find(tokens_.begin(), tokens_.end(), id) != tokens_.end(); }

  int64_t find(int64_t id, const char* name) const {
    VEOMNI_INPUT_CHECK(st_ < static_cast<int64_t>(tokens_.size()),
                       "{} positions: the text counts more blocks but ends before another {}", kOmni, name);
    const auto it = std::find(tokens_.begin() + st_, tokens_.end(), id);
    VEOMNI_INPUT_CHECK(it != tokens_.end(), "{} positions: the text counts more blocks but holds no {} after input "
                       "position {}", kOmni, name, input_position(st_));
    return it - tokens_.begin();
  }

  int64_t input_position(int64_t attended) const { return kept_[static_cast<size_t>(attended)]; }

  // Every token of [at, at + count) must be one of the two ids (the block's content tokens).
  void check_content(int64_t at, int64_t count, int64_t id, int64_t other_id, const std::string& what) const {
    const int64_t n = static_cast<int64_t>(tokens_.size());
    VEOMNI_INPUT_CHECK(at + count <= n, "{} positions: {} needs {} tokens from input position {} but the sample "
                       "ends first", kOmni, what, count, input_position(at));
    for (int64_t i = at; i < at + count; ++i) {
      const int64_t token = tokens_[static_cast<size_t>(i)];
      VEOMNI_INPUT_CHECK(token == id || token == other_id,
                         "{} positions: {} needs {} tokens from input position {} but input position {} holds {}",
                         kOmni, what, count, input_position(at), input_position(i), token);
    }
  }

  int64_t next_audio_tokens(const std::string& what) {
    VEOMNI_INPUT_CHECK(audio_index_ < media_.audio_feature_lengths.size(),
                       "{} positions: {} has no audio length left: the text holds more audio blocks than the {} "
                       "audio_feature_lengths given",
                       kOmni, what, media_.audio_feature_lengths.size());
    const int64_t frames = media_.audio_feature_lengths[audio_index_];
    const int64_t tokens = audio_output_length(frames);
    VEOMNI_INPUT_CHECK(tokens >= 1, "{} positions: audio {} has {} mel frames, which give no audio tokens", kOmni,
                       audio_index_, frames);
    ++audio_index_;
    --remain_audios_;
    return tokens;
  }

  const VisionGrid& next_grid(const std::vector<VisionGrid>& grids, size_t& index, const char* what) const {
    VEOMNI_INPUT_CHECK(index < grids.size(), "{} positions: the text holds more {} blocks than the {} {} grids given",
                       kOmni, what, grids.size(), what);
    return grids[index++];
  }

  int64_t audio_block(float start, int64_t content_at) {
    const std::string what = fmt::format("audio {}", audio_index_);
    const int64_t tokens = next_audio_tokens(what);
    check_content(content_at, tokens, options_.audio_token_id, options_.audio_token_id, what);
    chunks_.arange(tokens, start);
    return tokens;
  }

  int64_t vision_block(float start, int64_t content_at, const VisionGrid& grid, const std::vector<float>& t_index,
                       int64_t token_id, const std::string& what) {
    const int64_t merge = options_.spatial_merge_size;
    const int64_t tokens = grid.t * grid.h * grid.w / (merge * merge);
    check_content(content_at, tokens, token_id, token_id, what);
    const Columns columns = vision_columns(start, t_index, grid.h / merge, grid.w / merge);
    chunks_.columns(columns, 0, columns.size());
    return tokens;
  }

  // Image t: k * position_id_per_seconds (k < t).
  int64_t image_block(float start, int64_t content_at) {
    const std::string what = fmt::format("image {}", image_index_);
    const VisionGrid& grid = next_grid(media_.images, image_index_, "image");
    std::vector<float> t_index;
    for (int64_t k = 0; k < grid.t; ++k) t_index.push_back(static_cast<float>(k) * position_per_second());
    --remain_images_;
    return vision_block(start, content_at, grid, t_index, options_.image_token_id, what);
  }

  // Video t in float32 as transformers rounds it: (k * second_per_grid) * position_id_per_seconds.
  std::vector<float> video_t_index(const VisionGrid& grid, size_t video) const {
    const float second_per_grid = static_cast<float>(media_.video_second_per_grid[video]);
    std::vector<float> t_index;
    for (int64_t k = 0; k < grid.t; ++k)
      t_index.push_back((static_cast<float>(k) * second_per_grid) * position_per_second());
    return t_index;
  }

  int64_t video_block(float start, int64_t content_at) {
    const size_t video = video_index_;
    const VisionGrid& grid = next_grid(media_.videos, video_index_, "video");
    --remain_videos_;
    return vision_block(start, content_at, grid, video_t_index(grid, video), options_.video_token_id,
                        fmt::format("video {}", video));
  }

  // Video and audio positions from the same start, merged by temporal value (video first on ties).
  int64_t audio_in_video_block(float start, int64_t content_at) {
    const size_t video = video_index_;
    const std::string what = fmt::format("video {} with its audio", video);
    const int64_t audio_tokens = next_audio_tokens(what);
    const VisionGrid& grid = next_grid(media_.videos, video_index_, "video");
    --remain_videos_;
    const int64_t merge = options_.spatial_merge_size;
    const int64_t video_tokens = grid.t * grid.h * grid.w / (merge * merge);
    check_content(content_at, audio_tokens + video_tokens, options_.video_token_id, options_.audio_token_id, what);
    const Columns audio = arange_columns(audio_tokens, start);
    const Columns frames = vision_columns(start, video_t_index(grid, video), grid.h / merge, grid.w / merge);
    size_t v = 0, a = 0;
    while (v < frames.size() && a < audio.size()) {
      if (frames.t[v] <= audio.t[a]) {
        chunks_.columns(frames, v, v + 1);
        ++v;
      } else {
        chunks_.columns(audio, a, a + 1);
        ++a;
      }
    }
    if (v < frames.size()) chunks_.columns(frames, v, frames.size());
    if (a < audio.size()) chunks_.columns(audio, a, audio.size());
    return audio_tokens + video_tokens;
  }

  float position_per_second() const { return static_cast<float>(options_.position_id_per_seconds); }

  void check_all_used() const {
    VEOMNI_INPUT_CHECK(chunks_.size() == tokens_.size(),
                       "{} positions: the blocks cover {} tokens but {} attend; the media and the text disagree",
                       kOmni, chunks_.size(), tokens_.size());
    VEOMNI_INPUT_CHECK(image_index_ == media_.images.size() && video_index_ == media_.videos.size() &&
                           audio_index_ == media_.audio_feature_lengths.size(),
                       "{} positions: the text uses {} images, {} videos and {} audios but {}, {} and {} were given",
                       kOmni, image_index_, video_index_, audio_index_, media_.images.size(), media_.videos.size(),
                       media_.audio_feature_lengths.size());
  }

  const std::vector<int64_t>& kept_;
  const Qwen3OmniMedia& media_;
  const Qwen3OmniRopeOptions& options_;
  std::vector<int64_t> tokens_;
  FloatChunks chunks_;
  int64_t st_ = 0;
  int64_t blocks_ = 0;
  int64_t remain_images_ = 0, remain_videos_ = 0, remain_audios_ = 0;
  size_t image_index_ = 0, video_index_ = 0, audio_index_ = 0;
};

// Without image and video grids transformers takes 1-D positions: cumsum(mask) - 1, masked tokens set to 1.
MropePositions<float> omni_text_positions(const std::vector<int64_t>& input_ids,
                                          const std::vector<int64_t>& attention_mask) {
  const size_t length = input_ids.size();
  MropePositions<float> out;
  out.position_ids.assign(3 * length, 0.0f);
  float cumulative = 0.0f, max_position = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < length; ++i) {
    const bool attends = attention_mask.empty() || attention_mask[i] == 1;
    cumulative += attends ? 1.0f : 0.0f;
    const float position = attends ? cumulative - 1.0f : 1.0f;
    for (size_t r = 0; r < 3; ++r) out.position_ids[r * length + i] = position;
    max_position = std::max(max_position, position);
  }
  out.rope_delta = (max_position + 1.0f) - cumulative;
  return out;
}

}  // namespace

MropePositions<float> qwen3_omni_rope_index(const std::vector<int64_t>& input_ids, const Qwen3OmniMedia& media,
                                            const Qwen3OmniRopeOptions& options,
                                            const std::vector<int64_t>& attention_mask) {
  const std::vector<int64_t> kept = attended_indices(input_ids, attention_mask, kOmni);
  if (media.images.empty() && media.videos.empty()) return omni_text_positions(input_ids, attention_mask);
  VEOMNI_INPUT_CHECK(!kept.empty(), "{} positions: no token attends (attention_mask is all 0)", kOmni);
  check_grids(media.images, options.spatial_merge_size, "image", kOmni);
  check_grids(media.videos, options.spatial_merge_size, "video", kOmni);
  VEOMNI_INPUT_CHECK(media.video_second_per_grid.size() == media.videos.size(),
                     "{} positions: {} videos but {} video_second_per_grid values", kOmni, media.videos.size(),
                     media.video_second_per_grid.size());
  const FloatChunks chunks = OmniBlocks(input_ids, kept, media, options).build();
  MropePositions<float> out;
  out.position_ids = scatter_attended(chunks.rows(), kept, input_ids.size());
  out.rope_delta = (chunks.overall_max() + 1.0f) - static_cast<float>(kept.size());
  return out;
}

}  // namespace veomni
