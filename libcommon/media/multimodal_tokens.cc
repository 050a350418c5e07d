// Multimodal conversations to ids: text runs tokenized whole between special tokens, media blocks as placeholders.
#include "media/multimodal_tokens.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "data/constants.h"
#include "data/mrope_positions.h"

namespace veomni {

namespace {

// Markers that only media parts may place: in a text part they would break the media/placeholder correspondence.
constexpr std::array<std::string_view, 7> kMediaMarkers = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                                                          "<|video_pad|>",    "<|audio_start|>", "<|audio_end|>",
                                                          "<|audio_pad|>"};

// Qwen3-Omni's <|audio_end|> (the released tokenizer: <|audio_start|> 151669, <|audio_end|> 151670).
constexpr int64_t kQwen3OmniAudioEndId = 151670;

int64_t optional_id(const Tokenizer& tokenizer, std::string_view text, int64_t fallback, bool& found) {
  const std::optional<int32_t> id = tokenizer.token_id(text);
  found = found && id.has_value();
  return id ? *id : fallback;
}

// Builds one sequence from text runs (tokenized when flushed) and special tokens.
class LayoutBuilder {
 public:
  LayoutBuilder(const Tokenizer& tokenizer, MultimodalTokens& out) : tokenizer_(tokenizer), out_(out) {}

  // Starts a message: the header "role\n" opens its first text run and is never trained.
  void begin_message(const std::string& role, bool assistant) {
    text_ = role + "\n";
    header_ = text_.size();
    assistant_ = assistant;
  }
  void text(const std::string& text) { text_ += text; }
  void special(int64_t id, bool trainable) {
    flush();
    push(id, assistant_ && trainable);
  }
  void run(int64_t id, int64_t count) {
    flush();
    for (int64_t i = 0; i < count; ++i) push(id, false);
  }
  // A block that holds no message text (a media block of a rendering): trained when `assistant`.
  void begin_block(bool assistant) {
    text_.clear();
    header_ = 0;
    assistant_ = assistant;
  }
  // One media part's tokens: its markers (trainable) around pads (never trained), per temporal patch for video.
  void media(const MediaExtent& extent, const MultimodalTokenIds& ids) {
    switch (extent.kind) {
      case PartKind::Image:
        special(ids.vision_start, true);
        run(kImageInputIndex, extent.tokens);
        special(ids.vision_end, true);
        break;
      case PartKind::Video:
        VEOMNI_CHECK(extent.block_texts.empty() || static_cast<int64_t>(extent.block_texts.size()) == extent.blocks,
                     "{} block texts for {} blocks", extent.block_texts.size(), extent.blocks);
        if (extent.outer_markers) special(ids.vision_start, true);
        for (int64_t b = 0; b < extent.blocks; ++b) {
          if (!extent.block_texts.empty()) text(extent.block_texts[static_cast<size_t>(b)]);
          special(ids.vision_start, true);
          run(kVideoInputIndex, extent.tokens);
          special(ids.vision_end, true);
        }
        if (extent.outer_markers) special(ids.vision_end, true);
        break;
      case PartKind::Audio:
        special(ids.audio_start, true);
        run(kAudioInputIndex, extent.tokens);
        special(ids.audio_end, true);
        break;
      case PartKind::Text: break;
    }
  }
  void flush() {
    if (text_.empty()) return;
    pieces_.ids.clear();
    pieces_.ends.clear();
    tokenizer_.encode(text_, pieces_);
    for (size_t i = 0; i < pieces_.ids.size(); ++i) push(pieces_.ids[i], assistant_ && pieces_.ends[i] > header_);
    text_.clear();
    header_ = 0;
  }

 private:
  void push(int64_t id, bool trained) {
    out_.ids.push_back(id);
    out_.trained.push_back(trained ? 1 : 0);
  }

