// Reads a checkpoint directory: its metadata, its rank files (all checked for presence and size on open, each
// opened when first needed) and any element range of any parameter's full tensor, assembled from whichever rank
// shards hold it. Resuming under another layout, merging to HuggingFace and the tests all read through it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/rank_shard_file.h"
#include "core/tensor.h"
#include "parallel/shard_spec.h"
#include "train/metrics_log.h"

namespace veomni {

// The elements [begin, end) of a parameter's flattened full tensor that a shard spec's rank holds, in the order
// its shard stores them (an FSDP shard of an expert-parallel slab is still one contiguous range of the full tensor).
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
};
FlatRange full_tensor_range(const ShardSpec& spec, const Shape& full_shape);

class CheckpointReader {
 public:
  // `dir` is a checkpoint directory (global_step_N). Validates metadata.json and that every rank file exists with
  // the size metadata.json recorded (a missing or truncated file is an InputError naming it). A rank file's
  // content checksum is verified when it is first read (a damaged file is an InputError naming it).
  explicit CheckpointReader(std::string dir);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& dir() const { return dir_; }
  const CheckpointMetadata& metadata() const { return metadata_; }
  // An adapter (LoRA) checkpoint: it holds the trainable parameters only, not a whole model.
  bool is_adapter() const { return metadata_.adapter.has_value(); }
  // InputError when the checkpoint is an adapter checkpoint, for a use (`purpose`, e.g. "merging to HuggingFace")
  // that needs every weight of the model; the message names the base it was trained on.
  void require_full_model(const std::string& purpose) const;
  // Index into metadata().params; InputError naming the checkpoint when absent.
  size_t param_index(const std::string& name) const;
  // Elements [begin, end) of the flattened full tensor of parameter `index` into out (f32).
  void read_range(size_t index, ShardField field, int64_t begin, int64_t end, float* out) const;
  // The whole tensor, f32 in the parameter's full shape (memory: that one tensor).
  Tensor read_full(size_t index, ShardField field) const;
  // Closes the rank files opened so far (they reopen when read again). HDF5 keeps the metadata of every dataset
  // read in memory while its file is open: a merge closes them after each parameter to stay bounded.
  void close_files();
  // The run's metrics up to the checkpoint's step (none when it stores no log). Non-finite values are kept.
  MetricsLog metrics() const;
  // The rank file of `rank`, opened (and its checksum verified) on first use.
  const RankShardReader& rank_file(int64_t rank) const;

 private:

  std::string dir_;
  CheckpointMetadata metadata_;
  mutable std::vector<std::unique_ptr<RankShardReader>> files_;  // opened on first use
  mutable std::vector<bool> verified_;                          // checksum checked
};

}  // namespace veomni
