// Model FLOPs utilisation (MFU) as VeOmni counts it: the matmul FLOPs of a training step against the GPU's peak.
#pragma once
#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "model/model_head.h"

namespace veomni {

// N of the formula: the weights each token multiplies through, per layer H·(2q + 2kv) for the attention projections
// plus 3·H·I for a dense MLP or H·E (router) + 3·H·I_moe·topk for a sparse one, plus the head: V·H for the LM head
// (tied or not), H for a reward or value head.
double matmul_params_per_token(const ModelConfig& config, ModelHead head);

// What one optimizer step computed, summed over every rank: tokens, and the sum over packed sequences of their
// squared lengths (attention's quadratic term).
struct StepWork {
  double tokens = 0;
  double sum_squared_seqlens = 0;
  bool reference_forward = false;  // a frozen reference model ran a forward pass too (DPO)
};

// FLOPs of a training step: 6·N·tokens + 12·Σ s²·head_dim·heads·layers (forward 1/3, backward 2/3, the full s²
// attention term as VeOmni counts it, not the causal half); a reference forward adds a third of that (2·N per token
// and 4·Σ s²·head_dim·heads·layers) at the LM head's N.
double train_step_flops(const ModelConfig& config, ModelHead head, const StepWork& work);

// Dense bf16 peak FLOP/s of one GPU by the name the driver gives (cudaDeviceProp::name): H100 SXM and H200 989.4
// TFLOP/s, H100 PCIe 756, H100 NVL 835, A100 312. 0 for a GPU not in the table (MFU is then not reported).
double peak_bf16_flops_per_second(const std::string& gpu_name);

}  // namespace veomni
