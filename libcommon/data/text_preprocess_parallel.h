// A fork-join loop over indices for the preprocessing tools (tokenization uses every core).
#pragma once
#include <cstddef>
#include <functional>

namespace veomni {

// The number of threads to use when the user asks for `requested` (0: one per hardware thread).
int resolve_threads(int requested);

// Runs fn(i) for every i in [0, n) on up to `threads` threads (the caller's among them), handing out indices one
// by one so uneven items balance. The first exception thrown by fn is rethrown here after all threads stop.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace veomni
