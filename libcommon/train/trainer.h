// The training run: model, data, FSDP/SP/EP, AdamW and the step loop, driven by a TrainConfig under MPI.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "train/train_config.h"

namespace veomni {

struct TrainSummary {
  int64_t steps = 0;           // optimizer steps run by this invocation
  int64_t global_step = 0;     // optimizer steps of the whole run, those before a resume included
  std::string resumed_from;    // checkpoint directory this invocation resumed from ("" = fresh start)
  std::string last_checkpoint; // checkpoint directory saved last by this invocation ("" = none)
  std::string stopped_by;      // "SIGTERM" / "SIGINT" when a signal stopped the run early (after a checkpoint)
  int64_t tokens = 0;          // real (unpadded) tokens processed, all ranks
  double elapsed_seconds = 0;
  double final_loss = 0;
  int64_t final_eval_step = 0;  // the step of this invocation's last evaluation (data.eval_path); 0 = none
  std::vector<std::pair<std::string, double>> final_eval;  // its eval_* metrics
  std::string metrics_path;    // log_dict.json
  double state_bytes_max = 0;  // parameters + gradients + optimizer state held by the largest rank
};

// Runs the whole training described by `config` over the MPI `world` (every rank calls it). Writes the effective
// config, log_dict.json and run_summary.json under train.checkpoint.output_dir, and checkpoints under its
// checkpoints/ every train.checkpoint.save_steps steps and at the end (veomni-checkpoint(5)). With
// train.checkpoint.load_path ("auto" or a checkpoint) it resumes where that checkpoint stopped, under any layout.
// Rank 0 holds output_dir's lock (OutputDirLock) for the whole run. With train.checkpoint.save_on_signal, SIGTERM or
// SIGINT on any rank stops every rank after the same step, with a checkpoint of it, and the call returns normally.
// Throws InputError / Error with context.
//
// For tests of the failure path, the environment variable VEOMNI_FAULT_INJECT="rank=R,step=S" makes rank R throw at
// step S (the other ranks are then waiting in a collective and must be ended by the abort); with ",kill=step" rank R
// kills itself with SIGKILL there instead, with ",kill=save" in the middle of writing its shard of step S's
// checkpoint, and with ",kill=commit" (rank 0) after step S's checkpoint directory is in place but before `latest`
// names it; ",kill=term" makes rank R send itself SIGTERM at the step's start.
TrainSummary run_training(const TrainConfig& config, std::shared_ptr<Communicator> world);

}  // namespace veomni
