// PEFT's adapter directory from our LoRA adapters: tensor names, the experts' target_parameters layout, the
// adapter_config.json, the merged delta, and the errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/peft_adapter.h"
#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"

using namespace veomni;

namespace {

// A tensor whose element i is offset + i: every element says where it came from.
Tensor counting(const Shape& shape, float offset) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = offset + static_cast<float>(i);
  return Tensor::from_vector(values, shape);
}

// The name by value (a view): a reference parameter bound to a temporary makes GCC 13 warn that the returned
// reference may dangle.
const PeftTensor& find(const std::vector<PeftTensor>& tensors, std::string_view name) {
  for (const PeftTensor& t : tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + std::string(name));
}

float weight_at(const Tensor& t, int64_t row, int64_t col) { return t.data<float>()[row * t.dim(1) + col]; }

constexpr int64_t kExperts = 3, kRank = 2, kIn = 5, kOut = 4;

std::map<std::string, Tensor> moe_adapters(bool shared) {
  const Shape a = shared ? Shape{kRank, kIn} : Shape{kExperts, kRank, kIn};
  const Shape b = shared ? Shape{kOut, kRank} : Shape{kExperts, kOut, kRank};
  return {{"model.layers.0.self_attn.q_proj.lora_A.weight", counting({kRank, kIn}, 0)},
          {"model.layers.0.self_attn.q_proj.lora_B.weight", counting({kOut, kRank}, 100)},
          {"model.layers.0.mlp.experts.gate_up_proj.lora_A.weight", counting(a, 1000)},
          {"model.layers.0.mlp.experts.gate_up_proj.lora_B.weight", counting(b, 2000)},
          {"model.layers.0.mlp.experts.down_proj.lora_A.weight", counting(a, 3000)},
          {"model.layers.0.mlp.experts.down_proj.lora_B.weight", counting(b, 4000)}};
}

}  // namespace

