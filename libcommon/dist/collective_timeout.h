// How long a rank waits in one collective before it gives up on its peers, and who those peers are (host, pid).
#pragma once
#include <string>
#include <vector>

namespace veomni {

// Default of train.accelerator.dist_timeout (seconds): torch's NCCL process-group default.
inline constexpr double kDefaultCollectiveTimeoutSeconds = 600;
// Overrides the configured timeout when set (seconds; 0 waits forever).
inline constexpr const char* kCollectiveTimeoutEnv = "VEOMNI_COLLECTIVE_TIMEOUT";

// Sets the timeout from the config (seconds, >= 0; 0 waits forever). The environment variable still wins.
void set_collective_timeout(double seconds);
// The timeout in force: VEOMNI_COLLECTIVE_TIMEOUT when set, else the configured value, else the default.
// Throws InputError naming the variable when its value is not a number >= 0.
double collective_timeout_seconds();

// Where a world rank runs, for messages about ranks that stopped answering.
struct PeerIdentity {
  std::string host;
  long long pid = 0;
};
// Filled once by mpi_initialize (collective); empty before.
void set_world_peers(std::vector<PeerIdentity> peers);
// "rank 1 (host h, pid 123)"; just "rank 1" when the rank is unknown.
std::string describe_world_rank(int world_rank);

}  // namespace veomni
