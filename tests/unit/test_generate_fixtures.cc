// veomni's KV-cache greedy decoding against transformers' generate on the toy models (dense, MoE, VL) of
// tests/fixtures/generate/<name> (made by scripts/gen_generate_fixtures.py): the same new token ids for 3 prompts of
// different lengths, decoded in one batch.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/generation_model.h"
#include "generate/generator.h"
#include "io/json_file.h"

using namespace veomni;

namespace {

void expect_transformers_greedy_ids(const std::string& name) {
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/generate/" + name;
  if (!std::filesystem::exists(dir + "/expected.json"))
    GTEST_SKIP() << dir << " is absent: make it with scripts/gen_generate_fixtures.py (torch + transformers)";
  const nlohmann::json expected = read_json_file(dir + "/expected.json");
  const auto prompts = expected["prompts"].get<std::vector<std::vector<int64_t>>>();
  const auto want = expected["expected"].get<std::vector<std::vector<int64_t>>>();
  GenerationModel loaded = load_generation_model(dir + "/model", Device::cpu());
  GenerateOptions options;
  options.max_new_tokens = expected["max_new_tokens"].get<int64_t>();
  options.stop_token_ids = loaded.eos_token_ids;
  const std::vector<Generation> got = Generator(*loaded.model, options).generate(prompts, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].token_ids, want[i]) << name << " prompt " << i;
}

TEST(GenerateFixtures, DenseGreedyIdsMatchTransformers) { expect_transformers_greedy_ids("qwen3_toy"); }

TEST(GenerateFixtures, MoeGreedyIdsMatchTransformers) { expect_transformers_greedy_ids("qwen3_moe_toy"); }

// Text-only prompts through Qwen3-VL: M-RoPE with the three position streams equal, left padding in transformers.
TEST(GenerateFixtures, VlGreedyIdsMatchTransformers) { expect_transformers_greedy_ids("qwen3_vl_toy"); }

}  // namespace
