// veomni-generate: text generation with a KV cache from an HF model directory or a veomni checkpoint, JSONL prompts
// in, JSONL generations out; a Qwen3-Omni model also speaks its replies (talker and code2wav) into WAV files.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/logging.h"
#include "core/tool.h"
#include "generate/generation_model.h"
#include "generate/generator.h"
#include "generate/media_prompt.h"
#include "generate/omni_speaker.h"
#include "generate/prompt_file.h"
#include "generate/speech_stages.h"
#include "io/atomic_file.h"
#include "kernels/backend.h"
#include "media_prompts.h"
#include "prompt_text.h"
#include "speech_output.h"
#include "tools/cli.h"

namespace {

constexpr const char* kTool = "veomni-generate";

struct Flags {
  std::string model_dir, prompts_path, out_path = "-", chat_template = "chatml", device = "cpu";
  std::string audio_out, stages_path;
  int64_t batch_size = 8;
  std::vector<int64_t> stop_token_ids;
  veomni::GenerateOptions generate;
};

veomni::Device generation_device(const std::string& want) {
  if (want == "cpu") return veomni::Device::cpu();
  VEOMNI_INPUT_CHECK(veomni::backend::cuda_device_count() > 0, "--device cuda: {} (hint: --device cpu)",
                     veomni::backend::cuda_built() ? "no GPU is visible" : "this build has no CUDA backend");
  veomni::backend::use_cuda_device(0);
  return veomni::Device::cuda(0);
}

// Every prompt's token ids, in input order: input_ids as given, conversations with media from their samples, other
// conversations through the chat template.
std::vector<std::vector<int64_t>> prompt_ids(const std::vector<veomni::PromptRecord>& records,
                                             const std::vector<std::optional<veomni::Sample>>& media,
                                             veomni::PromptText& text, const veomni::ModelConfig& config) {
  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < records.size(); ++i) {
    const veomni::PromptRecord& record = records[i];
    if (media[i]) prompts.push_back(veomni::sample_prompt_ids(*media[i], record.location));
    else if (record.is_conversation()) prompts.push_back(text.encode_conversation(record.messages, record.location));
    else prompts.push_back(record.input_ids);
    veomni::check_prompt_ids(prompts.back(), config.vocab_size, config.max_position_embeddings, record.location);
  }
  return prompts;
}

nlohmann::ordered_json output_line(int64_t index, const veomni::Generation& g, const veomni::PromptText& text) {
  nlohmann::ordered_json line = {{"index", index}};
  if (text.has_tokenizer()) line["text"] = text.decode(g.token_ids);
  line["token_ids"] = g.token_ids;
  line["finish_reason"] = g.finish_reason;
  line["prompt_tokens"] = g.prompt_tokens;
  line["prefill_s"] = g.prefill_s;
  line["decode_s"] = g.decode_s;
  return line;
}

// What the talker (and code2wav) made of one prompt, added to its output line.
void add_speech(nlohmann::ordered_json& line, const veomni::OmniSpeaker::Speech& speech, int64_t groups,
                const std::string& audio_out) {
  line["codec_frames"] = speech.frames;
  line["codec_finish_reason"] = speech.reached_eos ? "stop" : "length";
  if (audio_out.empty()) {  // the talker is the last stage: its codes are the output
    nlohmann::json frames = nlohmann::json::array();
    for (int64_t f = 0; f < speech.frames; ++f)
      frames.push_back(std::vector<int64_t>(speech.codes.begin() + f * groups, speech.codes.begin() + (f + 1) * groups));
    line["codec_codes"] = std::move(frames);
    return;
  }
  line["audio"] = veomni::audio_path(audio_out, line["index"].get<int64_t>());
  line["audio_samples"] = speech.waveform.size();
}

// Flags not given on the command line take the stage file's thinker values (the same defaults without a file).
void apply_thinker_stage(const CLI::App& app, const veomni::ThinkerStage& stage, Flags& flags) {
  veomni::SamplingOptions& sampling = flags.generate.sampling;
  if (app.count("--device") == 0) flags.device = stage.device;
  if (app.count("--max-new-tokens") == 0) flags.generate.max_new_tokens = stage.max_new_tokens;
  if (app.count("--temperature") == 0) sampling.temperature = stage.temperature;
  if (app.count("--top-k") == 0) sampling.top_k = stage.top_k;
  if (app.count("--top-p") == 0) sampling.top_p = stage.top_p;
  if (app.count("--repetition-penalty") == 0) sampling.repetition_penalty = stage.repetition_penalty;
  if (app.count("--seed") == 0) sampling.seed = static_cast<uint64_t>(stage.seed);
}

