// PEFT's adapter directory from our LoRA adapters (names, expert layouts, adapter_config.json) and the merged delta.
#include "ckpt/peft_adapter.h"

#include <set>

#include <fmt/format.h>

#include "ckpt/staged_directory.h"
#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"

namespace veomni {

namespace {

constexpr std::string_view kPeftPrefix = "base_model.model.";
constexpr std::string_view kExperts = ".mlp.experts.";

struct AdapterPair {
  Tensor a, b;
};

// "<base>.lora_A.weight" / "<base>.lora_B.weight" grouped by <base> (a module, or an experts' tensor name).
std::map<std::string, AdapterPair> adapter_pairs(const std::map<std::string, Tensor>& adapters) {
  std::map<std::string, AdapterPair> pairs;
  for (const auto& [name, value] : adapters) {
    const bool is_a = name.ends_with(".lora_A.weight"), is_b = name.ends_with(".lora_B.weight");
    VEOMNI_INPUT_CHECK(is_a || is_b, "'{}' is no LoRA adapter tensor (expected <module>.lora_A.weight or "
                       "<module>.lora_B.weight)", name);
    AdapterPair& pair = pairs[name.substr(0, name.size() - std::string_view(".lora_A.weight").size())];
    (is_a ? pair.a : pair.b) = value.to(Device::cpu()).to_dtype(DType::F32);
  }
  for (const auto& [base, pair] : pairs)
    VEOMNI_INPUT_CHECK(pair.a.defined() && pair.b.defined(), "LoRA adapter of {} has {} but no {}", base,
                       pair.a.defined() ? "lora_A" : "lora_B", pair.a.defined() ? "lora_B" : "lora_A");
  return pairs;
}

bool is_expert_tensor(const std::string& base) {
  return base.find(kExperts) != std::string::npos &&
         (base.ends_with(".experts.gate_up_proj") || base.ends_with(".experts.down_proj"));
}

std::string experts_module(const std::string& base) { return base.substr(0, base.rfind('.')); }

// Expert adapters in PEFT's target_parameters layout: A [E*r, in] (row e*r + k), B [out, E*r] (column k*E + e).
std::pair<Tensor, Tensor> peft_expert_layout(const AdapterPair& pair, int64_t experts) {
  const bool shared = pair.a.ndim() == 2;
  const int64_t r = pair.a.dim(-2), in = pair.a.dim(-1), out = pair.b.dim(-2);
  Tensor a = Tensor::empty({experts * r, in}, DType::F32), b = Tensor::empty({out, experts * r}, DType::F32);
  const float* src_a = pair.a.data<float>();
  const float* src_b = pair.b.data<float>();
  float* dst_a = a.data<float>();
  float* dst_b = b.data<float>();
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t from = shared ? 0 : e;
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < in; ++i) dst_a[(e * r + k) * in + i] = src_a[(from * r + k) * in + i];
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < r; ++k) dst_b[o * experts * r + k * experts + e] = src_b[(from * out + o) * r + k];
  }
  return {a, b};
}

}  // namespace

std::string lora_base_weight_name(const std::string& adapter_name) {
  for (const std::string_view suffix : {std::string_view(".lora_A.weight"), std::string_view(".lora_B.weight")}) {
    if (!adapter_name.ends_with(suffix)) continue;
    const std::string base = adapter_name.substr(0, adapter_name.size() - suffix.size());
    return is_expert_tensor(base) ? base : base + ".weight";
  }
  return "";
}

std::vector<PeftTensor> peft_adapter_tensors(const std::map<std::string, Tensor>& adapters, int64_t num_experts) {
  const std::map<std::string, AdapterPair> pairs = adapter_pairs(adapters);
  std::vector<PeftTensor> out;
  for (const auto& [base, pair] : pairs) {
    if (!is_expert_tensor(base)) {
      out.push_back({fmt::format("{}{}.lora_A.weight", kPeftPrefix, base), pair.a});
      out.push_back({fmt::format("{}{}.lora_B.weight", kPeftPrefix, base), pair.b});
      continue;
    }
    VEOMNI_INPUT_CHECK(num_experts > 0, "{}: an expert adapter in a model without experts", base);
    VEOMNI_INPUT_CHECK(pair.a.ndim() == 2 || pair.a.dim(0) == num_experts,
                       "{}.lora_A.weight has {} experts, the model {}", base, pair.a.dim(0), num_experts);
    const std::string module = experts_module(base);
    const bool nested = base.ends_with(".gate_up_proj") && pairs.contains(module + ".down_proj");
    const std::string at = fmt::format("{}{}{}", kPeftPrefix, module, nested ? ".base_layer" : "");
    auto [a, b] = peft_expert_layout(pair, num_experts);
    out.push_back({at + ".lora_A.weight", a});
    out.push_back({at + ".lora_B.weight", b});
  }
  return out;
}

