// Alignment with HuggingFace transformers: our CPU fp32 model against fixtures written by scripts/gen_hf_fixtures.py
// (logits, CE and aux loss, every parameter gradient, and the losses of three AdamW steps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "tests/common/hf_fixture.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"
#include "model/hf_loader.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "optim/adamw.h"
#include "train/loss_scale.h"

using namespace veomni;

namespace {

constexpr double kRelTol = 1e-4;

using HfModelFixture = veomni::testing::HfFixture;
using veomni::testing::load_hf_fixture;
using veomni::testing::relative_error;

std::unique_ptr<CausalLM> load_model(const HfModelFixture& f) {
  auto model = std::make_unique<CausalLM>(f.config, ModelOptions{});
  model->params().materialize_all(Device::cpu(), DType::F32);
  load_hf_weights(model->params(), HfCheckpointSource(f.dir + "/model"));
  return model;
}

StepLossScale loss_scale_of(const HfModelFixture& f) {
  StepLossScale s;
  s.global_valid_tokens = f.batch.valid_tokens;
  s.micro_batches = 1;
  s.aux_loss_coef = f.config.is_moe() && f.config.output_router_logits ? f.config.router_aux_loss_coef : 0.0;
  return s;
}

void check_forward_backward(const std::string& name) {
  const HfModelFixture f = load_hf_fixture(name);
  ASSERT_EQ(f.batch.valid_tokens, f.expected["valid_tokens"].get<int64_t>());
  auto model = load_model(f);
  SafetensorsReader expected(f.dir + "/expected.safetensors");

  Tensor logits;
  SftPass pass = model->forward(f.batch, true, &logits);
  const ForwardStats stats = pass.stats;
  const StepLossScale scale = loss_scale_of(f);
  const double logits_err = relative_error(logits, expected.read("logits"));
  EXPECT_LE(logits_err, kRelTol) << name << " logits";
  const double ce = scale.ce_loss(stats.ce_sum);
  EXPECT_NEAR(ce, f.expected["ce_loss"].get<double>(), kRelTol * f.expected["ce_loss"].get<double>()) << name;
  EXPECT_NEAR(stats.aux_loss, f.expected["aux_loss"].get<double>(), kRelTol * (1 + f.expected["aux_loss"].get<double>()))
      << name;
  EXPECT_NEAR(scale.total_loss(stats.ce_sum, stats.aux_loss), f.expected["loss"].get<double>(),
              kRelTol * f.expected["loss"].get<double>());

  model->params().zero_grads();
  model->backward(std::move(pass), scale.ce_grad_scale(), scale.aux_grad_scale());
  double worst = 0;
  std::string worst_name;
  int checked = 0;
  for (const auto& p : model->params().all()) {
    const std::string key = "grad." + p->name;
    ASSERT_TRUE(expected.contains(key)) << "fixture has no gradient for " << p->name;
    const double err = relative_error(p->grad, expected.read(key));
    EXPECT_LE(err, kRelTol) << name << " gradient of " << p->name;
    if (err > worst) worst = err, worst_name = p->name;
    ++checked;
  }
  EXPECT_EQ(static_cast<size_t>(checked), model->params().all().size());
  std::printf("[%s] logits rel err %.3g, ce %.9g vs %.9g, aux %.9g vs %.9g, worst grad rel err %.3g (%s)\n",
              name.c_str(), logits_err, ce, f.expected["ce_loss"].get<double>(), stats.aux_loss,
              f.expected["aux_loss"].get<double>(), worst, worst_name.c_str());
}

void check_adamw_steps(const std::string& name) {
  const HfModelFixture f = load_hf_fixture(name);
  auto model = load_model(f);
  const nlohmann::json& hp = f.expected["adamw"];
  AdamWOptions options;
  options.beta1 = hp["betas"][0].get<double>();
  options.beta2 = hp["betas"][1].get<double>();
  options.eps = hp["eps"].get<double>();
  options.weight_decay = hp["weight_decay"].get<double>();
  AdamW adamw(options);
  model->params().zero_grads();
  for (const auto& p : model->params().all()) adamw.add_slot(p->name, p->value, &p->grad);
  const StepLossScale scale = loss_scale_of(f);
  const auto expected = f.expected["adamw_losses"].get<std::vector<double>>();
  for (size_t step = 0; step < expected.size(); ++step) {
    model->params().zero_grads();
    SftPass pass = model->forward(f.batch, step + 1 < expected.size());
    const ForwardStats stats = pass.stats;
    const double loss = scale.total_loss(stats.ce_sum, stats.aux_loss);
    EXPECT_NEAR(loss, expected[step], kRelTol * expected[step]) << name << " loss before AdamW step " << step + 1;
    std::printf("[%s] AdamW step %zu: loss %.9g vs %.9g\n", name.c_str(), step, loss, expected[step]);
    if (step + 1 == expected.size()) break;
    model->backward(std::move(pass), scale.ce_grad_scale(), scale.aux_grad_scale());
    adamw.step(hp["lr"].get<double>());
  }
}

}  // namespace

TEST(HfFixtures, DenseForwardBackwardMatchesTransformers) { check_forward_backward("qwen3_toy"); }
TEST(HfFixtures, TiedDenseForwardBackwardMatchesTransformers) { check_forward_backward("qwen3_toy_tied"); }
TEST(HfFixtures, MoeForwardBackwardMatchesTransformers) { check_forward_backward("qwen3_moe_toy"); }
TEST(HfFixtures, DenseAdamWStepsMatchTransformers) { check_adamw_steps("qwen3_toy"); }
TEST(HfFixtures, TiedDenseAdamWStepsMatchTransformers) { check_adamw_steps("qwen3_toy_tied"); }
TEST(HfFixtures, MoeAdamWStepsMatchTransformers) { check_adamw_steps("qwen3_moe_toy"); }
