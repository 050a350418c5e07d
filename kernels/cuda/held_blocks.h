// Device blocks that the caching allocator keeps out of reuse while a captured CUDA graph that writes them may still
// replay (kernels/step_graph.h): the blocks freed while the graph was recorded.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace veomni::cuda_rt {

using HeldBlocks = std::vector<std::pair<size_t, void*>>;  // (bin size, block)

// From now until stop_holding_freed_blocks(), a freed block goes to `sink` instead of its bin's free list.
void start_holding_freed_blocks(HeldBlocks* sink);
void stop_holding_freed_blocks();
// Returns held blocks to their free lists (once nothing that writes them can run any more) and clears `blocks`.
void release_held_blocks(HeldBlocks& blocks);

}  // namespace veomni::cuda_rt
