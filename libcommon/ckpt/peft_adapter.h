// LoRA adapters as PEFT stores them (adapter_model.safetensors + adapter_config.json, what
// peft.PeftModel.from_pretrained loads onto the HF base), and merged into the base weights (W + scale * B A).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "model/lora_config.h"

namespace veomni {

// One tensor of adapter_model.safetensors.
struct PeftTensor {
  std::string name;
  Tensor value;  // f32, CPU
};

// Our adapters (full tensors on the CPU, keyed by our names: `<module>.lora_A.weight` [r, in], `.lora_B.weight`
// [out, r]; experts `<layer>.mlp.experts.{gate_up_proj,down_proj}.lora_{A,B}.weight` [E, r, in] / [E, out, r], or
// [r, in] / [out, r] when shared) as PEFT names and lays them out:
//   linear modules: "base_model.model.<module>.lora_A.weight" [r, in], "...lora_B.weight" [out, r];
//   expert tensors (PEFT's target_parameters, transformers v5 [E, out, in] experts): "<layer>.mlp.experts" becomes
//   "base_model.model.<layer>.mlp.experts.lora_A.weight" [E*r, in] (row e*r + k = expert e's row k) and
//   "...lora_B.weight" [out, E*r] (column k*E + e = expert e's column k); when a layer adapts both tensors,
//   gate_up_proj's adapter sits one level in, at "...mlp.experts.base_layer.lora_{A,B}.weight". A shared adapter is
//   written once per expert (the same delta for every expert, which is what it computes).
// num_experts: the model's experts per MoE layer (0 for a dense model). InputError when a tensor is not an adapter
// or an A has no B.
std::vector<PeftTensor> peft_adapter_tensors(const std::map<std::string, Tensor>& adapters, int64_t num_experts);

// adapter_config.json of those adapters: peft_type LORA, task_type CAUSAL_LM, r, lora_alpha, use_rslora, lora_dropout
// 0, bias none, target_modules (the adapted linear modules' full names), target_parameters (mlp.experts.gate_up_proj
// and/or mlp.experts.down_proj, in that order, when experts are adapted), base_model_name_or_path. InputError when
// expert adapters sit on some MoE layers only (PEFT's target_parameters names a tensor in every layer).
nlohmann::ordered_json peft_adapter_config(const std::map<std::string, Tensor>& adapters, const LoraConfig& lora,
                                           const std::string& base_model);

// Adds scale * B A to a base weight (CPU f32, in place): [out, in] += scale * B [out, r] A [r, in]; experts
// [E, out, in] += scale * B_e A_e with per-expert A [E, r, in], B [E, out, r] or shared A [r, in], B [out, r].
void add_lora_delta(Tensor& weight, const Tensor& lora_a, const Tensor& lora_b, double scale);

// The adapted weight's name of an adapter tensor: "<module>.lora_A.weight" -> "<module>.weight" for a linear module,
// "<layer>.mlp.experts.gate_up_proj.lora_A.weight" -> "<layer>.mlp.experts.gate_up_proj"; "" for other names.
std::string lora_base_weight_name(const std::string& adapter_name);

// Writes <out_dir>/adapter_model.safetensors and adapter_config.json atomically (a staged directory); an existing
// non-empty out_dir is an InputError unless overwrite.
void write_peft_adapter_dir(const std::string& out_dir, const std::map<std::string, Tensor>& adapters,
                            int64_t num_experts, const LoraConfig& lora, const std::string& base_model,
                            bool overwrite);

}  // namespace veomni