nlohmann::ordered_json peft_adapter_config(const std::map<std::string, Tensor>& adapters, const LoraConfig& lora,
                                           const std::string& base_model) {
  const std::map<std::string, AdapterPair> pairs = adapter_pairs(adapters);
  std::vector<std::string> modules;
  std::map<std::string, std::set<std::string>> expert_tensors;  // tensor -> the experts modules adapting it
  std::set<std::string> experts_modules;
  for (const auto& [base, pair] : pairs) {
    if (!is_expert_tensor(base)) {
      modules.push_back(base);
      continue;
    }
    experts_modules.insert(experts_module(base));
    expert_tensors[base.substr(base.rfind('.') + 1)].insert(experts_module(base));
  }
  nlohmann::ordered_json parameters = nlohmann::ordered_json::array();
  nlohmann::ordered_json rank_pattern = nlohmann::ordered_json::object();
  nlohmann::ordered_json alpha_pattern = nlohmann::ordered_json::object();
  for (const auto& [base, pair] : pairs) {
    // An experts' gate_up_proj standing for gate_proj and up_proj has rank 2r and alpha 2*alpha, as PEFT writes it.
    const int64_t rank = pair.a.dim(-2);
    if (!is_expert_tensor(base) || rank == lora.rank) continue;
    const std::string pattern = ".*\\." + base.substr(base.rfind('.') + 1);
    rank_pattern[pattern] = rank;
    alpha_pattern[pattern] = lora.alpha * static_cast<double>(rank) / static_cast<double>(lora.rank);
  }
  for (const char* tensor : {"gate_up_proj", "down_proj"}) {
    const auto found = expert_tensors.find(tensor);
    if (found == expert_tensors.end()) continue;
    VEOMNI_INPUT_CHECK(found->second == experts_modules,
                       "the experts' {} is adapted in {} of the {} MoE layers with adapters: PEFT's target_parameters "
                       "adapts a tensor in every layer (hint: write the merged model instead)",
                       tensor, found->second.size(), experts_modules.size());
    parameters.push_back(fmt::format("mlp.experts.{}", tensor));
  }
  nlohmann::ordered_json config;
  config["peft_type"] = "LORA";
  config["task_type"] = "CAUSAL_LM";
  config["base_model_name_or_path"] = base_model;
  config["r"] = lora.rank;
  config["lora_alpha"] = lora.alpha;
  config["use_rslora"] = lora.use_rslora;
  config["lora_dropout"] = 0.0;
  config["bias"] = "none";
  config["fan_in_fan_out"] = false;
  config["init_lora_weights"] = true;
  config["target_modules"] = modules;
  if (!parameters.empty()) config["target_parameters"] = parameters;
  if (!rank_pattern.empty()) {
    config["rank_pattern"] = rank_pattern;
    config["alpha_pattern"] = alpha_pattern;
  }
  return config;
}

void add_lora_delta(Tensor& weight, const Tensor& lora_a, const Tensor& lora_b, double scale) {
  VEOMNI_CHECK(weight.is_cpu() && weight.dtype() == DType::F32, "add_lora_delta needs a CPU f32 weight");
  const Tensor a = lora_a.to(Device::cpu()).to_dtype(DType::F32), b = lora_b.to(Device::cpu()).to_dtype(DType::F32);
  const bool experts = weight.ndim() == 3;
  const int64_t count = experts ? weight.dim(0) : 1;
  const int64_t out = weight.dim(-2), in = weight.dim(-1), r = a.dim(-2);
  const bool shared = a.ndim() == 2;
  VEOMNI_CHECK(a.dim(-1) == in && b.dim(-2) == out && b.dim(-1) == r && (shared || a.dim(0) == count),
               "LoRA shapes A {} B {} do not fit the weight {}", shape_str(a.shape()), shape_str(b.shape()),
               shape_str(weight.shape()));
  float* w = weight.data<float>();
  for (int64_t e = 0; e < count; ++e) {
    const float* ae = a.data<float>() + (shared ? 0 : e * r * in);
    const float* be = b.data<float>() + (shared ? 0 : e * out * r);
    float* we = w + e * out * in;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (int64_t k = 0; k < r; ++k) sum += static_cast<double>(be[o * r + k]) * ae[k * in + i];
        we[o * in + i] += static_cast<float>(scale * sum);
      }
  }
}

void write_peft_adapter_dir(const std::string& out_dir, const std::map<std::string, Tensor>& adapters,
                            int64_t num_experts, const LoraConfig& lora, const std::string& base_model,
                            bool overwrite) {
  const std::vector<PeftTensor> tensors = peft_adapter_tensors(adapters, num_experts);
  const nlohmann::ordered_json config = peft_adapter_config(adapters, lora, base_model);
  StagedDirectory dir(out_dir, overwrite);
  SafetensorsWriter writer(dir.file("adapter_model.safetensors"), {{"format", "pt"}});
  for (const PeftTensor& t : tensors) writer.declare(t.name, DType::F32, t.value.shape());
  for (const PeftTensor& t : tensors) writer.write(t.name, t.value);
  writer.finish();
  write_json_file(dir.file("adapter_config.json"), config);
  dir.commit();
}

}  // namespace veomni