TEST(PeftAdapter, LinearAdaptersKeepTheirLayoutUnderPeftsPrefix) {
  const auto tensors = peft_adapter_tensors(moe_adapters(false), kExperts);
  const PeftTensor& a = find(tensors, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(a.value.shape(), (Shape{kRank, kIn}));
  EXPECT_EQ(weight_at(a.value, 1, 3), 8.0f);
  EXPECT_EQ(find(tensors, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight").value.shape(),
            (Shape{kOut, kRank}));
}

TEST(PeftAdapter, ExpertAdaptersTakePeftsTargetParametersLayout) {
  const auto tensors = peft_adapter_tensors(moe_adapters(false), kExperts);
  // Both expert tensors adapted: gate_up_proj's adapter is the inner one (base_layer), down_proj's the outer.
  const PeftTensor& a = find(tensors, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight");
  const PeftTensor& b = find(tensors, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_B.weight");
  ASSERT_EQ(a.value.shape(), (Shape{kExperts * kRank, kIn}));
  ASSERT_EQ(b.value.shape(), (Shape{kOut, kExperts * kRank}));
  for (int64_t e = 0; e < kExperts; ++e)
    for (int64_t k = 0; k < kRank; ++k) {
      // Row e*r + k of A is expert e's row k; column k*E + e of B is expert e's column k.
      EXPECT_EQ(weight_at(a.value, e * kRank + k, 2), 1000.0f + static_cast<float>((e * kRank + k) * kIn + 2));
      EXPECT_EQ(weight_at(b.value, 3, k * kExperts + e), 2000.0f + static_cast<float>((e * kOut + 3) * kRank + k));
    }
  EXPECT_EQ(find(tensors, "base_model.model.model.layers.0.mlp.experts.lora_A.weight").value.dim(0),
            kExperts * kRank);
}

TEST(PeftAdapter, SharedExpertAdapterIsWrittenForEveryExpert) {
  const auto tensors = peft_adapter_tensors(moe_adapters(true), kExperts);
  const Tensor& a = find(tensors, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight").value;
  const Tensor& b = find(tensors, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_B.weight").value;
  for (int64_t e = 0; e < kExperts; ++e)
    for (int64_t k = 0; k < kRank; ++k) {
      EXPECT_EQ(weight_at(a, e * kRank + k, 4), 1000.0f + static_cast<float>(k * kIn + 4));
      EXPECT_EQ(weight_at(b, 1, k * kExperts + e), 2000.0f + static_cast<float>(1 * kRank + k));
    }
}

TEST(PeftAdapter, OneAdaptedExpertTensorSitsAtTheExpertsModule) {
  auto adapters = moe_adapters(false);
  adapters.erase("model.layers.0.mlp.experts.down_proj.lora_A.weight");
  adapters.erase("model.layers.0.mlp.experts.down_proj.lora_B.weight");
  const auto tensors = peft_adapter_tensors(adapters, kExperts);
  EXPECT_NO_THROW(find(tensors, "base_model.model.model.layers.0.mlp.experts.lora_A.weight"));
  EXPECT_THROW(find(tensors, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight"),
               std::runtime_error);
}

TEST(PeftAdapter, ConfigNamesTheModulesAndTheExpertTensors) {
  LoraConfig lora;
  lora.rank = kRank;
  lora.alpha = 16;
  lora.use_rslora = true;
  const auto config = peft_adapter_config(moe_adapters(false), lora, "/models/base");
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], kRank);
  EXPECT_EQ(config["lora_alpha"], 16.0);
  EXPECT_EQ(config["use_rslora"], true);
  EXPECT_EQ(config["base_model_name_or_path"], "/models/base");
  EXPECT_EQ(config["target_modules"], nlohmann::ordered_json::array({"model.layers.0.self_attn.q_proj"}));
  EXPECT_EQ(config["target_parameters"],
            nlohmann::ordered_json::array({"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}));
}

TEST(PeftAdapter, ExpertAdaptersOnSomeLayersOnlyAreRefused) {
  auto adapters = moe_adapters(false);
  adapters["model.layers.1.mlp.experts.down_proj.lora_A.weight"] = counting({kExperts, kRank, kIn}, 0);
  adapters["model.layers.1.mlp.experts.down_proj.lora_B.weight"] = counting({kExperts, kOut, kRank}, 0);
  EXPECT_THROW(peft_adapter_config(adapters, LoraConfig{.rank = kRank}, ""), InputError);
}

TEST(PeftAdapter, AnAWithoutItsBIsAnInputError) {
  auto adapters = moe_adapters(false);
  adapters.erase("model.layers.0.self_attn.q_proj.lora_B.weight");
  try {
    peft_adapter_tensors(adapters, kExperts);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("q_proj has lora_A but no lora_B"), std::string::npos) << e.what();
  }
  EXPECT_THROW(peft_adapter_tensors({{"model.norm.weight", counting({2}, 0)}}, 0), InputError);
}

TEST(PeftAdapter, DeltaIsScaleTimesBA) {
  Tensor w = Tensor::zeros({kOut, kIn}, DType::F32);
  const Tensor a = counting({kRank, kIn}, 1), b = counting({kOut, kRank}, -3);
  add_lora_delta(w, a, b, 0.5);
  for (int64_t o = 0; o < kOut; ++o)
    for (int64_t i = 0; i < kIn; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < kRank; ++k) sum += weight_at(b, o, k) * weight_at(a, k, i);
      EXPECT_FLOAT_EQ(weight_at(w, o, i), static_cast<float>(0.5 * sum));
    }
  Tensor experts = Tensor::zeros({kExperts, kOut, kIn}, DType::F32);
  const Tensor ea = counting({kExperts, kRank, kIn}, 0), eb = counting({kExperts, kOut, kRank}, 0);
  add_lora_delta(experts, ea, eb, 1.0);
  const int64_t e = 2, o = 3, i = 1;
  double sum = 0;
  for (int64_t k = 0; k < kRank; ++k)
    sum += eb.data<float>()[(e * kOut + o) * kRank + k] * ea.data<float>()[(e * kRank + k) * kIn + i];
  EXPECT_FLOAT_EQ(experts.data<float>()[(e * kOut + o) * kIn + i], static_cast<float>(sum));
}

TEST(PeftAdapter, BaseWeightNames) {
  EXPECT_EQ(lora_base_weight_name("model.layers.0.self_attn.q_proj.lora_A.weight"),
            "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(lora_base_weight_name("model.layers.0.mlp.experts.gate_up_proj.lora_B.weight"),
            "model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(lora_base_weight_name("model.norm.weight"), "");
}

TEST(PeftAdapter, DirectoryHoldsTheSafetensorsAndTheConfig) {
  const std::string dir = ::testing::TempDir() + "/peft_adapter_dir";
  std::filesystem::remove_all(dir);
  write_peft_adapter_dir(dir, moe_adapters(false), kExperts, LoraConfig{.rank = kRank}, "base", false);
  SafetensorsReader reader(dir + "/adapter_model.safetensors");
  EXPECT_EQ(reader.entries().size(), 6u);
  EXPECT_TRUE(reader.contains("base_model.model.model.layers.0.mlp.experts.lora_B.weight"));
  EXPECT_EQ(read_json_file(dir + "/adapter_config.json")["peft_type"], "LORA");
  EXPECT_THROW(write_peft_adapter_dir(dir, moe_adapters(false), kExperts, LoraConfig{.rank = kRank}, "base", false),
               InputError);
  std::filesystem::remove_all(dir);
}
