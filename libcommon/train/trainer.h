// The training run: model, data, FSDP/SP/EP, AdamW and the step loop, driven by a TrainConfig under MPI.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "train/train_config.h"

namespace veomni {

struct TrainSummary {
  int64_t steps = 0;           // optimizer steps run by this invocation
  int64_t tokens = 0;          // real (unpadded) tokens processed, all ranks
  double elapsed_seconds = 0;
  double final_loss = 0;
  std::string metrics_path;    // log_dict.json
  double state_bytes_max = 0;  // parameters + gradients + optimizer state held by the largest rank
};

// Runs the whole training described by `config` over the MPI `world` (every rank calls it). Writes the effective
// config, log_dict.json and run_summary.json under train.checkpoint.output_dir. Throws InputError / Error with
// context. For tests of the failure path, the environment variable VEOMNI_FAULT_INJECT="rank=R,step=S" makes rank R
// throw at step S (the other ranks are then waiting in a collective and must be ended by the abort).
TrainSummary run_training(const TrainConfig& config, std::shared_ptr<Communicator> world);

}  // namespace veomni
