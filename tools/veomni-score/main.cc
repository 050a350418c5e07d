// veomni-score: forward-only scoring of a dataset by a model (log-probs, rewards or values) into a new dataset file.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/logging.h"
#include "core/tool.h"
#include "dist/collective_timeout.h"
#include "dist/communicator.h"
#include "train/progress.h"
#include "train/environment_overrides.h"
#include "train/scorer.h"
#include "train/train_config.h"
#include "tools/cli.h"

namespace {

constexpr const char* kTool = "veomni-score";

// What the command line asks for.
struct Flags {
  std::string model_dir, checkpoint, config_path, data_path, out_path, what = "logprobs";
  int64_t micro_batch_tokens = 4096;
  bool as_reference = false;
};

// The run's options: the config (or the defaults) with the overrides and the model flags, checked.
veomni::ScoreOptions score_options(const Flags& flags, const std::vector<std::string>& overrides) {
  veomni::ScoreOptions options;
  options.config = flags.config_path.empty() ? veomni::TrainConfig{} : veomni::load_train_config(flags.config_path);
  veomni::apply_train_config_overrides(options.config, overrides);
  for (const std::string& line : veomni::apply_environment_overrides(options.config))
    spdlog::info("environment: {}", line);
  if (!flags.model_dir.empty()) {
    options.config.model.model_path = flags.model_dir;
    options.config.model.config_path.clear();
  }
  VEOMNI_INPUT_CHECK(!flags.checkpoint.empty() || !options.config.resolved_model_config_path().empty(),
                     "no model: give --model DIR, --checkpoint DIR or a --config whose model: section names one");
  // The config's checks, with the keys this tool takes from its flags: the data, and a checkpoint's model.
  veomni::TrainConfig checked = options.config;
  checked.data.train_path = flags.data_path;
  if (!flags.checkpoint.empty()) checked.model.config_path = flags.checkpoint;
  veomni::validate_train_config(checked);
  options.checkpoint = flags.checkpoint;
  options.data_path = flags.data_path;
  options.out_path = flags.out_path;
  options.what = veomni::score_what_from_name(flags.what);
  options.micro_batch_tokens = flags.micro_batch_tokens;
  options.as_reference = flags.as_reference;
  return options;
}

void print_summary(const veomni::ScoreOptions& options, const veomni::ScoreSummary& summary) {
  const veomni::ScoreTotals& t = summary.totals;
  spdlog::info("done: {} samples, {} tokens, {} label tokens{} in {} ({} tok/s); wrote {}", t.samples,
               veomni::format_count(static_cast<double>(t.tokens)), t.label_tokens,
               options.what == veomni::ScoreWhat::Logprobs ? fmt::format(", perplexity {:.6g}", summary.perplexity())
                                                           : std::string(),
               veomni::format_duration(summary.seconds),
               veomni::format_count(static_cast<double>(t.tokens) / std::max(summary.seconds, 1e-9)),
               options.out_path);
}

int score_main(int argc, char** argv) {
  CLI::App app{"Score a dataset with a model, forward only: per-sequence log-prob sums and per-token log-probs (LM), "
               "rewards (reward model) or values (value model), written to a new dataset file.\n"
               "Run under MPI like veomni-train: mpirun -np N veomni-score --model DIR --data IN.h5 --out OUT.h5"};
  app.allow_extras();
  Flags flags;
  bool log_all_ranks = false;
  std::string log_level = "info";
  auto* model = app.add_option("--model", flags.model_dir, "HuggingFace model directory (config.json + safetensors)");
  auto* ckpt = app.add_option("--checkpoint", flags.checkpoint,
                              "veomni checkpoint (global_step_N, or a run or checkpoints directory naming `latest`)");
  model->excludes(ckpt);
  app.add_option("--config", flags.config_path,
                 "YAML recipe for the model: section and train.device, train.precision, train.seed, "
                 "train.accelerator (ulysses_size, ep_size)");
  app.add_option("--data", flags.data_path, "dataset to score (veomni-data(5))")->required();
  app.add_option("--out", flags.out_path, "output dataset file, written atomically")->required();
  app.add_option("--what", flags.what, "logprobs (LM head, default), reward (reward model), value (value model)")
      ->check(CLI::IsMember({"logprobs", "reward", "value"}));
  app.add_option("--micro-batch-tokens", flags.micro_batch_tokens,
                 "token budget of a packed micro-batch, raised to the longest sample (default 4096)")
      ->check(veomni::integer_range(1, INT64_MAX));
  app.add_flag("--as-reference", flags.as_reference,
               "write the input keys plus ref_chosen_logps / ref_rejected_logps (pairs) or ref_log_probs: a dataset "
               "for veomni-train's dpo (no reference model) or ppo_actor (use_kl_loss)");
  app.add_flag("--log-all-ranks", log_all_ranks, "every rank prints its log (default: rank 0 only)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off");
  veomni::add_version_flag(app, kTool);
  app.footer("Any --section.key VALUE overrides the config, e.g. --train.accelerator.ulysses_size 2.\n"
             "Exit status: 0 scored, 1 the run failed, 2 bad usage or bad input. See veomni-score(1).");
  if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;

  veomni::mpi_initialize(&argc, &argv);
  auto world = veomni::mpi_world();
  veomni::init_logging({kTool, world->rank(), world->size(), log_all_ranks, log_level});
  const veomni::ScoreOptions options = score_options(flags, app.remaining());
  veomni::apply_kernel_settings(veomni::kernel_settings_of(options.config));
  veomni::set_collective_timeout(options.config.train.accelerator.dist_timeout);
  print_summary(options, veomni::run_scoring(options, world));
  world->barrier();
  world.reset();
  veomni::mpi_finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&] { return score_main(argc, argv); });
}
