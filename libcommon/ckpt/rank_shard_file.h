// One rank's checkpoint shard, an HDF5 file: the rank's fp32 master weights and AdamW moments of every parameter
// (its padded FSDP shards, checksummed) and the training position. Written once and synced; validated on open and
// read by element ranges (resharding reads parts of several ranks' files).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/shard_state.h"
#include "core/tensor.h"
#include "io/hdf5_file.h"

namespace veomni {

class RankShardWriter {
 public:
  // Creates `path` (truncating) with the identity attributes and the training position.
  RankShardWriter(std::string path, int64_t rank, const MeshShape& mesh, const TrainingPosition& position);
  // The rank's f32 shard of parameter `name` (1-D, shard_numel elements).
  void write(ShardField field, const std::string& name, const Tensor& shard);
  // Closes and syncs the file; returns its entry for metadata.json (name, size, content checksum).
  RankFileInfo finish();

 private:
  std::string path_;
  h5::File file_;
  std::array<h5::Group, kShardFields.size()> groups_;  // one per ShardField
};

class RankShardReader {
 public:
  // Opens `path` and checks that it is rank `rank` of `mesh` at `global_step`; errors name the file.
  RankShardReader(std::string path, int64_t rank, const MeshShape& mesh, int64_t global_step);

  const std::string& path() const { return path_; }
  TrainingPosition position() const;
  // count elements from `offset` of the shard of `name`, whose dataset must hold shard_numel f32 elements.
  // Corrupt data (checksum mismatch) or a missing dataset is an InputError naming the file and the dataset.
  void read(ShardField field, const std::string& name, int64_t shard_numel, int64_t offset, int64_t count,
            float* out) const;
  // The parameter names stored under a field, sorted.
  std::vector<std::string> names(ShardField field) const;

 private:
  std::string path_;
  h5::File file_;
};

}  // namespace veomni
