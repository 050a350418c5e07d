// veomni-ckpt-merge: a training checkpoint's weights as a HuggingFace model directory, streamed tensor by tensor.
#include <malloc.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "ckpt/checkpoint_dir.h"
#include "ckpt/checkpoint_reader.h"
#include "ckpt/merge_adapters.h"
#include "ckpt/merge_to_hf.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/tool.h"
#include "tools/cli.h"
#include "io/hf_checkpoint.h"

namespace {

constexpr const char* kTool = "veomni-ckpt-merge";

struct Arguments {
  std::string checkpoint;
  std::string out;
  std::string max_shard_size = "5GB";
  std::string dtype = "fp32";
  std::string experts = "per-expert";
  std::string tokenizer;
  std::string speech_from;
  bool no_tokenizer = false;
  bool overwrite = false;
  bool peft = false;
  std::string log_level = "info";
};

void add_options(CLI::App& app, Arguments& args) {
  veomni::add_version_flag(app, kTool);
  app.add_option("checkpoint", args.checkpoint,
                 "Checkpoint directory (global_step_N), or a checkpoints/ or run directory (its `latest` is used)")
      ->required();
  app.add_option("--out", args.out, "HuggingFace model directory to write (created; see --overwrite)")->required();
  app.add_option("--max-shard-size", args.max_shard_size,
                 "Largest safetensors file, e.g. 5GB (10^9), 500MB, 2GiB; more weights go to numbered shards plus "
                 "model.safetensors.index.json (default 5GB)");
  app.add_option("--dtype", args.dtype, "Weight dtype: fp32 (the exact masters, default) or bf16")
      ->check(CLI::IsMember({"fp32", "bf16", "float32", "bfloat16"}));
  app.add_option("--experts", args.experts,
                 "MoE expert tensors: per-expert (mlp.experts.E.{gate,up,down}_proj.weight, as transformers saves, "
                 "default) or stacked (mlp.experts.gate_up_proj, mlp.experts.down_proj)")
      ->check(CLI::IsMember({"per-expert", "stacked"}));
  app.add_option("--tokenizer", args.tokenizer,
                 "Copy the tokenizer files from this directory (or file) instead of the run's model.tokenizer_path");
  app.add_flag("--no-tokenizer", args.no_tokenizer, "Copy no tokenizer files");
  app.add_option("--speech-from", args.speech_from,
                 "Qwen3-Omni: copy the talker.* and code2wav.* tensors from this HF directory (or file) instead of "
                 "the model the run started from");
  app.add_flag("--overwrite", args.overwrite, "Replace --out if it exists and is not empty");
  app.add_flag("--peft", args.peft,
               "An adapter (LoRA) checkpoint: write PEFT's adapter directory (adapter_model.safetensors, "
               "adapter_config.json) for peft.PeftModel.from_pretrained on the base model; without it an adapter "
               "checkpoint is merged into its base model (W + scale * B A)");
  app.add_option("--log-level", args.log_level, "trace, debug, info, warn, error, off (default info)");
}

long long peak_memory_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<long long>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

void print_summary(const veomni::MergeSummary& s) {
  std::printf("checkpoint: %s\n", s.checkpoint.c_str());
  std::printf("global_step: %lld\n", static_cast<long long>(s.global_step));
  std::printf("out: %s\n", s.out_dir.c_str());
  if (!s.architecture.empty()) std::printf("architecture: %s\n", s.architecture.c_str());
  std::printf("tensors: %zu\n", s.tensors);
  std::printf("tensor_bytes: %llu\n", static_cast<unsigned long long>(s.tensor_bytes));
  for (const std::string& f : s.weight_files) std::printf("weights: %s\n", f.c_str());
  for (const std::string& f : s.tokenizer_files) std::printf("tokenizer: %s\n", f.c_str());
  if (s.speech_tensors > 0) std::printf("speech_tensors: %zu from %s\n", s.speech_tensors, s.speech_source.c_str());
  std::printf("peak_memory_bytes: %lld\n", peak_memory_bytes());
}

}  // namespace

int main(int argc, char** argv) {
  // Tensor buffers come from mmap and go back to the system when freed; glibc's adaptive threshold would keep each
  // freed tensor in the heap, and the peak memory would follow the model's size instead of its largest tensor.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  return veomni::run_tool(kTool, [&]() -> int {
    CLI::App app{"Write a veomni checkpoint's weights as a HuggingFace model directory (config.json, safetensors, "
                 "index, tokenizer files). See man veomni-ckpt-merge.",
                 kTool};
    Arguments args;
    add_options(app, args);
    if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
    veomni::init_logging({.tool = kTool, .level = args.log_level});
    VEOMNI_INPUT_CHECK(!(args.no_tokenizer && !args.tokenizer.empty()),
                       "--tokenizer and --no-tokenizer exclude each other");
    veomni::MergeOptions options;
    options.max_shard_bytes = veomni::parse_byte_size(args.max_shard_size);
    options.dtype = args.dtype == "bf16" || args.dtype == "bfloat16" ? veomni::DType::BF16 : veomni::DType::F32;
    options.experts = args.experts == "stacked" ? veomni::ExpertNaming::Stacked : veomni::ExpertNaming::PerExpert;
    options.copy_tokenizer = !args.no_tokenizer;
    options.tokenizer_path = args.tokenizer;
    options.overwrite = args.overwrite;
    options.speech_from = args.speech_from;
    const bool adapter = veomni::CheckpointReader(veomni::resolve_checkpoint_path(args.checkpoint)).is_adapter();
    VEOMNI_INPUT_CHECK(!args.peft || adapter,
                       "--peft: '{}' is a whole model's checkpoint, not an adapter (LoRA) one (hint: merge it without "
                       "--peft)",
                       args.checkpoint);
    const veomni::MergeSummary summary =
        !adapter    ? veomni::merge_checkpoint_to_hf(args.checkpoint, args.out, options)
        : args.peft ? veomni::write_adapter_checkpoint_as_peft(args.checkpoint, args.out, options)
                    : veomni::merge_adapter_checkpoint_to_hf(args.checkpoint, args.out, options);
    spdlog::info("merged step {} of {} into {} ({} tensors, {} files)", summary.global_step, summary.checkpoint,
                 summary.out_dir, summary.tensors, summary.weight_files.size());
    print_summary(summary);
    return veomni::kExitOk;
  });
}
