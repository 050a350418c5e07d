// Shard arithmetic: EP splits expert rows over consecutive ranks, FSDP splits the flattened rows evenly (padded).
#include "parallel/shard_spec.h"

#include <algorithm>

namespace veomni {

ShardSpec shard_spec_for(const Shape& full_shape, bool expert, const MeshShape& mesh, int64_t rank) {
  VEOMNI_CHECK(rank >= 0 && rank < mesh.world, "rank {} outside a world of {}", rank, mesh.world);
  ShardSpec s;
  s.expert = expert;
  const int64_t rows = full_shape.empty() ? 1 : full_shape[0];
  const int64_t row_numel = full_shape.empty() ? 1 : shape_numel(full_shape) / std::max<int64_t>(1, rows);
  if (expert) {
    VEOMNI_CHECK(rows % mesh.ep == 0, "{} experts over ep {}", rows, mesh.ep);
    const int64_t ep_rank = rank % mesh.ep;  // EP groups are consecutive ranks
    s.rows_begin = ep_rank * (rows / mesh.ep);
    s.rows_end = s.rows_begin + rows / mesh.ep;
    s.group_size = mesh.world / mesh.ep;  // ranks with the same ep rank, ordered by rank
    s.group_rank = rank / mesh.ep;
  } else {
    s.rows_begin = 0;
    s.rows_end = rows;
    s.group_size = mesh.world;
    s.group_rank = rank;
  }
  s.local_numel = (s.rows_end - s.rows_begin) * row_numel;
  s.shard_numel = (s.local_numel + s.group_size - 1) / s.group_size;
  s.flat_begin = std::min(s.local_numel, s.group_rank * s.shard_numel);
  s.flat_end = std::min(s.local_numel, s.flat_begin + s.shard_numel);
  return s;
}

}  // namespace veomni
