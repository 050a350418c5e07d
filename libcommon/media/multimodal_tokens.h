// The token layout of multimodal conversations (ChatML with Qwen3-VL / Qwen3-Omni media blocks) and its labels.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/chat_template_model.h"
#include "data/tokenizer.h"
#include "media/multimodal_record.h"

namespace veomni {

// The special tokens a layout uses. Audio ids come from the tokenizer when it has <|audio_start|>, <|audio_end|> and
// <|audio_pad|> (Qwen3-Omni's does); the Qwen3 tokenizer lacks them, and then the released Qwen3-Omni ids are used
// (151669, 151670, 151675: mrope_positions.h's Qwen3OmniRopeOptions).
struct MultimodalTokenIds {
  int64_t im_start = 0, im_end = 0, newline = 0;
  int64_t vision_start = 0, vision_end = 0, image_pad = 0, video_pad = 0;
  int64_t audio_start = 0, audio_end = 0, audio_pad = 0;
  bool audio_from_tokenizer = false;
};

// InputError naming the tokenizer when a ChatML or vision token is missing.
MultimodalTokenIds multimodal_token_ids(const Tokenizer& tokenizer);

// The tokens one media part takes, decided by its processor, in text order.
struct MediaExtent {
  PartKind kind = PartKind::Image;
  int64_t tokens = 0;                    // image and audio: all; video: per temporal patch
  int64_t blocks = 1;                    // video: temporal patches (grid t); 1 otherwise
  std::vector<std::string> block_texts;  // Qwen3-VL video: "<t seconds>" before each temporal patch
  // Qwen3-VL video: transformers 5.17's Qwen3VLProcessor replaces only the template's <|video_pad|>, so the
  // template's <|vision_start|> ... <|vision_end|> stay around the per-patch blocks.
  bool outer_markers = false;
};

// Ids with media tokens as VeOmni's placeholders (-200 image, -300 video, -400 audio), and per token whether it is
// a training target.
struct MultimodalTokens {
  std::vector<int64_t> ids;
  std::vector<uint8_t> trained;
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
};

class MultimodalTemplate {
 public:
  explicit MultimodalTemplate(const Tokenizer& tokenizer);

  // Per message: <|im_start|> role "\n" content <|im_end|> "\n", the content being its parts in order: text as is,
  // an image as <|vision_start|> pad×tokens <|vision_end|>, a video as, per temporal patch, block_texts[i] (if any)
  // then <|vision_start|> pad×tokens <|vision_end|> (the whole inside one more <|vision_start|> ... <|vision_end|>
  // when outer_markers), audio as <|audio_start|> pad×tokens <|audio_end|>. Each run of text between special
  // tokens is tokenized whole, as HF tokenizes the expanded prompt.
  // Trained: assistant content tokens except media pads, and the assistant's <|im_end|>. InputError when the media
  // count differs from the media parts or a text part holds a media marker token. With generation_prompt the
  // assistant's turn is opened after the messages (<|im_start|> "assistant\n", untrained), as a prompt to generate from.
  MultimodalTokens encode(const std::vector<MultimodalMessage>& messages, const std::vector<MediaExtent>& media,
                          bool generation_prompt = false) const;

  // The same layout from a model template's rendering (--chat-template model): each media block the template
  // renders (<|vision_start|><|image_pad|><|vision_end|>, the same with <|video_pad|>, and
  // <|audio_start|><|audio_pad|><|audio_end|>) takes the next extent, in order, and is expanded as encode() expands
  // a media part; the text between blocks is tokenized with label_rendering's cuts. Trained: the tokens inside
  // `spans` (the assistant's bytes) except media pads. InputError when the blocks differ from `media` in number or
  // kind, or a media marker stands outside a block.
  MultimodalTokens encode_rendering(const std::string& text, std::span<const ByteSpan> spans,
                                    const std::vector<MediaExtent>& media) const;

  const MultimodalTokenIds& ids() const { return ids_; }

 private:
  const Tokenizer& tokenizer_;
  MultimodalTokenIds ids_;
};

}  // namespace veomni
