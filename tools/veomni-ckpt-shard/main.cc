// veomni-ckpt-shard: a HuggingFace model directory as a step-0 checkpoint for a parallel layout of veomni-train.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "ckpt/shard_from_hf.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/tool.h"
#include "tools/cli.h"

namespace {

constexpr const char* kTool = "veomni-ckpt-shard";

struct Arguments {
  std::string hf_dir;
  std::string out;
  veomni::ShardFromHfOptions options;
  std::string log_level = "info";
};

void add_options(CLI::App& app, Arguments& args) {
  veomni::add_version_flag(app, kTool);
  app.add_option("hf_dir", args.hf_dir, "HuggingFace model directory (config.json + safetensors, or an index)")
      ->required();
  app.add_option("--out", args.out,
                 "Checkpoint directory to write, e.g. ckpt/global_step_0 (created; see --overwrite)")
      ->required();
  app.add_option("--world", args.options.mesh.world, "Ranks of the run that will resume (mpirun -np)")
      ->required()
      ->check(veomni::integer_range(1, 1 << 20));
  app.add_option("--ulysses", args.options.mesh.ulysses, "train.accelerator.ulysses_size of that run (default 1)")
      ->check(veomni::integer_range(1, 1 << 20));
  app.add_option("--ep", args.options.mesh.ep, "train.accelerator.ep_size of that run (default 1)")
      ->check(veomni::integer_range(1, 1 << 20));
  app.add_flag("--overwrite", args.options.overwrite, "Replace --out if it exists and is not empty");
  app.add_option("--log-level", args.log_level, "trace, debug, info, warn, error, off (default info)");
}

}  // namespace

int main(int argc, char** argv) {
  // Tensor buffers come from mmap and go back to the system when freed; glibc's adaptive threshold would keep each
  // freed tensor in the heap, and the peak memory would follow the model's size instead of its largest tensor.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  return veomni::run_tool(kTool, [&]() -> int {
    CLI::App app{"Write a HuggingFace model as a step-0 veomni checkpoint for a parallel layout, which veomni-train "
                 "resumes from (train.checkpoint.load_path). See man veomni-ckpt-shard.",
                 kTool};
    Arguments args;
    add_options(app, args);
    if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
    veomni::init_logging({.tool = kTool, .level = args.log_level});
    const veomni::ShardFromHfSummary s = veomni::shard_hf_checkpoint(args.hf_dir, args.out, args.options);
    spdlog::info("sharded {} ({} parameters) for {} into {}", args.hf_dir, s.parameters,
                 args.options.mesh.describe(), s.out_dir);
    std::printf("out: %s\n", s.out_dir.c_str());
    std::printf("model_type: %s\n", s.model_type.c_str());
    std::printf("head: %s\n", veomni::model_head_name(s.head));
    std::printf("mesh: world %lld, ulysses %lld, ep %lld\n", static_cast<long long>(args.options.mesh.world),
                static_cast<long long>(args.options.mesh.ulysses), static_cast<long long>(args.options.mesh.ep));
    std::printf("parameters: %lld\n", static_cast<long long>(s.parameters));
    std::printf("elements: %lld\n", static_cast<long long>(s.elements));
    std::printf("bytes: %llu\n", static_cast<unsigned long long>(s.bytes));
    return veomni::kExitOk;
  });
}
