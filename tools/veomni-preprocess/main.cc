// veomni-preprocess: `tokenize` (JSONL text to ids), `text` (conversations or plain text to a dataset), `preference`
// (chosen / rejected conversation pairs to a pair dataset) and, with the media library, `multimodal` (conversations
// with images, video and audio to a Qwen3-VL / Qwen3-Omni dataset), and `info` (what a dataset holds).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "core/tool.h"
#include "tools/cli.h"
#include "data/dataset_digest.h"
#include "data/dataset_writer.h"
#include "data/text_preprocess.h"
#include "data/text_preprocess_preference.h"
#include "io/output_paths.h"
#ifdef VEOMNI_HAVE_MEDIA
#include "media/multimodal_preprocess.h"
#endif

namespace {

constexpr const char* kTool = "veomni-preprocess";

struct Arguments {
  veomni::TokenizeOptions tokenize;
  veomni::TextPreprocessOptions text;
  veomni::PreferencePreprocessOptions preference;
  std::string truncation = "right";
  std::string system_prompt;
  std::string chat_template_kwargs;
  std::vector<std::string> info_paths;
  std::string log_level = "info";
  bool overwrite = false;
#ifdef VEOMNI_HAVE_MEDIA
  veomni::MultimodalPreprocessOptions multimodal;
  std::string model_type;
  std::string too_long = "drop";
  // preference --model-type: multimodal pairs
  std::string preference_model_type, preference_processor_config, preference_media_root;
#endif
};

void add_common(CLI::App& sub, std::string& tokenizer, int& threads, std::string& log_level) {
  sub.add_option("--tokenizer", tokenizer, "HuggingFace tokenizer.json (byte-level BPE, e.g. Qwen3's)")
      ->required()
      ->check(CLI::ExistingFile);
  sub.add_option("--threads", threads, "Tokenization threads (default 0: one per hardware thread)")
      ->check(veomni::integer_range(0, 4096));
  sub.add_option("--log-level", log_level, "trace, debug, info, warn, error, off (default info)");
}

void add_max_line_bytes(CLI::App& sub, size_t& max_line_bytes) {
  sub.add_option("--max-line-bytes", max_line_bytes,
                 "Longest JSONL line in bytes (default 67108864, 64 MiB); a longer one is an error naming its line")
      ->check(veomni::integer_range(1, int64_t{1} << 40));
}

void add_overwrite(CLI::App& sub, bool& overwrite) {
  sub.add_flag("--overwrite", overwrite, "Replace --out if it exists (never one of the inputs)");
}

void add_chat_template(CLI::App& sub, std::string& chat_template, std::string& kwargs) {
  sub.add_option("--chat-template", chat_template,
                 "chatml (default: our ChatML), model (the tokenizer folder's chat_template.jinja, chat_template.json "
                 "or tokenizer_config.json, rendered with node and @huggingface/jinja) or a .jinja file");
  sub.add_option("--chat-template-kwargs", kwargs,
                 "JSON object of template variables for model templates, e.g. '{\"enable_thinking\": false}'");
}

// --chat-template-kwargs as a JSON object (empty without the flag).
nlohmann::ordered_json chat_template_kwargs(const Arguments& args, const std::string& chat_template) {
  if (args.chat_template_kwargs.empty()) return nlohmann::ordered_json::object();
  VEOMNI_INPUT_CHECK(chat_template != "chatml", "--chat-template-kwargs needs --chat-template model or a file");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::parse(args.chat_template_kwargs, nullptr, false);
  VEOMNI_INPUT_CHECK(kwargs.is_object(), "--chat-template-kwargs '{}' is not a JSON object",
                     args.chat_template_kwargs);
  return kwargs;
}

CLI::App* add_tokenize(CLI::App& app, Arguments& args) {
  CLI::App* sub = app.add_subcommand("tokenize", "JSONL {\"text\": ...} to one JSON array of token ids per line");
  add_common(*sub, args.tokenize.tokenizer_path, args.tokenize.threads, args.log_level);
  args.tokenize.inputs = {"-"};
  sub->add_option("--input", args.tokenize.inputs, "Input JSONL file(s) or a JSON array; - is stdin (default -)");
  sub->add_option("--text-key", args.tokenize.text_key, "Key of the text in each record (default text)");
  add_max_line_bytes(*sub, args.tokenize.max_line_bytes);
  return sub;
}

CLI::App* add_text(CLI::App& app, Arguments& args) {
  CLI::App* sub = app.add_subcommand(
      "text", "Conversations {\"messages\": [...]} or plain text {\"text\": ...} to a veomni dataset (ChatML)");
  veomni::TextPreprocessOptions& t = args.text;
  add_common(*sub, t.tokenizer_path, t.threads, args.log_level);
  sub->add_option("--input", t.inputs, "Input JSONL file(s) or JSON array(s); - is stdin")->required();
  sub->add_option("--out", t.out, "Output dataset (.h5); with --num-shards N: <out>-0000k-of-0000N.h5")->required();
  sub->add_option("--text-key", t.record.text_key, "Key of the text in plain-text records (default text)");
  sub->add_option("--system", args.system_prompt,
                  "System prompt for conversations that do not start with a system message");
  add_chat_template(*sub, t.chat_template, args.chat_template_kwargs);
  sub->add_option("--max-seq-len", t.record.max_seq_len, "Longest sample in tokens; the row length with --pack")
      ->check(veomni::integer_range(1, veomni::kMaxSampleTokens));
  sub->add_option("--truncation", args.truncation, "Longer samples: right (keep the start, default), left, drop")
      ->check(CLI::IsMember({"left", "right", "drop"}));
  sub->add_flag("--pack", t.pack, "Pack samples into rows of exactly --max-seq-len tokens");
  sub->add_option("--num-shards", t.num_shards, "Split into this many files (default 1)")
      ->check(veomni::integer_range(1, 99999));
  sub->add_flag("--skip-bad", t.skip_bad, "Count, report and skip bad records instead of failing on the first");
  add_max_line_bytes(*sub, t.max_line_bytes);
  add_overwrite(*sub, args.overwrite);
  sub->add_option("--compression", t.compression_level, "Deflate level 0 (off) to 9 (default 1)")
      ->check(CLI::Range(0, 9));
  sub->add_option("--buffer-bytes", t.buffer_bytes,
                  "Tokenized samples held in memory (default 67108864, 64 MiB); the rest wait in a temporary file "
                  "beside --out (about 5 bytes a token) until the dataset is written")
      ->check(veomni::integer_range(1, int64_t{1} << 40));
  return sub;
}

// The process's peak resident memory (getrusage's ru_maxrss, in KiB on Linux).
double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void print_text_summary(const veomni::TextPreprocessSummary& s, bool pack) {
  const auto count = [](const char* key, int64_t value) {
    std::printf("%s: %lld\n", key, static_cast<long long>(value));
  };
  count("records", s.records);
  count("samples", s.samples);
  count("rows", s.rows);
  count("tokens", s.tokens);
  count("trained_tokens", s.trained_tokens);
  if (pack) {
    const double cells = static_cast<double>(s.tokens + s.padding_tokens);
    std::printf("padding: %lld (%.2f%%)\n", static_cast<long long>(s.padding_tokens),
                cells > 0 ? 100.0 * static_cast<double>(s.padding_tokens) / cells : 0.0);
  }
  count("truncated", s.truncated);
  std::printf("dropped: %lld (too long %lld, no assistant token %lld)\n",
              static_cast<long long>(s.dropped_too_long + s.dropped_no_target),
              static_cast<long long>(s.dropped_too_long), static_cast<long long>(s.dropped_no_target));
  count("bad", s.bad);
  std::printf("tokenizer: %s\n", s.tokenizer.c_str());
  std::printf("seconds: %.2f (%.0f samples/s, %.2f MB/s)\n", s.seconds, static_cast<double>(s.records) / s.seconds,
              static_cast<double>(s.input_bytes) / 1e6 / s.seconds);
  std::printf("bytes: %llu\n", static_cast<unsigned long long>(s.output_bytes));
  std::printf("peak_rss_mib: %.1f\n", peak_rss_mib());
  for (const std::string& file : s.files) std::printf("file: %s\n", file.c_str());
}

int run_text(Arguments& args, const CLI::App& sub) {
  veomni::TextPreprocessOptions& t = args.text;
  VEOMNI_INPUT_CHECK(t.out != "-", "--out -: a dataset is an HDF5 file, which needs a seekable file; give a path");
  veomni::check_outputs(veomni::sharded_dataset_paths(t.out, t.num_shards), t.inputs, args.overwrite, "--out");
  t.record.truncation = veomni::truncation_from_name(args.truncation);
  if (sub.count("--system") > 0) t.record.system_prompt = args.system_prompt;
  t.chat_template_kwargs = chat_template_kwargs(args, t.chat_template);
  const veomni::TextPreprocessSummary summary = veomni::preprocess_text(t);
  print_text_summary(summary, t.pack);
  return veomni::kExitOk;
}

int run_tokenize(const Arguments& args) {
  const veomni::TokenizeSummary s = veomni::tokenize_records(args.tokenize, stdout);
  spdlog::info("tokenized {} records into {} tokens in {:.2f} s ({:.0f} tokens/s, {:.2f} MB/s)", s.records, s.tokens,
               s.seconds, static_cast<double>(s.tokens) / s.seconds,
               static_cast<double>(s.input_bytes) / 1e6 / s.seconds);
  return veomni::kExitOk;
}


CLI::App* add_preference(CLI::App& app, Arguments& args) {
  CLI::App* sub = app.add_subcommand(
      "preference",
      "Preference pairs {\"chosen\": [...], \"rejected\": [...]} (optionally with \"prompt\") to a pair dataset");
  veomni::PreferencePreprocessOptions& p = args.preference;
  add_common(*sub, p.tokenizer_path, p.threads, args.log_level);
  sub->add_option("--input", p.inputs, "Input JSONL file(s) or JSON array(s); - is stdin")->required();
  sub->add_option("--out", p.out, "Output dataset (.h5); with --num-shards N: <out>-0000k-of-0000N.h5")->required();
  sub->add_option("--system", args.system_prompt, "System prompt for prompts that do not start with a system message");
  add_chat_template(*sub, p.chat_template, args.chat_template_kwargs);
  sub->add_option("--max-seq-len", p.pair.max_seq_len,
                  "Longest pair in tokens (chosen + rejected); longer pairs are dropped and counted")
      ->check(veomni::integer_range(1, veomni::kMaxSampleTokens));
  sub->add_option("--num-shards", p.num_shards, "Split into this many files (default 1)")
      ->check(veomni::integer_range(1, 99999));
  sub->add_flag("--skip-bad", p.skip_bad, "Count, report and skip bad records instead of failing on the first");
  add_max_line_bytes(*sub, p.max_line_bytes);
  add_overwrite(*sub, args.overwrite);
  sub->add_option("--compression", p.compression_level, "Deflate level 0 (off) to 9 (default 1)")
      ->check(CLI::Range(0, 9));
  sub->add_option("--buffer-bytes", p.buffer_bytes,
                  "Tokens of kept pairs held in memory (default 67108864, 64 MiB); the rest wait in a temporary file "
                  "beside --out (about 5 bytes a token) until the dataset is written")
      ->check(veomni::integer_range(1, int64_t{1} << 40));
#ifdef VEOMNI_HAVE_MEDIA
  sub->add_option("--model-type", args.preference_model_type,
                  "qwen3_vl or qwen3_omni_moe: prompts with image, video and audio parts to multimodal pairs")
      ->check(CLI::IsMember({"qwen3_vl", "qwen3_omni_moe"}));
  sub->add_option("--processor-config", args.preference_processor_config,
                  "With --model-type: HF preprocessor_config.json (image settings; default: the model's)")
      ->check(CLI::ExistingFile);
  sub->add_option("--media-root", args.preference_media_root,
                  "With --model-type: directory of relative media paths (default: the directory of each input)")
      ->check(CLI::ExistingDirectory);
#endif
  return sub;
}

#ifdef VEOMNI_HAVE_MEDIA
void print_multimodal_summary(const veomni::MultimodalPreprocessSummary& s);

// preference --model-type: the multimodal pipeline on pair records, one file.
int run_multimodal_preference(Arguments& args, const CLI::App& sub) {
  const veomni::PreferencePreprocessOptions& p = args.preference;
  VEOMNI_INPUT_CHECK(p.num_shards == 1, "--num-shards {} with --model-type: multimodal pairs are written to one file",
                     p.num_shards);
  veomni::MultimodalPreprocessOptions m;
  m.model = veomni::multimodal_model_from_name(args.preference_model_type);
  m.preference = true;
  m.tokenizer_path = p.tokenizer_path;
  m.inputs = p.inputs;
  m.out = p.out;
  m.processor_config = args.preference_processor_config;
  m.media_root = args.preference_media_root;
  if (sub.count("--system") > 0) m.system_prompt = args.system_prompt;
  m.max_seq_len = p.pair.max_seq_len;
  m.threads = p.threads;
  m.skip_bad = p.skip_bad;
  m.compression_level = p.compression_level;
  m.max_line_bytes = p.max_line_bytes;
  m.chat_template = p.chat_template;
  m.chat_template_kwargs = chat_template_kwargs(args, p.chat_template);
  const veomni::MultimodalPreprocessSummary s = veomni::preprocess_multimodal(m);
  std::printf("pairs: %lld\n", static_cast<long long>(s.samples));
  std::printf("ref_logps: %s\n", s.ref_logps ? "yes" : "no");
  print_multimodal_summary(s);
  return veomni::kExitOk;
}
#endif

int run_preference(Arguments& args, const CLI::App& sub) {
  veomni::PreferencePreprocessOptions& p = args.preference;
  VEOMNI_INPUT_CHECK(p.out != "-", "--out -: a dataset is an HDF5 file, which needs a seekable file; give a path");
  veomni::check_outputs(veomni::sharded_dataset_paths(p.out, p.num_shards), p.inputs, args.overwrite, "--out");
#ifdef VEOMNI_HAVE_MEDIA
  if (!args.preference_model_type.empty()) return run_multimodal_preference(args, sub);
  VEOMNI_INPUT_CHECK(sub.count("--processor-config") == 0 && sub.count("--media-root") == 0,
                     "--processor-config and --media-root need --model-type (multimodal pairs)");
#endif
  if (sub.count("--system") > 0) p.pair.system_prompt = args.system_prompt;
  p.chat_template_kwargs = chat_template_kwargs(args, p.chat_template);
  const veomni::PreferencePreprocessSummary s = veomni::preprocess_preference(p);
  const auto count = [](const char* key, int64_t value) {
    std::printf("%s: %lld\n", key, static_cast<long long>(value));
  };
  count("records", s.records);
  count("pairs", s.pairs);
  count("tokens", s.tokens);
  count("trained_tokens", s.trained_tokens);
  std::printf("dropped: %lld (too long)\n", static_cast<long long>(s.dropped_too_long));
  count("bad", s.bad);
  std::printf("ref_logps: %s\n", s.ref_logps ? "yes" : "no");
  std::printf("tokenizer: %s\n", s.tokenizer.c_str());
  std::printf("seconds: %.2f\n", s.seconds);
  std::printf("bytes: %llu\n", static_cast<unsigned long long>(s.output_bytes));
  for (const std::string& file : s.files) std::printf("file: %s\n", file.c_str());
  return veomni::kExitOk;
}

#ifdef VEOMNI_HAVE_MEDIA
CLI::App* add_multimodal(CLI::App& app, Arguments& args) {
  CLI::App* sub = app.add_subcommand(
      "multimodal", "Conversations with image, video and audio parts to a Qwen3-VL or Qwen3-Omni dataset");
  veomni::MultimodalPreprocessOptions& m = args.multimodal;
  add_common(*sub, m.tokenizer_path, m.threads, args.log_level);
  sub->add_option("--model-type", args.model_type, "qwen3_vl or qwen3_omni_moe")
      ->required()
      ->check(CLI::IsMember({"qwen3_vl", "qwen3_omni_moe"}));
  sub->add_option("--input", m.inputs, "Input JSONL file(s) or JSON array(s); - is stdin")->required();
  sub->add_option("--out", m.out, "Output dataset (.h5)")->required();
  sub->add_option("--processor-config", m.processor_config,
                  "HF preprocessor_config.json (image settings; default: the model's)")
      ->check(CLI::ExistingFile);
  sub->add_option("--media-root", m.media_root,
                  "Directory of relative media paths (default: the directory of each input file)")
      ->check(CLI::ExistingDirectory);
  sub->add_option("--system", args.system_prompt,
                  "System prompt for conversations that do not start with a system message");
  add_chat_template(*sub, m.chat_template, args.chat_template_kwargs);
  sub->add_option("--max-seq-len", m.max_seq_len, "Longest sample in tokens (longer ones: see --too-long)")
      ->check(veomni::integer_range(1, veomni::kMaxSampleTokens));
  sub->add_option("--too-long", args.too_long, "Samples over --max-seq-len: drop (default) or error; never truncated")
      ->check(CLI::IsMember({"drop", "error"}));
  sub->add_flag("--skip-bad", m.skip_bad, "Count, report and skip bad records and media instead of failing");
  add_max_line_bytes(*sub, m.max_line_bytes);
  add_overwrite(*sub, args.overwrite);
  sub->add_option("--compression", m.compression_level, "Deflate level 0 (off) to 9 (default 1)")
      ->check(CLI::Range(0, 9));
  return sub;
}

void print_multimodal_summary(const veomni::MultimodalPreprocessSummary& s) {
  const auto count = [](const char* key, int64_t value) {
    std::printf("%s: %lld\n", key, static_cast<long long>(value));
  };
  count("records", s.records);
  count("samples", s.samples);
  count("images", s.images);
  count("videos", s.videos);
  count("audio_clips", s.audio_clips);
  count("tokens", s.tokens);
  count("trained_tokens", s.trained_tokens);
  std::printf("dropped: %lld (too long %lld, no assistant token %lld)\n",
              static_cast<long long>(s.dropped_too_long + s.dropped_no_target),
              static_cast<long long>(s.dropped_too_long), static_cast<long long>(s.dropped_no_target));
  count("bad", s.bad);
  std::printf("tokenizer: %s\n", s.tokenizer.c_str());
  // The rate leaves out the setup (loading the tokenizer), which does not grow with the data.
  std::printf("seconds: %.3f (setup %.3f, %.2f samples/s after it)\n", s.seconds, s.setup_seconds,
              static_cast<double>(s.samples) / (s.seconds - s.setup_seconds));
  std::printf("bytes: %llu\n", static_cast<unsigned long long>(s.output_bytes));
  std::printf("file: %s\n", s.file.c_str());
  for (const veomni::KeyInfo& key : s.keys)
    std::printf("key: %-22s %s\n", key.name.c_str(), key.describe().c_str());
}

int run_multimodal(Arguments& args, const CLI::App& sub) {
  veomni::MultimodalPreprocessOptions& m = args.multimodal;
  VEOMNI_INPUT_CHECK(m.out != "-", "--out -: a dataset is an HDF5 file, which needs a seekable file; give a path");
  veomni::check_outputs({m.out}, m.inputs, args.overwrite, "--out");
  m.model = veomni::multimodal_model_from_name(args.model_type);
  m.error_on_too_long = args.too_long == "error";
  if (sub.count("--system") > 0) m.system_prompt = args.system_prompt;
  m.chat_template_kwargs = chat_template_kwargs(args, m.chat_template);
  print_multimodal_summary(veomni::preprocess_multimodal(m));
  return veomni::kExitOk;
}
#endif

CLI::App* add_info(CLI::App& app, Arguments& args) {
  CLI::App* sub = app.add_subcommand(
      "info", "Print what a dataset holds: its header (chat template included) and a content digest of every key");
  sub->add_option("datasets", args.info_paths, "Dataset files, shard sets or directories")->required();
  return sub;
}

int run_info(const Arguments& args) {
  for (size_t i = 0; i < args.info_paths.size(); ++i) {
    if (i > 0) std::printf("\n");
    for (const std::string& line : veomni::describe_dataset(args.info_paths[i])) std::printf("%s\n", line.c_str());
  }
  return veomni::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&]() -> int {
    CLI::App app{"Turn raw data into veomni datasets (see man veomni-preprocess).", kTool};
    veomni::add_version_flag(app, kTool);
    app.require_subcommand(1);
    Arguments args;
    CLI::App* tokenize = add_tokenize(app, args);
    CLI::App* text = add_text(app, args);
    CLI::App* preference = add_preference(app, args);
    CLI::App* info = add_info(app, args);
#ifdef VEOMNI_HAVE_MEDIA
    CLI::App* multimodal = add_multimodal(app, args);
#endif
    if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
    veomni::init_logging({.tool = kTool, .level = args.log_level});
    if (tokenize->parsed()) return run_tokenize(args);
    if (info->parsed()) return run_info(args);
    if (preference->parsed()) return run_preference(args, *preference);
#ifdef VEOMNI_HAVE_MEDIA
    if (multimodal->parsed()) return run_multimodal(args, *multimodal);
#endif
    return run_text(args, *text);
  });
}
