// Test support: checks a veomni-ckpt-merge output of a text model against transformers' numbers for it. Our float32
// forward on DEVICE (cpu or cuda) of the token batch of the HF fixture tests/fixtures/hf/qwen3_moe_toy, with the
// merged weights, must give transformers' logits (relative 1e-4) and loss (relative 1e-4), as recorded by
// scripts/gen_hf_fixtures.py --check-merged. Run by tests/gpu/merged_in_transformers.sh.
//
// Usage: merged_logits_check MERGED_DIR [DEVICE=cuda]
//   MERGED_DIR  holds model/ (what veomni-ckpt-merge wrote), expected.safetensors (tensor "logits") and
//               expected.json ("loss")
// Exit status: 0 when both match, 1 when one does not (or on another error), 2 on bad input.
#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/tool.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/hf_loader.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "tests/common/hf_fixture.h"
#include "train/loss_scale.h"

namespace {

using namespace veomni;

constexpr const char* kTool = "merged_logits_check";
constexpr double kTolerance = 1e-4;

int run(int argc, char** argv) {
  VEOMNI_INPUT_CHECK(argc == 2 || argc == 3, "usage: {} MERGED_DIR [cpu|cuda]", kTool);
  const std::string dir = argv[1];
  const std::string device_name = argc == 3 ? argv[2] : "cuda";
  VEOMNI_INPUT_CHECK(device_name == "cpu" || device_name == "cuda", "unknown device '{}' (cpu or cuda)",
                     device_name);
  const Device device = device_name == "cuda" ? Device::cuda(0) : Device::cpu();
  if (device.is_cuda()) {
    VEOMNI_INPUT_CHECK(backend::cuda_device_count() > 0, "no GPU (the build has CUDA: {})",
                       backend::cuda_built());
    backend::use_cuda_device(0);
  }
  // The fixture's token batch; the weights are the merged ones.
  const testing::HfFixture batch_fixture = testing::load_hf_fixture("qwen3_moe_toy");
  const ModelConfig config = load_model_config(dir + "/model");
  ModelOptions options;
  options.device = device;
  CausalLM model(config, options);
  model.params().materialize_all(options.device, DType::F32);
  load_hf_weights(model.params(), HfCheckpointSource(dir + "/model"));
  Tensor logits;
  const ForwardStats stats = model.forward(batch_fixture.batch, false, &logits).stats;
  const double err = testing::relative_error(logits, SafetensorsReader(dir + "/expected.safetensors").read("logits"));
  StepLossScale scale;
  scale.global_valid_tokens = batch_fixture.batch.valid_tokens;
  scale.aux_loss_coef = config.router_aux_loss_coef;
  const double loss = scale.total_loss(stats.ce_sum, stats.aux_loss);
  const double expected = read_json_file(dir + "/expected.json").at("loss").get<double>();
  const double loss_err = std::abs(loss - expected) / std::abs(expected);
  std::printf("merged %s (%lld parameters) on %s: logits rel err %.3g, loss %.9g vs transformers %.9g (rel %.3g)\n",
              config.model_type.c_str(), static_cast<long long>(model.params().num_elements()),
              device_name.c_str(), err, loss, expected, loss_err);
  if (err <= kTolerance && loss_err <= kTolerance) return 0;
  std::fprintf(stderr, "%s: the merged model does not match transformers (tolerance %g)\n", kTool, kTolerance);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  return run_tool(kTool, [&] { return run(argc, argv); });
}
