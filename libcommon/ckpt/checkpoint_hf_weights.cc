// A checkpoint's HF directory by the merge tool's code.
#include "ckpt/checkpoint_hf_weights.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "ckpt/checkpoint_reader.h"
#include "ckpt/merge_adapters.h"
#include "ckpt/merge_to_hf.h"
#include "ckpt/staged_directory.h"

namespace veomni {

std::string write_checkpoint_hf_weights(const std::string& checkpoint_dir) {
  const std::string out = (std::filesystem::path(checkpoint_dir) / kHfWeightsDir).string();
  MergeOptions options;  // veomni-ckpt-merge's defaults
  options.overwrite = true;
  remove_temporaries(checkpoint_dir);  // an hf_ckpt left half-written by a killed run
  const bool adapter = CheckpointReader(checkpoint_dir).is_adapter();
  return adapter ? merge_adapter_checkpoint_to_hf(checkpoint_dir, out, options).out_dir
                 : merge_checkpoint_to_hf(checkpoint_dir, out, options).out_dir;
}

void save_checkpoint_hf_weights(Communicator& world, const std::string& checkpoint_dir) {
  if (world.rank() == 0) {
    const auto begin = std::chrono::steady_clock::now();
    const std::string dir = write_checkpoint_hf_weights(checkpoint_dir);
    spdlog::info("checkpoint: HF weights in {} ({:.2f}s)", dir,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
  world.barrier();
}

}  // namespace veomni
