// The check of generation from prompts with media on a thinker toy (tests/fixtures/thinker/models/<family>): the KV
// cache's greedy ids and logits against a loop without cache that re-runs the whole multimodal forward (the training
// forward) over the sequence each step, its new tokens' positions after the prompt's largest in every stream.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/multimodal_collator.h"
#include "generate/generation_model.h"
#include "generate/generator.h"
#include "generate/media_prompt.h"
#include "io/safetensors.h"
#include "model/thinker/multimodal_lm.h"
#include "model/thinker/thinker_config.h"

namespace veomni::testing {

// The toys' special ids (their config.json).
constexpr int64_t kToyVisionStart = 248, kToyVisionEnd = 249, kToyAudioStart = 252, kToyAudioEnd = 253;

// A thinker toy (tests/fixtures/thinker/models/<family>) as an HF directory `dir`: the fixture keeps its weights as
// weights.safetensors, an HF directory names them model.safetensors.
inline void make_toy_hf_directory(const std::string& family, const std::string& dir) {
  const std::string fixture = std::string(VEOMNI_FIXTURES_DIR) + "/thinker/models/" + family;
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(fixture + "/config.json", dir + "/config.json");
  std::filesystem::copy_file(fixture + "/weights.safetensors", dir + "/model.safetensors");
}

// The whole multimodal model of such a directory (the training forward, the reference of generation).
inline std::unique_ptr<MultimodalLM> load_reference_model(const std::string& dir) {
  auto reference = std::make_unique<MultimodalLM>(load_thinker_config(dir), MultimodalOptions{});
  SafetensorsReader weights(dir + "/model.safetensors");
  for (const auto& p : reference->params().all()) weights.read_into(p->name, p->value);
  return reference;
}

// The sample with `generated` appended: their positions continue after the prompt's largest, in every stream.
inline Sample extended_sample(const Sample& prompt, const std::vector<int64_t>& generated) {
  Sample out = prompt;
  std::vector<int64_t> ids = sample_prompt_ids(prompt, "prompt");
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t total = n + static_cast<int64_t>(generated.size());
  ids.insert(ids.end(), generated.begin(), generated.end());
  out["input_ids"] = Tensor::from_vector(ids, {total});
  out.erase("labels");
  out.erase("attention_mask");
  const auto p = prompt.find("position_ids");
  const int64_t next = p == prompt.end() ? n : sample_next_position(prompt, "prompt");
  std::vector<float> positions;
  for (int64_t stream = 0; stream < 3; ++stream) {
    for (int64_t i = 0; i < n; ++i)
      positions.push_back(p == prompt.end() ? static_cast<float>(i)
                                            : static_cast<float>(p->second.item_as_double(stream * n + i)));
    for (int64_t k = 0; k < total - n; ++k) positions.push_back(static_cast<float>(next + k));
  }
  out["position_ids"] = Tensor::from_vector(positions, {3, total});
  for (const char* mask : {"image_mask", "video_mask", "audio_mask"}) {
    const auto m = prompt.find(mask);
    if (m == prompt.end()) continue;
    Tensor longer = Tensor::full<bool>({total}, false);
    std::copy(m->second.data<bool>(), m->second.data<bool>() + n, longer.data<bool>());
    out[mask] = longer;
  }
  return out;
}

// samples[i]: a media prompt's sample, or none for the text prompt texts[i]; all decoded in one batch of
// new_tokens steps. dir: a scratch directory for the toy's HF directory.
inline void expect_cached_generation_matches_full_forward(const std::string& family, const std::string& dir,
                                                          const std::vector<std::optional<Sample>>& samples,
                                                          const std::vector<std::vector<int64_t>>& texts,
                                                          int64_t new_tokens) {
  make_toy_hf_directory(family, dir);
  const std::unique_ptr<MultimodalLM> reference = load_reference_model(dir);
  const ThinkerConfig& config = reference->config();
  GenerationModel loaded = load_generation_model(dir, Device::cpu());
  load_media_encoders(loaded);
  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < samples.size(); ++i)
    prompts.push_back(samples[i] ? sample_prompt_ids(*samples[i], "prompt") : texts[i]);
  GenerateOptions options;
  options.max_new_tokens = new_tokens;
  options.mrope_positions = true;
  Generator generator(*loaded.model, options);
  generator.set_prefill_builder(MultimodalPrefill(loaded.multimodal->body(), samples));
  std::map<int64_t, std::vector<std::vector<float>>> seen;
  generator.set_logits_observer([&](const std::vector<int64_t>& rows, const Tensor& logits) {
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* p = logits.data<float>() + static_cast<int64_t>(r) * logits.dim(1);
      seen[rows[r]].emplace_back(p, p + logits.dim(1));
    }
  });
  const std::vector<Generation> out = generator.generate(prompts, 0);

  MultimodalCollateOptions collate;
  collate.max_seq_len = 1 << 20;
  collate.merge_unit = config.vision.merge_unit();
  collate.has_audio = config.has_audio;
  collate.position_dtype = config.has_audio ? DType::F32 : DType::I64;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Sample prompt;
    if (samples[i]) prompt = *samples[i];
    else prompt["input_ids"] = Tensor::from_vector(texts[i], {static_cast<int64_t>(texts[i].size())});
    std::vector<int64_t> greedy;
    for (int64_t step = 0; step < new_tokens; ++step) {
      const Sample sequence = extended_sample(prompt, greedy);
      const MultimodalBatch batch = collate_multimodal({{&sequence, family}}, collate);
      Tensor logits;
      reference->forward(batch, false, &logits);
      const int64_t vocab = logits.dim(1);
      const float* last = logits.data<float>() + (logits.dim(0) - 1) * vocab;
      ASSERT_GT(seen[static_cast<int64_t>(i)].size(), static_cast<size_t>(step)) << family << " prompt " << i;
      const std::vector<float>& got = seen[static_cast<int64_t>(i)][static_cast<size_t>(step)];
      for (int64_t v = 0; v < vocab; ++v)
        ASSERT_NEAR(got[static_cast<size_t>(v)], last[v], 1e-4) << family << " prompt " << i << " step " << step;
      greedy.push_back(std::max_element(last, last + vocab) - last);
    }
    EXPECT_EQ(out[i].token_ids, greedy) << family << " prompt " << i;
  }
}

}  // namespace veomni::testing
