// Test support: random weights for a small Qwen3-Omni directory whose config.json is already there (thinker text
// model, talker with its code predictor, code2wav; the media towers are left out: veomni-generate reads text
// prompts only), so that veomni-generate --audio-out has a whole model to speak with.
//
// Usage: make_omni_speech_toy DIR [SEED]
//   DIR/config.json  a qwen3_omni_moe config with talker_config and code2wav_config
//   writes DIR/model.safetensors: the thinker's language model, the talker and code2wav in transformers' names, with
//   values of order one (1/sqrt(fan_in) matrices) so that the thinker's embeddings weigh in the talker's input as
//   much as the codec embeddings do (HF's 0.02 init would leave every prompt the same talker input).
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "model/causal_lm.h"
#include "model/code2wav/code2wav.h"
#include "model/talker/talker.h"
#include "model/thinker/thinker_config.h"
#include "tests/unit/speech_test_util.h"

namespace {

void collect(veomni::ParamStore& store, std::vector<std::pair<std::string, veomni::Tensor>>& out) {
  for (const auto& p : store.all())
    if (p->value.defined()) out.emplace_back(p->name, p->value);
}

int run(const std::string& dir, uint32_t seed) {
  const veomni::ThinkerConfig thinker = veomni::load_thinker_config(dir);
  veomni::ModelOptions options;
  options.param_prefix = thinker.text_prefix;
  options.lm_head_name = thinker.lm_head_name;
  options.mrope_section = thinker.mrope_section;
  veomni::CausalLM text(thinker.text, options);
  veomni::speech_test::randomize(text.params(), seed);
  veomni::Talker talker(veomni::load_talker_config(dir));
  veomni::speech_test::randomize(talker.store(), seed + 1);
  veomni::Code2Wav code2wav(veomni::load_code2wav_config(dir));
  veomni::speech_test::randomize(code2wav.store(), seed + 2);
  std::vector<std::pair<std::string, veomni::Tensor>> tensors;
  collect(text.params(), tensors);
  collect(talker.store(), tensors);
  collect(code2wav.store(), tensors);
  veomni::write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  std::printf("wrote %s/model.safetensors: %zu tensors\n", dir.c_str(), tensors.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: make_omni_speech_toy DIR [SEED]\n");
    return 2;
  }
  try {
    return run(argv[1], argc == 3 ? static_cast<uint32_t>(std::stoul(argv[2])) : 7u);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_omni_speech_toy: %s\n", e.what());
    return 1;
  }
}
