// MFU's FLOPs count against hand computations for the toy configs, and the peak-throughput table.
#include <gtest/gtest.h>

#include "metrics/model_flops.h"
#include "model/model_config.h"

namespace veomni {
namespace {

const std::string kConfigs = std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/";

// qwen3_toy: H 64, 4 heads x 16 (q 64), 2 kv heads (kv 32), I 128, 2 layers, V 1024.
// Per layer 64 * (2*64 + 2*32) = 12288 (attention) + 3 * 64 * 128 = 24576 (MLP): 36864; x 2 = 73728.
TEST(ModelFlops, DenseToyParamsByHand) {
  const ModelConfig c = load_model_config(kConfigs + "qwen3_toy");
  EXPECT_EQ(matmul_params_per_token(c, ModelHead::LanguageModel), 73728.0 + 1024.0 * 64.0);
  EXPECT_EQ(matmul_params_per_token(c, ModelHead::SequenceReward), 73728.0 + 64.0);
  EXPECT_EQ(matmul_params_per_token(c, ModelHead::TokenValue), 73728.0 + 64.0);
}

// qwen3_moe_toy: 8 experts, top 2, I_moe 32: a sparse layer's MLP is 64 * 8 (router) + 3 * 64 * 32 * 2 = 12800.
TEST(ModelFlops, MoeToyParamsByHand) {
  ModelConfig c = load_model_config(kConfigs + "qwen3_moe_toy");
  EXPECT_EQ(matmul_params_per_token(c, ModelHead::LanguageModel), 2 * (12288.0 + 12800.0) + 65536.0);
  c.mlp_only_layers = {0};  // layer 0 dense (3 * 64 * 128)
  EXPECT_EQ(matmul_params_per_token(c, ModelHead::LanguageModel), 12288.0 + 24576.0 + 12288.0 + 12800.0 + 65536.0);
}

// 100 tokens in two sequences of 60 and 40: 6 * 139264 * 100 + 12 * (60^2 + 40^2) * 16 * 4 * 2.
TEST(ModelFlops, TrainStepByHand) {
  const ModelConfig c = load_model_config(kConfigs + "qwen3_toy");
  const StepWork work{100, 60.0 * 60.0 + 40.0 * 40.0, false};
  EXPECT_EQ(train_step_flops(c, ModelHead::LanguageModel, work), 83558400.0 + 7987200.0);
  // DPO's reference forward: a third more (2 * 139264 * 100 + 4 * 5200 * 128).
  const StepWork dpo{100, 5200, true};
  EXPECT_EQ(train_step_flops(c, ModelHead::LanguageModel, dpo), 83558400.0 + 7987200.0 + 27852800.0 + 2662400.0);
}

TEST(ModelFlops, PeakTableByGpuName) {
  EXPECT_EQ(peak_bf16_flops_per_second("NVIDIA H100 80GB HBM3"), 989.4e12);
  EXPECT_EQ(peak_bf16_flops_per_second("NVIDIA H200"), 989.4e12);
  EXPECT_EQ(peak_bf16_flops_per_second("NVIDIA H100 PCIe"), 756e12);
  EXPECT_EQ(peak_bf16_flops_per_second("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_EQ(peak_bf16_flops_per_second("NVIDIA GeForce RTX 4090"), 0.0);
  EXPECT_EQ(peak_bf16_flops_per_second(""), 0.0);
}

}  // namespace
}  // namespace veomni
