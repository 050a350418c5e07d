// OverlappedLaunches: a thread-local switch read at each launch of the kernels that can start early.
#include "kernels/overlapped_launches.h"

#include <cstdlib>
#include <cstring>

namespace veomni {
namespace {

thread_local bool overlapping = false;

bool allowed_by_environment() {
  const char* value = std::getenv("VEOMNI_OVERLAP_LAUNCHES");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

}  // namespace

OverlappedLaunches::OverlappedLaunches(bool enable) : previous_(overlapping) {
  overlapping = enable && allowed_by_environment();
}

OverlappedLaunches::~OverlappedLaunches() { overlapping = previous_; }

bool OverlappedLaunches::active() { return overlapping; }

}  // namespace veomni
