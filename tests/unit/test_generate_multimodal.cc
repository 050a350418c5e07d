// Text-only generation through a multimodal model's language model (Qwen3-VL, the Qwen3-Omni thinker) loaded from
// its HF directory: every step's logits through the KV cache, with M-RoPE positions continuing the prompt's, equal
// the whole multimodal model's forward over the text-only sequence (1e-5), and the greedy ids are its argmaxes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "generate/generation_model.h"
#include "generate/generator.h"
#include "io/safetensors.h"
#include "model/thinker/multimodal_lm.h"
#include "model/thinker/thinker_config.h"
#include "tests/common/generate_media_check.h"
#include "tests/common/scratch_dir.h"

using namespace veomni;

namespace {

class GenerateMultimodal : public veomni::testing::ScratchDir {
 protected:
  void expect_text_generation_matches_forward(const std::string& family) {
    const std::string dir = path("model");
    veomni::testing::make_toy_hf_directory(family, dir);
    const std::unique_ptr<MultimodalLM> reference = veomni::testing::load_reference_model(dir);

    GenerationModel loaded = load_generation_model(dir, Device::cpu());
    ASSERT_TRUE(loaded.mrope);
    GenerateOptions options;
    options.max_new_tokens = 5;
    options.mrope_positions = true;
    Generator generator(*loaded.model, options);
    std::map<int64_t, std::vector<std::vector<float>>> seen;
    generator.set_logits_observer([&](const std::vector<int64_t>& rows, const Tensor& logits) {
      for (size_t r = 0; r < rows.size(); ++r) {
        const float* p = logits.data<float>() + static_cast<int64_t>(r) * logits.dim(1);
        seen[rows[r]].emplace_back(p, p + logits.dim(1));
      }
    });
    const std::vector<std::vector<int64_t>> prompts = {{3, 14, 15, 92, 6}, {7}, {2, 71, 82, 81, 8, 28, 18, 28}};
    const std::vector<Generation> out = generator.generate(prompts, 0);
    std::set<int64_t> distinct;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int64_t> ids = prompts[i];
      ids.insert(ids.end(), out[i].token_ids.begin(), out[i].token_ids.end());
      const int64_t n = static_cast<int64_t>(ids.size());
      MultimodalBatch batch;
      batch.text.input_ids = Tensor::from_vector(ids, {n});
      batch.text.target_ids = Tensor::from_vector(std::vector<int64_t>(static_cast<size_t>(n), kIgnoreIndex), {n});
      std::vector<int64_t> positions;
      for (int stream = 0; stream < 3; ++stream)
        for (int64_t t = 0; t < n; ++t) positions.push_back(t);
      batch.text.position_ids = Tensor::from_vector(positions, {3, n});
      batch.text.cu_seqlens = {0, static_cast<int32_t>(n)};
      Tensor full;
      reference->forward(batch, false, &full);
      const int64_t vocab = full.dim(1);
      ASSERT_EQ(seen[static_cast<int64_t>(i)].size(), out[i].token_ids.size());
      for (size_t t = 0; t < out[i].token_ids.size(); ++t) {
        const float* want = full.data<float>() + (static_cast<int64_t>(prompts[i].size() + t) - 1) * vocab;
        const std::vector<float>& got = seen[static_cast<int64_t>(i)][t];
        for (int64_t v = 0; v < vocab; ++v)
          ASSERT_NEAR(got[static_cast<size_t>(v)], want[v], 1e-5) << family << " prompt " << i << " step " << t;
        EXPECT_EQ(out[i].token_ids[t], std::max_element(want, want + vocab) - want);
        distinct.insert(out[i].token_ids[t]);
      }
    }
    EXPECT_GT(distinct.size(), 1u);
  }
};

TEST_F(GenerateMultimodal, Qwen3VlTextOnlyMatchesFullForward) { expect_text_generation_matches_forward("qwen3_vl_toy"); }

TEST_F(GenerateMultimodal, Qwen3OmniThinkerTextOnlyMatchesFullForward) {
  expect_text_generation_matches_forward("qwen3_omni_moe_toy");
}

}  // namespace
