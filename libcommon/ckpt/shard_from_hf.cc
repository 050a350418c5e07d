// Sharding HF weights: rank files are written one after the other, each reading only the rows its shards cover.
#include "ckpt/shard_from_hf.h"

#include <filesystem>
#include <memory>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/model_param_list.h"
#include "ckpt/rank_shard_file.h"
#include "ckpt/staged_directory.h"
#include "core/tool.h"
#include "io/json_file.h"
#include "model/hf_loader.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "parallel/shard_spec.h"
#include "train/train_config.h"
#include "train/train_model.h"

namespace veomni {

namespace {

// The layout checks veomni-train makes, with the tool's flag names.
void check_layout(const MeshShape& mesh, const ModelConfig& model) {
  VEOMNI_INPUT_CHECK(mesh.world >= 1 && mesh.ulysses >= 1 && mesh.ep >= 1, "--world, --ulysses and --ep must be >= 1");
  VEOMNI_INPUT_CHECK(mesh.world % mesh.ulysses == 0, "--ulysses {} does not divide --world {}", mesh.ulysses,
                     mesh.world);
  VEOMNI_INPUT_CHECK(mesh.world % mesh.ep == 0, "--ep {} does not divide --world {}", mesh.ep, mesh.world);
  TrainConfig config;
  config.train.accelerator.ulysses_size = mesh.ulysses;
  config.train.accelerator.ep_size = mesh.ep;
  validate_parallel_layout(config, model);
}

// The head of an HF directory: its config.json's architectures (a ...ForSequenceClassification or
// ...ForTokenClassification of one label), or, without that key, its tensors (score.weight, with score.bias).
ModelHead hf_directory_head(const std::string& hf_dir, const WeightSource& source) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(hf_dir) ? (fs::path(hf_dir) / "config.json").string() : hf_dir;
  const nlohmann::json config = read_json_file(file);
  const ModelHead by_tensors = !source.contains("score.weight") ? ModelHead::LanguageModel
                               : source.contains("score.bias")  ? ModelHead::TokenValue
                                                                : ModelHead::SequenceReward;
  const ModelHead head = hf_head_of_architectures(config, by_tensors);
  if (head != ModelHead::LanguageModel) check_hf_single_label(config, file);
  return head;
}

// Rank r's padded shard of a parameter, reading from the source only the rows its elements lie in.
Tensor read_rank_shard(const WeightSource& source, const Parameter& param, const MeshShape& mesh, int64_t rank) {
  const ShardSpec spec = shard_spec_for(param.shape, param.is_expert, mesh, rank);
  const FlatRange range = full_tensor_range(spec, param.shape);
  Tensor shard = Tensor::zeros({spec.shard_numel}, DType::F32);
  if (range.begin == range.end) return shard;  // more ranks than elements: this one holds only padding
  const int64_t row_numel = shape_numel(param.shape) / param.shape.at(0);
  Parameter rows = param;
  rows.local_begin = range.begin / row_numel;
  rows.local_end = (range.end + row_numel - 1) / row_numel;
  const Tensor slab = read_hf_parameter(source, rows, DType::F32);
  const int64_t offset = range.begin - rows.local_begin * row_numel;
  shard.slice(0, range.end - range.begin)
      .copy_from(slab.view({slab.numel()}).slice(offset, offset + range.end - range.begin));
  return shard;
}

}  // namespace

ShardFromHfSummary shard_hf_checkpoint(const std::string& hf_dir, const std::string& out_dir,
                                       const ShardFromHfOptions& options) {
  const ModelConfig model_config = load_model_config(hf_dir);
  check_layout(options.mesh, model_config);
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!std::filesystem::equivalent(out_dir, hf_dir, ec), "--out '{}' is the model being read",
                     out_dir);
  const HfCheckpointSource source(hf_dir);
  const ModelHead head = hf_directory_head(hf_dir, source);
  ModelParamList model(model_config, head);
  const MeshShape& mesh = options.mesh;
  StagedDirectory staged(out_dir, options.overwrite);

  CheckpointMetadata metadata;
  metadata.producer = version_text("veomni-ckpt-shard");
  metadata.mesh = mesh;
  metadata.model_config = model_config;  // position: step 0, zero moments, no data consumed
  metadata.head = head;
  for (const auto& p : model.model->params().all())
    metadata.params.push_back(checkpoint_param(p->name, p->shape, p->is_expert, mesh));

  ShardFromHfSummary summary;
  summary.out_dir = out_dir;
  summary.model_type = model_config.model_type;
  summary.head = head;
  summary.parameters = static_cast<int64_t>(metadata.params.size());
  summary.elements = model.model->params().num_elements();
  // One rank file open at a time, each reading only the rows it holds: memory stays that of one shard.
  for (int64_t r = 0; r < mesh.world; ++r) {
    const std::string file = rank_file_name(r, mesh.world);
    RankShardWriter writer(staged.file(file), r, mesh, metadata.position);
    for (const auto& p : model.model->params().all()) {
      const Tensor shard = read_rank_shard(source, *p, mesh, r);
      const Tensor zeros = Tensor::zeros(shard.shape(), DType::F32);
      writer.write(ShardField::Master, p->name, shard);
      writer.write(ShardField::ExpAvg, p->name, zeros);
      writer.write(ShardField::ExpAvgSq, p->name, zeros);
    }
    metadata.rank_files.push_back(writer.finish());
    summary.bytes += metadata.rank_files.back().bytes;
  }
  write_checkpoint_metadata(metadata, staged.temp_path());
  staged.commit();
  return summary;
}

}  // namespace veomni
