// Batched text generation with a KV cache: the prompts of a batch are prefilled packed in one forward, then every
// unfinished sequence decodes one token per step, reading and extending its rows of the per-layer caches.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "generate/sampling.h"
#include "model/causal_lm.h"

namespace veomni {

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t max_new_tokens = 256;
  std::vector<int64_t> stop_token_ids;  // a generated stop token ends its sequence (and is kept in its tokens)
  // The model rotates with M-RoPE (Qwen3-VL, the Qwen3-Omni thinker): text-only prompts take [3, S] positions, the
  // three streams equal; a decoded token's are the prompt's last position + 1, and so on.
  bool mrope_positions = false;
  // Decode steps on a CUDA device replay a recorded graph (generate/decode_steps.h) unless a MoE layer's step reads
  // its expert counts back to the host (MoeBlock::decodes_on_device: adapters on the experts, or more than 512
  // (row, expert) pairs a step); false runs every step op by op (veomni-generate --eager).
  bool cuda_graphs = true;
  // Greedy decoding (no repetition penalty, no logits observer) runs this many steps between reads to the host: each
  // step's chosen ids feed the next on the device (DecodeSteps::run_greedy), and the next run is queued from the
  // device's tables before the host reads the last (GreedyPipeline). A sequence that stops inside a run keeps only
  // its tokens up to the stop (the steps after it, in that run and the one queued after it, are computed and
  // dropped; its row stays in the batch until they end, which a device's GEMMs may round differently). 1: a read
  // every step.
  int64_t steps_per_sync = 1;
};

// The prefill of a batch whose input embeddings are not only its token ids' (a multimodal model's prompts with media:
// generate/media_prompt.h), from the batch's prompts (the ids the generator was given) and the index of its first.
struct PrefillInputs {
  Tensor embeds;     // [S, hidden]: the prompts packed in order, on the model's device in its compute dtype
  Tensor positions;  // [3, S] M-RoPE positions
  TextBody::LayerCallback after_layer;   // run on each decoder layer's output (deepstack); may be empty
  std::vector<int64_t> next_positions;  // per prompt: the position of its first generated token
};
using PrefillBuilder =
    std::function<PrefillInputs(const std::vector<std::vector<int64_t>>& prompts, int64_t first_index)>;

// What one prompt produced.
struct Generation {
  std::vector<int64_t> token_ids;  // the new tokens (a final stop token included)
  std::string finish_reason;       // "stop" (a stop token) or "length" (max_new_tokens)
  int64_t prompt_tokens = 0;
  double prefill_s = 0;  // the batch's prefill and decode wall times
  double decode_s = 0;
  int64_t decode_steps = 0;  // the batch's decode steps, and how many of them replayed a recorded graph
  int64_t graph_steps = 0;
};

class Generator {
 public:
  // The model must be built without parallel hooks, its weights loaded; it stays owned by the caller. Its decoding
  // weights are fused here (TextBody::fuse_for_decoding: same values, same memory).
  Generator(CausalLM& model, GenerateOptions options);

  // Generates for one batch of prompts (non-empty token ids each). first_index is the index of the batch's first
  // prompt in the whole input: it selects each prompt's random stream, so results do not depend on the batching.
  std::vector<Generation> generate(const std::vector<std::vector<int64_t>>& prompts, int64_t first_index);

  // Observes the f32 host logits [N, V] each step chooses from (before the repetition penalty), row i belonging to
  // the batch's prompt rows[i] (tests compare them with a full forward).
  using LogitsObserver = std::function<void(const std::vector<int64_t>& rows, const Tensor& logits)>;
  void set_logits_observer(LogitsObserver observer) { observer_ = std::move(observer); }
  // Prefills every batch through `builder` (M-RoPE models only); decoding then continues each sequence's positions
  // from its next_positions, the three streams equal.
  void set_prefill_builder(PrefillBuilder builder);

 private:
  CausalLM& model_;
  GenerateOptions options_;
  LogitsObserver observer_;
  PrefillBuilder prefill_builder_;
};

}  // namespace veomni
