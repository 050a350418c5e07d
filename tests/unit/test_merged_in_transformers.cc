// A model trained by veomni-train and merged by veomni-ckpt-merge loads in transformers with the same logits as our
// forward: transformers' logits and loss on the toy batch were recorded by
// `scripts/gen_hf_fixtures.py --check-merged` (which also checked that the stacked-expert merge loads identically).
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/causal_lm.h"
#include "model/hf_loader.h"
#include "model/weight_source.h"
#include "tests/common/hf_fixture.h"
#include "train/loss_scale.h"

using namespace veomni;

TEST(MergedInTransformers, MoeToyLogitsMatchOurForward) {
  const std::string dir = std::string(VEOMNI_FIXTURES_DIR) + "/merged/qwen3_moe_toy";
  // The batch of the HF fixture of the same model; the weights are the merged, trained ones.
  const veomni::testing::HfFixture batch_fixture = veomni::testing::load_hf_fixture("qwen3_moe_toy");
  const ModelConfig config = load_model_config(dir + "/model");
  CausalLM model(config, ModelOptions{});
  model.params().materialize_all(Device::cpu(), DType::F32);
  load_hf_weights(model.params(), HfCheckpointSource(dir + "/model"));

  Tensor logits;
  const ForwardStats stats = model.forward(batch_fixture.batch, false, &logits).stats;
  const double err = veomni::testing::relative_error(logits, SafetensorsReader(dir + "/expected.safetensors").read("logits"));
  EXPECT_LE(err, 1e-4);
  StepLossScale scale;
  scale.global_valid_tokens = batch_fixture.batch.valid_tokens;
  scale.aux_loss_coef = config.router_aux_loss_coef;
  const double loss = scale.total_loss(stats.ce_sum, stats.aux_loss);
  const double expected = read_json_file(dir + "/expected.json")["loss"].get<double>();
  EXPECT_NEAR(loss, expected, 1e-4 * expected);
  std::printf("merged qwen3_moe_toy: logits rel err %.3g, loss %.9g vs transformers %.9g\n", err, loss, expected);
}
