// Model config, device, mesh with its SP/EP hooks, model options and model construction shared by the run tools.
#include "train/run_setup.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "dist/nccl_communicator.h"
#include "kernels/backend.h"

namespace veomni {

RunModelConfig read_run_model_config(const std::string& config_path) {
  RunModelConfig out;
  if (is_multimodal_config(config_path)) {
    out.thinker = load_thinker_config(config_path);
    out.text = out.thinker->text;
    out.hf_config_json = config_json_text(config_path);
  } else {
    out.text = load_model_config(config_path);
  }
  return out;
}

Device select_run_device(const std::string& want, const Communicator& world, const std::string& tool) {
  const int gpus = backend::cuda_device_count();
  if (want == "cpu" || (want == "auto" && gpus == 0)) return Device::cpu();
  VEOMNI_INPUT_CHECK(gpus > 0, "rank {}: train.device is cuda but {} (hint: --train.device cpu)", world.rank(),
                     backend::cuda_built() ? "no GPU is visible" : "this build has no CUDA backend");
  const int local = mpi_local_rank();
  VEOMNI_INPUT_CHECK(local < gpus,
                     "rank {} is process {} on its node, which has {} visible GPU(s): {} runs one process "
                     "per GPU (hint: mpirun -np <= GPUs per node, or --train.device cpu)",
                     world.rank(), local, gpus, tool);
  backend::use_cuda_device(local);
  return Device::cuda(local);
}

RunParallel build_run_parallel(std::shared_ptr<Communicator> world, const AcceleratorArgs& accelerator,
                               const ModelConfig& text, Device device) {
  RunParallel out;
  out.mesh = build_device_mesh(std::move(world), accelerator.ulysses_size, accelerator.ep_size);
  if (device.is_cuda()) out.mesh = with_nccl_groups(out.mesh);
  if (accelerator.ulysses_size > 1) out.ulysses = std::make_unique<UlyssesHooks>(out.mesh.sp);
  if (accelerator.ep_size > 1) out.expert_parallel = std::make_unique<ExpertParallel>(out.mesh.ep, text.num_experts);
  return out;
}

ModelOptions run_model_options(const TrainConfig& config, Device device, const RunParallel& parallel) {
  ModelOptions options;
  options.device = device;
  options.compute_dtype = device.is_cpu() ? DType::F32 : config.compute_dtype();
  if (device.is_cpu() && config.compute_dtype() != DType::F32)
    spdlog::info("CPU backend: computing in float32 (mixed precision applies to the CUDA backend)");
  options.recompute = config.train.gradient_checkpointing.enable;
  options.fp8_linears = config.train.accelerator.fp8;
  if (options.fp8_linears && (device.is_cpu() || options.compute_dtype != DType::BF16))
    throw InputError(fmt::format("train.accelerator.fp8 needs a CUDA device with bf16 compute, but this run computes "
                                 "in {} on {} (train.device auto found no GPU, or this build has no CUDA)",
                                 dtype_name(options.compute_dtype), device.str()));
  options.hooks.sequence = parallel.ulysses.get();
  options.hooks.experts = parallel.expert_parallel.get();
  options.lora_config = config.model.lora_config;
  return options;
}

std::unique_ptr<TrainModel> make_run_model(const RunModelConfig& model, const ModelOptions& options, ModelHead head,
                                           bool freeze_vit, RunModelValues values) {
  ModelOptions built = options;
  built.materialize = values == RunModelValues::Materialised;
  auto out = model.thinker ? std::make_unique<TrainModel>(*model.thinker, built, freeze_vit, head)
                           : std::make_unique<TrainModel>(model.text, built, head);
  if (values == RunModelValues::Deferred)
    out->params().defer_values(options.device);
  else
    out->params().materialize_all(options.device, DType::F32);
  return out;
}

MultimodalCollateOptions run_multimodal_collate_options(const ThinkerConfig& thinker, int64_t max_seq_len,
                                                        const DeviceMesh& mesh) {
  MultimodalCollateOptions collate;
  collate.max_seq_len = max_seq_len;
  collate.sp_size = mesh.shape.ulysses;
  collate.sp_rank = mesh.sp_rank();
  collate.merge_unit = thinker.vision.merge_unit();
  collate.has_audio = thinker.has_audio;
  collate.position_dtype = thinker.has_audio ? DType::F32 : DType::I64;
  collate.vocab_size = thinker.text.vocab_size;
  return collate;
}

}  // namespace veomni
