// Saving: rank shard files in a temporary directory, then metadata, rename, `latest`, rotation (rank 0).
#include "ckpt/checkpoint_save.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "ckpt/checkpoint_dir.h"
#include "ckpt/rank_shard_file.h"
#include "ckpt/staged_directory.h"
#include "io/atomic_file.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

// Rank 0 creates the temporary directory and tells the others its name (its pid is in it).
std::string create_temporary_dir(Communicator& world, const std::string& final_dir) {
  std::string temp;
  if (world.rank() == 0) {
    temp = atomic_temp_path(final_dir);
    std::error_code ec;
    fs::create_directories(fs::path(final_dir).parent_path(), ec);
    fs::remove_all(temp, ec);
    fs::create_directory(temp, ec);
    VEOMNI_INPUT_CHECK(!ec, "cannot create checkpoint directory '{}': {}", temp, ec.message());
  }
  world.broadcast(temp, 0);
  return temp;
}

// A save that failed (a full disk, a bad path) leaves nothing behind: the run is ending with the error, so whichever
// rank failed removes the shared temporary directory (a killed writer's is removed at the next start instead).
void remove_failed_save(const std::string& temp) {
  std::error_code ec;
  fs::remove_all(temp, ec);
  if (ec) spdlog::warn("checkpoint: cannot remove the unfinished '{}': {}", temp, ec.message());
}

RankFileInfo write_rank_file(const CheckpointSaveRequest& request, int64_t rank, const std::string& dir,
                         const std::vector<ParamShardState>& shards) {
  RankShardWriter writer((fs::path(dir) / rank_file_name(rank, request.mesh.world)).string(), rank, request.mesh,
                         request.position);
  for (size_t i = 0; i < shards.size(); ++i) {
    if (request.fault_point && i == shards.size() / 2) request.fault_point("rank_file");
    for (ShardField field : kShardFields) writer.write(field, shards[i].name, shards[i].field(field));
  }
  return writer.finish();
}

CheckpointMetadata metadata_for(const CheckpointSaveRequest& request, const std::vector<ParamShardState>& shards,
                                const std::vector<RankFileInfo>& rank_files) {
  CheckpointMetadata m;
  m.producer = request.producer;
  m.mesh = request.mesh;
  m.position = request.position;
  m.data_plan = request.data_plan;
  m.model_config = request.model_config;
  m.head = request.head;
  m.hf_config_json = request.hf_config_json;
  m.train_config_yaml = request.train_config_yaml;
  m.tokenizer_path = request.tokenizer_path;
  m.adapter = request.adapter;
  m.optimizer_type = request.optimizer_type;
  for (const ParamShardState& s : shards) {
    m.params.push_back(checkpoint_param(s.name, s.shape, s.expert, request.mesh));
    VEOMNI_CHECK(m.params.back().shard_numel == s.master.numel(), "'{}': shard of {} elements, the spec says {}",
                 s.name, s.master.numel(), m.params.back().shard_numel);
  }
  m.rank_files = rank_files;
  m.has_metrics = request.metrics != nullptr;
  return m;
}

// Rank 0: everything after the shard files, in the order that keeps a crash harmless.
void commit_checkpoint(const CheckpointSaveRequest& request, const std::vector<ParamShardState>& shards,
                       const std::vector<RankFileInfo>& rank_files, const std::string& temp,
                       const std::string& final_dir) {
  const CheckpointMetadata metadata = metadata_for(request, shards, rank_files);
  if (request.metrics) {
    VEOMNI_CHECK(static_cast<int64_t>(request.metrics->num_steps()) == request.position.global_step,
                 "metrics log of {} steps saved at step {}", request.metrics->num_steps(),
                 request.position.global_step);
    request.metrics->write((fs::path(temp) / kCheckpointMetricsFile).string());
  }
  write_checkpoint_metadata(metadata, temp);  // last inside: its presence marks a complete directory
  fsync_path(temp);
  replace_directory(temp, final_dir);
  if (request.fault_point) request.fault_point("commit");
  const std::string dir = checkpoints_dir(request.output_dir);
  write_latest(dir, request.position.global_step);
  for (const std::string& removed : rotate_checkpoints(dir, request.save_total_limit, request.position.global_step))
    spdlog::info("checkpoint: removed {} (train.checkpoint.save_total_limit {})", removed, request.save_total_limit);
}

}  // namespace

std::string save_checkpoint(Communicator& world, const CheckpointSaveRequest& request,
                            const std::vector<ParamShardState>& shards) {
  VEOMNI_CHECK(world.size() == request.mesh.world, "saving a mesh of {} over {} ranks", request.mesh.world,
               world.size());
  const std::string final_dir =
      (fs::path(checkpoints_dir(request.output_dir)) / checkpoint_dir_name(request.position.global_step)).string();
  const std::string temp = create_temporary_dir(world, final_dir);
  try {
    const RankFileInfo mine = write_rank_file(request, world.rank(), temp, shards);
    std::vector<int64_t> sizes_and_checksums;
    world.allgather({static_cast<int64_t>(mine.bytes), static_cast<int64_t>(mine.checksum)}, sizes_and_checksums);
    if (world.rank() == 0) {
      std::vector<RankFileInfo> rank_files;
      for (int64_t r = 0; r < request.mesh.world; ++r)
        rank_files.push_back({rank_file_name(r, request.mesh.world),
                              static_cast<uint64_t>(sizes_and_checksums[static_cast<size_t>(2 * r)]),
                              static_cast<uint64_t>(sizes_and_checksums[static_cast<size_t>(2 * r + 1)])});
      commit_checkpoint(request, shards, rank_files, temp, final_dir);
    }
  } catch (...) {
    remove_failed_save(temp);
    throw;
  }
  world.barrier();
  return final_dir;
}

}  // namespace veomni
