// The collective timeout (config value, environment override) and the table of where every world rank runs.
#include "dist/collective_timeout.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

namespace veomni {

namespace {

std::mutex& table_mutex() {
  static std::mutex mutex;
  return mutex;
}
double configured_timeout = kDefaultCollectiveTimeoutSeconds;
std::vector<PeerIdentity>& world_peers() {
  static std::vector<PeerIdentity> peers;
  return peers;
}

double parse_timeout(const char* text, const std::string& source) {
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text, &end);
  VEOMNI_INPUT_CHECK(end != text && *end == '\0' && errno == 0 && std::isfinite(seconds) && seconds >= 0,
                     "{}='{}' is not a number of seconds >= 0 (0 waits forever)", source, text);
  return seconds;
}

}  // namespace

void set_collective_timeout(double seconds) {
  VEOMNI_INPUT_CHECK(std::isfinite(seconds) && seconds >= 0,
                     "train.accelerator.dist_timeout must be a number of seconds >= 0 (0 waits forever), got {}",
                     seconds);
  std::lock_guard<std::mutex> guard(table_mutex());
  configured_timeout = seconds;
}

double collective_timeout_seconds() {
  if (const char* text = std::getenv(kCollectiveTimeoutEnv); text && *text)
    return parse_timeout(text, kCollectiveTimeoutEnv);
  std::lock_guard<std::mutex> guard(table_mutex());
  return configured_timeout;
}

void set_world_peers(std::vector<PeerIdentity> peers) {
  std::lock_guard<std::mutex> guard(table_mutex());
  world_peers() = std::move(peers);
}

std::string describe_world_rank(int world_rank) {
  std::lock_guard<std::mutex> guard(table_mutex());
  const auto& peers = world_peers();
  if (world_rank < 0 || world_rank >= static_cast<int>(peers.size())) return fmt::format("rank {}", world_rank);
  const PeerIdentity& peer = peers[static_cast<size_t>(world_rank)];
  return fmt::format("rank {} (host {}, pid {})", world_rank, peer.host, peer.pid);
}

}  // namespace veomni
