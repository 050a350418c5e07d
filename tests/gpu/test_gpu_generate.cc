// KV-cache generation on the GPU: greedy decoding in bf16 on CUDA chooses the same first 16 tokens as the CPU fp32
// reference on the toy models (dense and MoE, 3 prompts of different lengths in one batch); the attention_kv_cache
// kernel against the CPU op in f32 and bf16.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "gpu_test_util.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/model_config.h"

using namespace veomni;

namespace {

class GpuGenerate : public gpu_test::CudaTest {};

std::unique_ptr<CausalLM> toy_on(const ModelConfig& config, Device device, DType dtype) {
  ModelOptions options;
  options.device = device;
  options.compute_dtype = dtype;
  return std::make_unique<CausalLM>(config, options);
}

void expect_bf16_gpu_matches_cpu(const std::string& config_dir) {
  ModelConfig config = load_model_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/" + config_dir);
  config.initializer_range = 0.2;  // logits of different tokens far apart, as in the generation fixtures
  auto cpu = toy_on(config, Device::cpu(), DType::F32);
  cpu->init_weights(17);
  auto gpu = toy_on(config, Device::cuda(0), DType::BF16);
  const auto& from = cpu->params().all();
  const auto& to = gpu->params().all();
  ASSERT_EQ(from.size(), to.size());
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i]->value.defined()) to[i]->value.copy_from(from[i]->value.to_dtype(DType::BF16));

  std::mt19937 rng(5);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t len : {6, 2, 11}) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < len; ++i)
      p.push_back(static_cast<int64_t>(rng() % static_cast<uint32_t>(config.vocab_size)));
    prompts.push_back(p);
  }
  GenerateOptions options;
  options.max_new_tokens = 16;
  const std::vector<Generation> want = Generator(*cpu, options).generate(prompts, 0);
  const std::vector<Generation> got = Generator(*gpu, options).generate(prompts, 0);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "prompt " << i;
}

TEST_F(GpuGenerate, DenseBf16GreedyMatchesCpuFp32) { expect_bf16_gpu_matches_cpu("qwen3_toy"); }

TEST_F(GpuGenerate, MoeBf16GreedyMatchesCpuFp32) { expect_bf16_gpu_matches_cpu("qwen3_moe_toy"); }

TEST_F(GpuGenerate, AttentionKvCacheMatchesCpu) {
  std::mt19937 rng(9);
  const int64_t batch = 3, cache_len = 70, hkv = 2, hq = 8, d = 128, n = 4;
  const std::vector<int32_t> slots = {2, 0, 1, 2}, kv_lens = {70, 1, 3, 37};
  const Tensor q = gpu_test::random_f32({n, hq, d}, rng);
  const Tensor k = gpu_test::random_f32({batch, cache_len, hkv, d}, rng);
  const Tensor v = gpu_test::random_f32({batch, cache_len, hkv, d}, rng);
  for (DType dtype : {DType::F32, DType::BF16}) {
    // The CPU reference reads the same (rounded) inputs.
    const Tensor qr = q.to_dtype(dtype).to_dtype(DType::F32), kr = k.to_dtype(dtype).to_dtype(DType::F32),
                 vr = v.to_dtype(dtype).to_dtype(DType::F32);
    Tensor want = Tensor::empty({n, hq, d}, DType::F32);
    ops::attention_kv_cache(qr, kr, vr, slots, kv_lens, 0.1f, want);
    Tensor out = Tensor::empty({n, hq, d}, dtype, gpu_test::gpu());
    ops::attention_kv_cache(q.to_dtype(dtype).to(gpu_test::gpu()), k.to_dtype(dtype).to(gpu_test::gpu()),
                            v.to_dtype(dtype).to(gpu_test::gpu()), slots, kv_lens, 0.1f, out);
    const std::vector<float> got = out.to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
    const std::vector<float> ref = want.to_float_vector();
    double worst = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(got[i] - ref[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
    }
    EXPECT_LE(worst, gpu_test::rtol_for(dtype) * scale) << dtype_name(dtype);
  }
}

}  // namespace
