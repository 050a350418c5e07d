// Unit tests of HF weight loading and export: stacked and per-expert names, expert-parallel rows, tied
// embeddings, dtype conversion, and errors naming a missing or mis-shaped tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "io/hf_checkpoint.h"
#include "model/causal_lm.h"
#include "model/hf_loader.h"
#include "model/weight_source.h"
#include "test_model_util.h"

using namespace veomni;
using namespace veomni::test;

namespace {

std::map<std::string, Tensor> exported(CausalLM& model, ExpertNaming naming) {
  std::map<std::string, Tensor> out;
  export_hf_weights(model.params(), naming, [&](const std::string& name, const Tensor& t) {
    EXPECT_EQ(out.count(name), 0u) << name << " exported twice";
    out[name] = t.clone();
  });
  return out;
}

class LoaderExpertLayout final : public ExpertHooks {
 public:
  LoaderExpertLayout(int64_t size, int64_t rank) : size_(size), rank_(rank) {}
  int64_t ep_size() const override { return size_; }
  int64_t ep_rank() const override { return rank_; }

 private:
  int64_t size_, rank_;
};

std::string load_error(CausalLM& model, std::map<std::string, Tensor> tensors) {
  try {
    load_hf_weights(model.params(), TensorMapSource(std::move(tensors), "ckpt-dir"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ModelLoader, StackedAndPerExpertNamesLoadTheSameParameters) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM source(config, ModelOptions{});
  source.init_weights(17);
  const auto stacked = exported(source, ExpertNaming::Stacked);
  const auto per_expert = exported(source, ExpertNaming::PerExpert);
  EXPECT_EQ(stacked.count("model.layers.0.mlp.experts.gate_up_proj"), 1u);
  EXPECT_EQ(per_expert.count("model.layers.0.mlp.experts.gate_up_proj"), 0u);
  ASSERT_EQ(per_expert.count("model.layers.2.mlp.experts.3.up_proj.weight"), 1u);
  EXPECT_EQ(per_expert.at("model.layers.2.mlp.experts.3.up_proj.weight").shape(), (Shape{8, 16}));
  EXPECT_EQ(per_expert.at("model.layers.2.mlp.experts.3.down_proj.weight").shape(), (Shape{16, 8}));
  EXPECT_EQ(per_expert.size(), stacked.size() + 2 * (3 * 4 - 2));  // two sparse layers: 2 stacked -> 12 each
  // Gate rows come first in gate_up: expert 3's up_proj is rows [8, 16) of its slot.
  const Tensor gate_up = stacked.at("model.layers.2.mlp.experts.gate_up_proj");
  EXPECT_EQ(per_expert.at("model.layers.2.mlp.experts.3.up_proj.weight").to_float_vector(),
            gate_up.select(3).slice(8, 16).to_float_vector());
  EXPECT_EQ(per_expert.at("model.layers.2.mlp.experts.3.gate_proj.weight").to_float_vector(),
            gate_up.select(3).slice(0, 8).to_float_vector());

  // The declared layout matches what is exported.
  size_t specs = 0;
  for (const auto& p : source.params().all())
    for (const HfTensorSpec& spec : hf_tensor_specs(p->name, p->shape, ExpertNaming::PerExpert)) {
      ASSERT_EQ(per_expert.count(spec.name), 1u) << spec.name;
      EXPECT_EQ(per_expert.at(spec.name).shape(), spec.shape) << spec.name;
      ++specs;
    }
  EXPECT_EQ(specs, per_expert.size());

  const auto expected = values_of(source);
  for (const auto* tensors : {&stacked, &per_expert}) {
    CausalLM target(config, ModelOptions{});
    load_hf_weights(target.params(), TensorMapSource(*tensors));
    EXPECT_EQ(values_of(target), expected);
  }
}

TEST(ModelLoader, ExpertParallelRankLoadsItsRows) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM source(config, ModelOptions{});
  source.init_weights(23);
  LoaderExpertLayout layout(4, 2);
  ModelOptions options;
  options.hooks.experts = &layout;
  for (ExpertNaming naming : {ExpertNaming::Stacked, ExpertNaming::PerExpert}) {
    CausalLM rank(config, options);
    load_hf_weights(rank.params(), TensorMapSource(exported(source, naming)));
    const Parameter& down = rank.params().at("model.layers.0.mlp.experts.down_proj");
    ASSERT_EQ(down.value.dim(0), 1);
    EXPECT_EQ(down.value.to_float_vector(),
              source.params().at("model.layers.0.mlp.experts.down_proj").value.slice(2, 3).to_float_vector());
  }
}

TEST(ModelLoader, TiedModelsHaveNoLmHeadAndLoad) {
  const ModelConfig config = tiny_dense_config(true);
  CausalLM source(config, ModelOptions{});
  source.init_weights(2);
  auto tensors = exported(source, ExpertNaming::PerExpert);
  EXPECT_EQ(tensors.count("lm_head.weight"), 0u);
  CausalLM target(config, ModelOptions{});
  load_hf_weights(target.params(), TensorMapSource(tensors));
  EXPECT_EQ(values_of(target), values_of(source));

  // An untied model needs lm_head.weight.
  CausalLM untied(tiny_dense_config(false), ModelOptions{});
  EXPECT_NE(load_error(untied, tensors).find("missing tensor 'lm_head.weight'"), std::string::npos);
}

TEST(ModelLoader, Bf16WeightsAreConvertedToTheComputeDtype) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM source(config, ModelOptions{});
  source.init_weights(31);
  std::map<std::string, Tensor> bf16_tensors;
  for (auto& [name, t] : exported(source, ExpertNaming::PerExpert)) bf16_tensors[name] = t.to_dtype(DType::BF16);
  CausalLM target(config, ModelOptions{});
  load_hf_weights(target.params(), TensorMapSource(bf16_tensors));
  for (const auto& p : target.params().all()) {
    EXPECT_EQ(p->value.dtype(), DType::F32);
    const std::vector<float> want = source.params().at(p->name).value.to_dtype(DType::BF16).to_float_vector();
    EXPECT_EQ(p->value.to_float_vector(), want) << p->name;
  }
}

// Parameters in bf16 on the CPU: f32 tensors are rounded into them through the loader's reused buffers, bf16 ones
// read straight in; both give to_dtype's values, stacked and per expert.
TEST(ModelLoader, F32AndBf16TensorsLoadIntoBf16Parameters) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM source(config, ModelOptions{});
  source.init_weights(37);
  ModelOptions bf16_options;
  bf16_options.compute_dtype = DType::BF16;
  for (ExpertNaming naming : {ExpertNaming::Stacked, ExpertNaming::PerExpert})
    for (DType stored : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtype_name(stored)) + (naming == ExpertNaming::Stacked ? " stacked" : " per expert"));
      std::map<std::string, Tensor> tensors;
      for (auto& [name, t] : exported(source, naming)) tensors[name] = t.to_dtype(stored);
      CausalLM target(config, bf16_options);
      load_hf_weights(target.params(), TensorMapSource(tensors));
      for (const auto& p : target.params().all()) {
        ASSERT_EQ(p->value.dtype(), DType::BF16) << p->name;
        EXPECT_EQ(p->value.to_float_vector(),
                  source.params().at(p->name).value.to_dtype(DType::BF16).to_float_vector())
            << p->name;
      }
    }
}