// The whole output at once: a file atomically, or stdout after the last batch (an error leaves no partial output).
void write_output(const std::string& path, const std::string& jsonl) {
  if (path == "-") {
    std::cout << jsonl << std::flush;
    return;
  }
  veomni::AtomicFileWriter writer(path);
  writer.write(jsonl);
  writer.commit();
}

int generate_main(int argc, char** argv) {
  CLI::App app{"Generate text with a model: prompts (JSONL: chat conversations or token ids) in, one JSONL line per "
               "prompt out, decoded greedily or by sampling with a KV cache.\n"
               "  veomni-generate --model DIR --prompts prompts.jsonl --out generations.jsonl"};
  Flags flags;
  std::string log_level = "info";
  veomni::SamplingOptions& sampling = flags.generate.sampling;
  app.add_option("--model", flags.model_dir,
                 "HuggingFace model directory (config.json + safetensors, e.g. from veomni-ckpt-merge) or veomni "
                 "checkpoint (global_step_N, or a run or checkpoints directory naming `latest`)")
      ->required();
  app.add_option("--prompts", flags.prompts_path,
                 "JSONL prompts, - for stdin: {\"messages\": [...]} or {\"input_ids\": [...]} per line; a message's "
                 "content may hold image, video and audio parts (Qwen3-VL, Qwen3-Omni; paths relative to the file)")
      ->required();
  app.add_option("--out", flags.out_path, "JSONL output, written atomically; - for stdout (default)");
  app.add_option("--chat-template", flags.chat_template,
                 "chatml (default), model (the model's own template, run by node) or a .jinja / JSON file");
  app.add_option("--max-new-tokens", flags.generate.max_new_tokens, "most tokens generated per prompt (default 256)")
      ->check(veomni::integer_range(1, INT64_MAX));
  app.add_option("--temperature", sampling.temperature, "0 decodes greedily (default); > 0 samples at it");
  app.add_option("--top-k", sampling.top_k, "sample from the k most likely tokens (default 0: all)")
      ->check(veomni::integer_range(0, INT64_MAX));
  app.add_option("--top-p", sampling.top_p, "sample from the most likely tokens whose mass reaches p (default 1)");
  app.add_option("--repetition-penalty", sampling.repetition_penalty,
                 "logits of tokens already seen: > 0 divided by it, < 0 multiplied (default 1: off)");
  app.add_option("--seed", sampling.seed, "seed of the sampling streams, one per prompt index (default 0)");
  app.add_option("--stop-token-ids", flags.stop_token_ids,
                 "token ids that end a generation, besides the model's eos_token_id")
      ->delimiter(',');
  app.add_option("--batch-size", flags.batch_size, "prompts decoded together (default 8)")
      ->check(veomni::integer_range(1, INT64_MAX));
  app.add_option("--device", flags.device, "cpu (f32, default) or cuda (bf16, one GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--steps-per-sync", flags.generate.steps_per_sync,
                 "greedy decoding: steps run between reads of the chosen ids to the host, each feeding the next on the "
                 "device (default 1)")
      ->check(veomni::integer_range(1, 4096));
  bool eager = false;
  app.add_flag("--eager", eager,
               "on cuda, run every decode step op by op instead of replaying one CUDA graph per step (MoE models "
               "always decode op by op)");
  app.add_option("--audio-out", flags.audio_out,
                 "Qwen3-Omni: speak every reply (talker, code2wav) into DIR/<index>.wav, 24 kHz mono");
  app.add_option("--stages", flags.stages_path,
                 "stage file (YAML): which of thinker, talker, code2wav run, each one's device and sampling, the "
                 "speaker; see veomni-generate-stages(5)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off");
  veomni::add_version_flag(app, kTool);
  app.footer("Output lines: {\"index\", \"text\" (with a tokenizer), \"token_ids\", \"finish_reason\" (stop or "
             "length), \"prompt_tokens\", \"prefill_s\", \"decode_s\"}.\n"
             "Exit status: 0 generated, 1 the run failed, 2 bad usage or bad input. See veomni-generate(1).");
  if (const auto code = veomni::parse_command_line(app, argc, argv)) return *code;
  veomni::init_logging({kTool, 0, 1, false, log_level});
  VEOMNI_INPUT_CHECK(flags.chat_template == "chatml" || flags.chat_template == "model" ||
                         std::filesystem::exists(flags.chat_template),
                     "--chat-template {}: expected chatml, model or an existing template file", flags.chat_template);
  const veomni::SpeechStages stages =
      veomni::resolve_speech_stages(flags.stages_path, flags.audio_out, flags.model_dir);
  apply_thinker_stage(app, stages.thinker, flags);
  flags.generate.cuda_graphs = !eager;
  veomni::validate_sampling_options(sampling);

  const std::vector<veomni::PromptRecord> records = veomni::read_prompt_file(flags.prompts_path);
  const veomni::Device device = generation_device(flags.device);
  veomni::GenerationModel loaded = veomni::load_generation_model(flags.model_dir, device);
  spdlog::info("model: {} from {}, device {}", loaded.model_type, loaded.source, device.str());
  veomni::PromptText text(loaded.tokenizer_dir, flags.chat_template);
  std::vector<std::optional<veomni::Sample>> media =
      veomni::encode_media_prompts(records, loaded, flags.model_dir, flags.chat_template);
  const bool any_media = std::any_of(media.begin(), media.end(), [](const auto& m) { return m.has_value(); });
  const std::vector<std::vector<int64_t>> prompts = prompt_ids(records, media, text, loaded.config);

  flags.generate.stop_token_ids = loaded.eos_token_ids;
  flags.generate.mrope_positions = loaded.mrope;
  for (int64_t id : flags.stop_token_ids) {
    VEOMNI_INPUT_CHECK(id >= 0 && id < loaded.config.vocab_size,
                       "--stop-token-ids: {} is outside the model vocabulary [0, {})", id, loaded.config.vocab_size);
    flags.generate.stop_token_ids.push_back(id);
  }
  std::unique_ptr<veomni::OmniSpeaker> speaker;
  if (stages.runs("talker")) {
    VEOMNI_INPUT_CHECK(!any_media, "--audio-out / the talker stage speaks replies to text prompts only, and {} has "
                                   "prompts with media parts", flags.prompts_path);
    speaker = std::make_unique<veomni::OmniSpeaker>(flags.model_dir, stages);
    // transformers' generate(return_audio=True) stops the thinker at <|im_end|>.
    flags.generate.stop_token_ids.push_back(speaker->ids().im_end);
    spdlog::info("speaking: stages {}, speaker {}", fmt::join(stages.stages, ", "), stages.speaker);
  }
  veomni::Generator generator(*loaded.model, flags.generate);
  // Media prompts prefill through the model's encoders, every batch of them (text prompts beside them included).
  if (any_media) generator.set_prefill_builder(veomni::MultimodalPrefill(loaded.multimodal->body(), std::move(media)));
  std::vector<veomni::OmniSpeaker::Speech> speech;
  std::string jsonl;
  int64_t prompt_tokens = 0, new_tokens = 0;
  double prefill_s = 0, decode_s = 0;
  int64_t decode_steps = 0, graph_steps = 0;
  for (size_t first = 0; first < prompts.size(); first += static_cast<size_t>(flags.batch_size)) {
    const size_t end = std::min(prompts.size(), first + static_cast<size_t>(flags.batch_size));
    const std::vector<std::vector<int64_t>> batch(prompts.begin() + static_cast<std::ptrdiff_t>(first),
                                                  prompts.begin() + static_cast<std::ptrdiff_t>(end));
    const std::vector<veomni::Generation> out = generator.generate(batch, static_cast<int64_t>(first));
    for (size_t i = 0; i < out.size(); ++i) {
      const auto index = static_cast<int64_t>(first + i);
      nlohmann::ordered_json line = output_line(index, out[i], text);
      if (speaker) {
        speech.push_back(speaker->speak(*loaded.model, prompts[first + i], out[i].token_ids, index,
                                        records[first + i].location));
        add_speech(line, speech.back(), speaker->talker().config().num_code_groups, flags.audio_out);
      }
      jsonl += line.dump() + "\n";
      prompt_tokens += out[i].prompt_tokens;
      new_tokens += static_cast<int64_t>(out[i].token_ids.size());
    }
    prefill_s += out.front().prefill_s;
    decode_s += out.front().decode_s;
    decode_steps += out.front().decode_steps;
    graph_steps += out.front().graph_steps;
  }
  if (!flags.audio_out.empty()) veomni::write_audio_files(flags.audio_out, speech);
  write_output(flags.out_path, jsonl);
  spdlog::info("done: {} prompts, {} prompt tokens, {} new tokens; prefill {:.1f} tok/s, decode {:.1f} tok/s",
               prompts.size(), prompt_tokens, new_tokens,
               static_cast<double>(prompt_tokens) / std::max(prefill_s, 1e-9),
               static_cast<double>(new_tokens) / std::max(decode_s, 1e-9));
  spdlog::info("decode steps: {}, {} of them replayed as a CUDA graph", decode_steps, graph_steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool(kTool, [&] { return generate_main(argc, argv); });
}
