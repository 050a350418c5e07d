// NCCL backend of Communicator: CUDA tensors move through NCCL on the compute stream (the *_async collectives on the
// communication stream, by the rules in kernels/cuda/runtime.h); host vectors and CPU tensors go through the MPI
// communicator it was built from (the unique id also travels through MPI).
#pragma once
#include <memory>

#include "dist/communicator.h"
#include "dist/device_mesh.h"

namespace veomni {

// Whether this build has the NCCL backend.
bool nccl_available();
// A communicator over the same ranks as `mpi_group` that sends CUDA tensors with NCCL (collective: every rank of the
// group calls it). Throws when the build has no CUDA.
std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> mpi_group);

// The same mesh with every group (world, sp, ep, ep_fsdp) on NCCL; collective over the world.
DeviceMesh with_nccl_groups(const DeviceMesh& mesh);

}  // namespace veomni