  const Tokenizer& tokenizer_;
  MultimodalTokens& out_;
  TokenizedText pieces_;
  std::string text_;
  size_t header_ = 0;
  bool assistant_ = false;
};

void check_text_part(const std::string& text, size_t message, size_t part) {
  for (std::string_view marker : kMediaMarkers)
    VEOMNI_INPUT_CHECK(text.find(marker) == std::string::npos,
                       "message {} part {}: the text holds {}, which only media parts may place", message, part,
                       marker);
}

// A media block as a chat template renders it: the pad between its markers.
struct RenderedBlock {
  PartKind kind;
  std::string_view open, pad, close;
};
constexpr std::array<RenderedBlock, 3> kRenderedBlocks = {
    RenderedBlock{PartKind::Image, "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"},
    RenderedBlock{PartKind::Video, "<|vision_start|>", "<|video_pad|>", "<|vision_end|>"},
    RenderedBlock{PartKind::Audio, "<|audio_start|>", "<|audio_pad|>", "<|audio_end|>"}};

size_t count_of(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The next rendered block at or after `from`: its kind and byte range; nullopt when no pad is left.
struct FoundBlock {
  PartKind kind;
  size_t begin, end;
};
std::optional<FoundBlock> next_block(std::string_view text, size_t from) {
  const RenderedBlock* first = nullptr;
  size_t at = std::string_view::npos;
  for (const RenderedBlock& b : kRenderedBlocks) {
    const size_t found = text.find(b.pad, from);
    if (found < at) at = found, first = &b;
  }
  if (first == nullptr) return std::nullopt;
  const size_t begin = at >= first->open.size() ? at - first->open.size() : at;
  const size_t end = at + first->pad.size();
  VEOMNI_INPUT_CHECK(begin >= from && text.substr(begin, first->open.size()) == first->open &&
                         text.substr(end, first->close.size()) == first->close,
                     "the chat template renders {} at byte {} without {} before it and {} after it", first->pad, at,
                     first->open, first->close);
  return FoundBlock{first->kind, begin, end + first->close.size()};
}

// `spans` cut to [begin, end), counted from begin.
std::vector<ByteSpan> spans_within(std::span<const ByteSpan> spans, size_t begin, size_t end) {
  std::vector<ByteSpan> out;
  for (const ByteSpan& s : spans)
    if (std::max(s.begin, begin) < std::min(s.end, end))
      out.push_back({std::max(s.begin, begin) - begin, std::min(s.end, end) - begin});
  return out;
}

bool inside(std::span<const ByteSpan> spans, size_t begin, size_t end) {
  return std::any_of(spans.begin(), spans.end(), [&](const ByteSpan& s) { return s.begin <= begin && end <= s.end; });
}

}  // namespace

MultimodalTokenIds multimodal_token_ids(const Tokenizer& tokenizer) {
  MultimodalTokenIds ids;
  ids.im_start = tokenizer.require_token_id("<|im_start|>");
  ids.im_end = tokenizer.require_token_id("<|im_end|>");
  ids.newline = tokenizer.require_token_id("\n");
  ids.vision_start = tokenizer.require_token_id("<|vision_start|>");
  ids.vision_end = tokenizer.require_token_id("<|vision_end|>");
  ids.image_pad = tokenizer.require_token_id("<|image_pad|>");
  ids.video_pad = tokenizer.require_token_id("<|video_pad|>");
  const Qwen3OmniRopeOptions omni;
  bool found = true;
  ids.audio_start = optional_id(tokenizer, "<|audio_start|>", omni.audio_start_token_id, found);
  ids.audio_end = optional_id(tokenizer, "<|audio_end|>", kQwen3OmniAudioEndId, found);
  ids.audio_pad = optional_id(tokenizer, "<|audio_pad|>", omni.audio_token_id, found);
  ids.audio_from_tokenizer = found;
  return ids;
}

MultimodalTemplate::MultimodalTemplate(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), ids_(multimodal_token_ids(tokenizer)) {}

MultimodalTokens MultimodalTemplate::encode(const std::vector<MultimodalMessage>& messages,
                                            const std::vector<MediaExtent>& media, bool generation_prompt) const {
  MultimodalTokens out;
  LayoutBuilder layout(tokenizer_, out);
  size_t next_media = 0;
  for (size_t k = 0; k < messages.size(); ++k) {
    const MultimodalMessage& m = messages[k];
    const bool assistant = m.role == "assistant";
    layout.special(ids_.im_start, false);
    layout.begin_message(m.role, assistant);
    for (size_t j = 0; j < m.parts.size(); ++j) {
      const ContentPart& part = m.parts[j];
      if (part.kind == PartKind::Text) {
        check_text_part(part.value, k, j);
        layout.text(part.value);
        continue;
      }
      VEOMNI_CHECK(next_media < media.size(), "{} media parts but only {} extents", next_media + 1, media.size());
      const MediaExtent& extent = media[next_media++];
      VEOMNI_CHECK(extent.kind == part.kind, "message {} part {}: a {} part got a {} extent", k, j,
                   part_kind_name(part.kind), part_kind_name(extent.kind));
      layout.media(extent, ids_);
    }
    layout.special(ids_.im_end, true);
    layout.special(ids_.newline, false);
  }
  VEOMNI_CHECK(next_media == media.size(), "{} media parts but {} extents", next_media, media.size());
  if (generation_prompt) {
    layout.special(ids_.im_start, false);
    layout.begin_message("assistant", false);
    layout.flush();
  }
  return out;
}

MultimodalTokens MultimodalTemplate::encode_rendering(const std::string& text, std::span<const ByteSpan> spans,
                                                      const std::vector<MediaExtent>& media) const {
  size_t rendered = 0;
  for (const RenderedBlock& b : kRenderedBlocks) rendered += count_of(text, b.pad);
  VEOMNI_INPUT_CHECK(rendered == media.size(),
                     "the chat template renders {} media placeholder(s) (<|image_pad|>, <|video_pad|>, "
                     "<|audio_pad|>) for the record's {} media part(s)",
                     rendered, media.size());
  MultimodalTokens out;
  const auto append_text = [&](size_t begin, size_t end) {
    const std::string piece = text.substr(begin, end - begin);
    for (std::string_view marker : kMediaMarkers)
      VEOMNI_INPUT_CHECK(piece.find(marker) == std::string::npos,
                         "the chat template renders {} outside a media block (near byte {})", marker, begin);
    const std::vector<ByteSpan> cut = spans_within(spans, begin, end);
    const LabeledTokens labeled = label_rendering(piece, cut, tokenizer_);
    out.ids.insert(out.ids.end(), labeled.ids.begin(), labeled.ids.end());
    out.trained.insert(out.trained.end(), labeled.trained.begin(), labeled.trained.end());
  };
  size_t from = 0;
  for (size_t m = 0; m < media.size(); ++m) {
    const std::optional<FoundBlock> block = next_block(text, from);
    VEOMNI_CHECK(block.has_value(), "{} pads counted but block {} not found", rendered, m);
    VEOMNI_INPUT_CHECK(block->kind == media[m].kind,
                       "the chat template's media placeholder {} is for {} but the record's media part {} is {}", m,
                       part_kind_name(block->kind), m, part_kind_name(media[m].kind));
    append_text(from, block->begin);
    LayoutBuilder layout(tokenizer_, out);
    layout.begin_block(inside(spans, block->begin, block->end));
    layout.media(media[m], ids_);
    layout.flush();
    from = block->end;
  }
  append_text(from, text.size());
  return out;
}

}  // namespace veomni
