// veomni-train: trains a Qwen3 / Qwen3-MoE model from a YAML recipe, one process per rank under mpirun.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/logging.h"
#include "core/tool.h"
#include "dist/collective_timeout.h"
#include "dist/communicator.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "tools/cli.h"

namespace {

constexpr const char* kTool = "veomni-train";

int train_main(int argc, char** argv) {
  CLI::App app{"Train a Qwen3 / Qwen3-MoE model from a VeOmni-style YAML recipe.\n"
               "Run under MPI: mpirun -np N veomni-train CONFIG.yaml [--section.key VALUE ...]"};
  app.allow_extras();
  std::string config_path;
  bool log_all_ranks = false;
  std::string log_level = "info";
  app.add_option("config", config_path, "YAML recipe (model:, data:, train: sections; see veomni-config(5))");
  app.add_flag("--log-all-ranks", log_all_ranks, "every rank prints its log (default: rank 0 only)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off");
  veomni::add_version_flag(app, kTool);
  app.footer("Any --section.key VALUE (or --section.key=VALUE) overrides the recipe, e.g. --train.optimizer.lr 1e-4.");
  if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
  if (config_path.empty()) {
    std::fprintf(stderr, "%s: error: a config file is required (see --help)\n", kTool);
    return veomni::kExitBadInput;
  }

  veomni::mpi_initialize(&argc, &argv);
  auto world = veomni::mpi_world();
  veomni::init_logging({kTool, world->rank(), world->size(), log_all_ranks, log_level});
  const veomni::TrainConfig config = veomni::load_train_config(config_path, app.remaining());
  veomni::set_collective_timeout(config.train.accelerator.dist_timeout);
  veomni::run_training(config, world);
  world->barrier();
  world.reset();
  veomni::mpi_finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&] { return train_main(argc, argv); });
}
