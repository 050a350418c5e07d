// VeOmni's sentinel token ids: ignored labels and the placeholders for image, video and audio inputs.
#pragma once
#include <cstdint>

#include "data/batch.h"

namespace veomni {

// kIgnoreIndex (-100, labels that carry no loss) is defined in data/batch.h, beside the Batch that uses it.
inline constexpr int64_t kImageInputIndex = -200;
inline constexpr int64_t kVideoInputIndex = -300;
inline constexpr int64_t kAudioInputIndex = -400;

}  // namespace veomni
