// Device mesh validation and group construction.
#include "dist/device_mesh.h"

namespace veomni {

std::string MeshShape::describe() const {
  return fmt::format("world {} = dp {} x ulysses {}, ep {}", world, dp(), ulysses, ep);
}

DeviceMesh build_device_mesh(std::shared_ptr<Communicator> world, int64_t ulysses, int64_t ep) {
  VEOMNI_CHECK(ulysses >= 1 && ep >= 1 && world->size() % ulysses == 0 && world->size() % ep == 0,
               "mesh ulysses {} ep {} over {} ranks (validate the config first)", ulysses, ep, world->size());
  DeviceMesh mesh;
  mesh.shape = MeshShape{world->size(), ulysses, ep};
  mesh.rank = world->rank();
  const int r = world->rank();
  mesh.sp = mpi_split(*world, static_cast<int>(mesh.dp_rank()), r, "sp");
  mesh.ep = mpi_split(*world, static_cast<int>(r / ep), r, "ep");
  mesh.ep_fsdp = mpi_split(*world, static_cast<int>(mesh.ep_rank()), r, "ep_fsdp");
  mesh.world = std::move(world);
  return mesh;
}

}  // namespace veomni
