// Private to dist/mpi_*.cc: waiting for a non-blocking MPI collective with a deadline, and the census that names
// the ranks that did not arrive when the deadline passes.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace veomni::mpi_detail {

// Collective: duplicates MPI_COMM_WORLD for census messages and gathers every rank's host and pid. Called by
// mpi_initialize; stop_census by mpi_finalize.
void start_census();
void stop_census();

// Which collective a rank waits in: its name, its group and its sequence number on that group (1, 2, ...).
struct CollectiveId {
  const char* op;
  const std::string& group;
  int64_t seq;
};

// Completes `request`. Tests it first (a collective that is already done costs one MPI_Test), then polls with a
// growing sleep so that a waiting rank does not hold a core. After collective_timeout_seconds() it asks the other
// members of the group (`members`: their world ranks) where they are, prints which ones did not arrive and aborts
// the run on every rank. Returns MPI's error code.
int wait_collective(MPI_Request& request, const CollectiveId& id, const std::vector<int>& members);

}  // namespace veomni::mpi_detail