TEST(ModelLoader, MissingOrMisshapedTensorsAreNamed) {
  const ModelConfig config = tiny_moe_config(false);
  CausalLM source(config, ModelOptions{});
  source.init_weights(1);
  CausalLM target(config, ModelOptions{});

  auto missing = exported(source, ExpertNaming::Stacked);
  missing.erase("model.layers.1.self_attn.k_norm.weight");
  EXPECT_NE(load_error(target, missing).find("ckpt-dir: missing tensor 'model.layers.1.self_attn.k_norm.weight'"),
            std::string::npos);

  auto misshaped = exported(source, ExpertNaming::Stacked);
  misshaped["model.layers.0.self_attn.q_proj.weight"] = Tensor::zeros({16, 32}, DType::F32);
  EXPECT_NE(load_error(target, misshaped)
                .find("tensor 'model.layers.0.self_attn.q_proj.weight' has shape [16, 32], the model expects [32, 16]"),
            std::string::npos);

  auto no_expert = exported(source, ExpertNaming::PerExpert);
  no_expert.erase("model.layers.2.mlp.experts.1.down_proj.weight");
  EXPECT_NE(load_error(target, no_expert).find("missing tensor 'model.layers.2.mlp.experts.1.down_proj.weight'"),
            std::string::npos);

  auto no_experts_at_all = exported(source, ExpertNaming::Stacked);
  no_experts_at_all.erase("model.layers.0.mlp.experts.gate_up_proj");
  const std::string message = load_error(target, no_experts_at_all);
  EXPECT_NE(message.find("'model.layers.0.mlp.experts.gate_up_proj'"), std::string::npos) << message;
  EXPECT_NE(message.find("'model.layers.0.mlp.experts.0.gate_proj.weight'"), std::string::npos) << message;

  auto bad_expert = exported(source, ExpertNaming::PerExpert);
  bad_expert["model.layers.0.mlp.experts.2.gate_proj.weight"] = Tensor::zeros({8, 15}, DType::F32);
  EXPECT_NE(load_error(target, bad_expert).find("has shape [8, 15], the model expects [8, 16]"), std::string::npos);

  auto integer = exported(source, ExpertNaming::Stacked);
  integer["model.norm.weight"] = Tensor::zeros({16}, DType::I32);
  EXPECT_NE(load_error(target, integer).find("'model.norm.weight' has dtype i32"), std::string::npos);
}

// The exporter's layout declared up front, written through HfCheckpointWriter in several shards, read back through
// HfCheckpointSource: the round trip a merge followed by a load makes.
TEST(ModelLoader, RoundTripThroughAShardedHfDirectory) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("veomni_model_loader_{}", ::getpid());
  fs::remove_all(dir);
  const ModelConfig config = tiny_moe_config(true);
  CausalLM source(config, ModelOptions{});
  source.init_weights(77);
  {
    HfCheckpointWriter writer(dir.string(), 8192);
    for (const auto& p : source.params().all())
      for (const HfTensorSpec& spec : hf_tensor_specs(p->name, p->shape, ExpertNaming::PerExpert))
        writer.declare(spec.name, DType::BF16, spec.shape);
    export_hf_weights(source.params(), ExpertNaming::PerExpert,
                      [&](const std::string& name, const Tensor& t) { writer.write(name, t.to_dtype(DType::BF16)); });
    writer.finish();
    EXPECT_GT(writer.shard_files().size(), 1u);
  }
  CausalLM target(config, ModelOptions{});
  const HfCheckpointSource checkpoint(dir.string());
  EXPECT_FALSE(checkpoint.contains("lm_head.weight"));
  load_hf_weights(target.params(), checkpoint);
  for (const auto& p : target.params().all())
    EXPECT_EQ(p->value.to_float_vector(),
              source.params().at(p->name).value.to_dtype(DType::BF16).to_float_vector())
        << p->name;
  fs::remove_all(dir);
}
