// The HuggingFace fixtures on the GPU: the CUDA model in fp32 (same tolerance as the CPU reference) and in bf16
// mixed precision (bf16 parameters/activations, f32 gradients), against transformers' fp32 numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/common/hf_fixture.h"
#include "io/safetensors.h"
#include "kernels/cuda/runtime.h"
#include "model/causal_lm.h"
#include "model/hf_loader.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "train/loss_scale.h"

using namespace veomni;

namespace {

struct Tolerances {
  double logits;  // max |diff| / max |ref| over the tensor
  double loss;    // relative
  double grads;   // max |diff| / max |ref| per parameter
};
// fp32 on the GPU must match as the CPU reference does. bf16: inputs and weights rounded to 8 mantissa bits
// (relative 2^-9 each) through 2 layers: a few 1e-3 on logits, gradients of the small toy a few 1e-2.
constexpr Tolerances kF32{1e-4, 1e-5, 1e-4};
constexpr Tolerances kBf16{3e-2, 5e-3, 1e-1};

using Fixture = veomni::testing::HfFixture;
using veomni::testing::load_hf_fixture;
using veomni::testing::relative_error;

void check_on_gpu(const std::string& name, DType dtype, const Tolerances& tol) {
  if (cuda_rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  cuda_rt::initialize(0);
  const Fixture f = load_hf_fixture(name);
  ModelOptions options;
  options.device = Device::cuda(0);
  options.compute_dtype = dtype;
  CausalLM model(f.config, options);
  model.params().materialize_all(options.device, dtype);
  load_hf_weights(model.params(), HfCheckpointSource(f.dir + "/model"));
  SafetensorsReader expected(f.dir + "/expected.safetensors");

  Tensor logits;
  SftPass pass = model.forward(f.batch, true, &logits);
  const ForwardStats stats = pass.stats;
  StepLossScale scale;
  scale.global_valid_tokens = f.batch.valid_tokens;
  scale.aux_loss_coef = f.config.is_moe() ? f.config.router_aux_loss_coef : 0.0;
  const double logits_err = relative_error(logits, expected.read("logits"));
  const double loss = scale.total_loss(stats.ce_sum, stats.aux_loss);
  const double loss_ref = f.expected["loss"].get<double>();
  EXPECT_LE(logits_err, tol.logits) << name;
  EXPECT_NEAR(loss, loss_ref, tol.loss * loss_ref) << name;

  model.params().zero_grads();
  model.backward(std::move(pass), scale.ce_grad_scale(), scale.aux_grad_scale());
  double worst = 0;
  std::string worst_name;
  for (const auto& p : model.params().all()) {
    const double err = relative_error(p->grad, expected.read("grad." + p->name));
    EXPECT_LE(err, tol.grads) << name << " gradient of " << p->name;
    if (err > worst) worst = err, worst_name = p->name;
  }
  std::printf("[%s %s] logits rel err %.3g, loss %.9g vs %.9g, worst grad rel err %.3g (%s)\n", name.c_str(),
              dtype_name(dtype), logits_err, loss, loss_ref, worst, worst_name.c_str());
}

}  // namespace

TEST(GpuHfFixtures, DenseF32) { check_on_gpu("qwen3_toy", DType::F32, kF32); }
TEST(GpuHfFixtures, TiedDenseF32) { check_on_gpu("qwen3_toy_tied", DType::F32, kF32); }
TEST(GpuHfFixtures, MoeF32) { check_on_gpu("qwen3_moe_toy", DType::F32, kF32); }
TEST(GpuHfFixtures, DenseBf16) { check_on_gpu("qwen3_toy", DType::BF16, kBf16); }
TEST(GpuHfFixtures, TiedDenseBf16) { check_on_gpu("qwen3_toy_tied", DType::BF16, kBf16); }
TEST(GpuHfFixtures, MoeBf16) { check_on_gpu("qwen3_moe_toy", DType::BF16, kBf16); }
