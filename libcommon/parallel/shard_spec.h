// Which elements of a parameter a rank holds under FSDP (+EP): the one definition that FSDP, checkpoint save,
// resume with resharding, merge and shard all use.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "dist/device_mesh.h"

namespace veomni {

struct ShardSpec {
  bool expert = false;       // sharded over ep_fsdp (ranks with the same ep rank), else over the world
  int64_t group_size = 1;    // ranks sharing the rows below
  int64_t group_rank = 0;    // this rank's index among them
  int64_t rows_begin = 0;    // rows of dim 0 this rank's group holds (EP: its experts; else all rows)
  int64_t rows_end = 0;
  int64_t local_numel = 0;   // elements of those rows
  int64_t shard_numel = 0;   // ceil(local_numel / group_size): every rank's padded shard length
  int64_t flat_begin = 0;    // this rank's elements [flat_begin, flat_end) of the flattened rows
  int64_t flat_end = 0;      //   (flat_end - flat_begin <= shard_numel; the rest of the shard is zero padding)
};

// full_shape: the parameter's logical shape; expert: [E, ...] split over EP groups along dim 0.
ShardSpec shard_spec_for(const Shape& full_shape, bool expert, const MeshShape& mesh, int64_t rank);

}  // namespace veomni
