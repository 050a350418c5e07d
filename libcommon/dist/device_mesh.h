// The parallel layout: world = dp_shard x ulysses (SP groups are consecutive ranks), EP groups of ep_size
// consecutive ranks, and the groups each collective runs on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dist/communicator.h"

namespace veomni {

struct MeshShape {
  int64_t world = 1;
  int64_t ulysses = 1;  // sequence-parallel size
  int64_t ep = 1;       // expert-parallel size
  int64_t dp() const { return world / ulysses; }  // data-parallel groups (each reads its own micro-batches)
  std::string describe() const;
};

struct DeviceMesh {
  MeshShape shape;
  int64_t rank = 0;
  int64_t dp_rank() const { return rank / shape.ulysses; }
  int64_t sp_rank() const { return rank % shape.ulysses; }
  int64_t ep_rank() const { return rank % shape.ep; }

  std::shared_ptr<Communicator> world;    // all ranks: FSDP of dense parameters, metrics
  std::shared_ptr<Communicator> sp;       // the ulysses ranks of this data-parallel group
  std::shared_ptr<Communicator> ep;       // the ep ranks that exchange tokens
  std::shared_ptr<Communicator> ep_fsdp;  // ranks holding the same experts: FSDP of expert parameters
};

// Builds the groups over `world` (MPI). Every rank must call it (it is collective).
DeviceMesh build_device_mesh(std::shared_ptr<Communicator> world, int64_t ulysses, int64_t ep);

}  // namespace veomni
