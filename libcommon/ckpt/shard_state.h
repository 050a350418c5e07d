// What a rank saves and restores for one parameter: views of the f32 shards FSDP and AdamW keep (nothing copied).
#pragma once
#include <array>
#include <string>

#include "core/tensor.h"

namespace veomni {

// The per-parameter tensors of a checkpoint shard.
enum class ShardField { Master, ExpAvg, ExpAvgSq };
inline constexpr std::array<ShardField, 3> kShardFields = {ShardField::Master, ShardField::ExpAvg,
                                                           ShardField::ExpAvgSq};
// "master", "exp_avg", "exp_avg_sq".
const char* shard_field_name(ShardField field);

struct ParamShardState {
  std::string name;     // HF name
  Shape shape;          // full logical shape
  bool expert = false;  // split over EP groups along dim 0, then FSDP over the ranks holding the same experts
  Tensor master;        // f32 [shard_numel]: this rank's shard (zero padded), as shard_spec_for defines it
  Tensor exp_avg;       // f32 or bf16 (anyprecision_adamw) [shard_numel]; saved as f32 either way
  Tensor exp_avg_sq;    // like exp_avg

  Tensor& field(ShardField f) {
    return f == ShardField::Master ? master : f == ShardField::ExpAvg ? exp_avg : exp_avg_sq;
  }
  const Tensor& field(ShardField f) const {
    return f == ShardField::Master ? master : f == ShardField::ExpAvg ? exp_avg : exp_avg_sq;
  }
};

}  // namespace veomni
