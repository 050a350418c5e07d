// veomni-dummy-data: writes a synthetic dataset with VeOmni's dummy shapes (text, qwen2vl, qwen3vl, qwen3omni) or of
// preference pairs and rollouts.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/logging.h"
#include "core/tool.h"
#include "tools/cli.h"
#include "data/dataset_writer.h"
#include "data/dummy_data.h"
#include "io/output_paths.h"

namespace {

constexpr const char* kTool = "veomni-dummy-data";

struct Arguments {
  std::string type;
  std::string media = "text";
  veomni::DummyDatasetOptions options;
  std::string log_level = "info";
  bool overwrite = false;
};

void add_options(CLI::App& app, Arguments& args) {
  veomni::add_version_flag(app, kTool);
  app.add_option("--type", args.type, "Dataset type: text, qwen2vl, qwen3vl, qwen3omni, preference or rollout")
      ->required()
      ->check(CLI::IsMember({"text", "qwen2vl", "qwen3vl", "qwen3omni", "preference", "rollout"}));
  app.add_option("--seq-len", args.options.seq_len, "Target sequence length (VeOmni's max_seq_len)")
      ->required()
      ->check(veomni::integer_range(1, veomni::kMaxSampleTokens));
  app.add_option("--num-samples", args.options.num_samples, "Number of samples")
      ->required()
      ->check(veomni::integer_range(0, veomni::kMaxDummySamples));
  app.add_option("--num-shards", args.options.num_shards, "Split into this many files (default 1)")
      ->check(veomni::integer_range(1, 99999));
  app.add_option("--seed", args.options.seed, "Random seed; the same seed gives the same data (default 0)");
  app.add_option("--compression", args.options.compression_level, "Deflate level 0 (off) to 9 (default 1)")
      ->check(CLI::Range(0, 9));
  app.add_flag("--ref-logps", args.options.ref_logps,
               "With --type preference: add ref_chosen_logps and ref_rejected_logps to every pair");
  app.add_option("--media", args.media,
                 "With --type preference: qwen3vl or qwen3omni puts that family's dummy media (images, video; audio "
                 "for qwen3omni) in the prompt of every pair, held by both halves; with --type rollout: the family's "
                 "dummy sample, the second half of its text tokens the response (default text: no media)")
      ->check(CLI::IsMember({"text", "qwen3vl", "qwen3omni"}));
  app.add_option("--out", args.options.out, "Output file (.h5); with --num-shards N: <out>-0000k-of-0000N.h5")
      ->required();
  app.add_flag("--overwrite", args.overwrite, "Replace --out if it exists");
  app.add_option("--log-level", args.log_level, "trace, debug, info, warn, error, off (default info)");
}

void print_summary(const veomni::DummyDatasetSummary& summary) {
  const veomni::DummyLayout& layout = summary.layout;
  std::printf("type: %s (kind %s)\n", veomni::dummy_type_name(layout.type), layout.dataset_kind());
  std::printf("seq_len: %lld\n", static_cast<long long>(layout.seq_len));
  std::printf("tokens_per_sample: %lld (text %lld, image %lld, audio %lld, video %lld)\n",
              static_cast<long long>(layout.length), static_cast<long long>(layout.text_tokens),
              static_cast<long long>(layout.image_tokens), static_cast<long long>(layout.audio_tokens),
              static_cast<long long>(layout.video_tokens));
  if (layout.type == veomni::DummyType::Preference)
    std::printf("pair: chosen %lld, rejected %lld, prompt %lld each\n", static_cast<long long>(layout.chosen_tokens),
                static_cast<long long>(layout.length - layout.chosen_tokens),
                static_cast<long long>(layout.prompt_tokens));
  if (layout.media != veomni::DummyType::Text)
    std::printf(layout.type == veomni::DummyType::Preference ? "pair media: %s in the prompt of both halves\n"
                                                             : "rollout media: %s\n",
                veomni::dummy_type_name(layout.media));
  if (layout.type == veomni::DummyType::Rollout)
    std::printf("rollout: prompt %lld, response %lld\n", static_cast<long long>(layout.prompt_tokens),
                static_cast<long long>(layout.length - layout.prompt_tokens));
  std::printf("samples: %lld\n", static_cast<long long>(summary.num_samples));
  std::printf("tokens: %lld\n", static_cast<long long>(summary.tokens));
  std::printf("bytes: %llu\n", static_cast<unsigned long long>(summary.bytes));
  for (const std::string& file : summary.files) std::printf("file: %s\n", file.c_str());
  for (const auto& [key, tensor] : summary.first_sample)
    std::printf("key: %-22s %-4s %s\n", key.c_str(), veomni::dtype_name(tensor.dtype()),
                veomni::shape_str(tensor.shape()).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&]() -> int {
    CLI::App app{"Write a synthetic dataset with VeOmni's dummy shapes and layouts, preference pairs or rollouts (see "
                 "man veomni-dummy-data and man veomni-data).", kTool};
    Arguments args;
    add_options(app, args);
    if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
    veomni::init_logging({.tool = kTool, .level = args.log_level});
    VEOMNI_INPUT_CHECK(args.options.out != "-",
                       "--out -: a dataset is an HDF5 file, which needs a seekable file; give a path");
    veomni::check_outputs(veomni::sharded_dataset_paths(args.options.out, args.options.num_shards), {},
                          args.overwrite, "--out");
    args.options.type = veomni::dummy_type_from_name(args.type);
    args.options.media = veomni::dummy_type_from_name(args.media);
    print_summary(veomni::write_dummy_dataset(args.options));
    return veomni::kExitOk;
  });
}
