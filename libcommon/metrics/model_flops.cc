// The FLOPs count of VeOmni's MFU formula and the peak-throughput table it is measured against.
#include "metrics/model_flops.h"

#include <array>
#include <string_view>

namespace veomni {

double matmul_params_per_token(const ModelConfig& c, ModelHead head) {
  const double h = static_cast<double>(c.hidden_size);
  double params = 0;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    params += h * static_cast<double>(2 * c.q_size() + 2 * c.kv_size());
    params += c.layer_is_sparse(layer)
                  ? h * static_cast<double>(c.num_experts) +
                        3.0 * h * static_cast<double>(c.moe_intermediate_size * c.num_experts_per_tok)
                  : 3.0 * h * static_cast<double>(c.intermediate_size);
  }
  params += head == ModelHead::LanguageModel ? static_cast<double>(c.vocab_size) * h : h;
  return params;
}

double train_step_flops(const ModelConfig& c, ModelHead head, const StepWork& work) {
  const double attention_per_squared_token =
      static_cast<double>(c.head_dim * c.num_attention_heads * c.num_hidden_layers);
  double flops = 6.0 * matmul_params_per_token(c, head) * work.tokens +
                 12.0 * work.sum_squared_seqlens * attention_per_squared_token;
  if (work.reference_forward)
    flops += 2.0 * matmul_params_per_token(c, ModelHead::LanguageModel) * work.tokens +
             4.0 * work.sum_squared_seqlens * attention_per_squared_token;
  return flops;
}

double peak_bf16_flops_per_second(const std::string& gpu_name) {
  struct Entry {
    std::string_view name_part;  // matched in order: the more specific names first
    double tflops;
  };
  static constexpr std::array<Entry, 6> kTable{{{"H100 PCIe", 756.0},
                                                {"H100 NVL", 835.0},
                                                {"H100", 989.4},
                                                {"H200", 989.4},
                                                {"H800", 989.4},
                                                {"A100", 312.0}}};
  for (const Entry& e : kTable)
    if (gpu_name.find(e.name_part) != std::string::npos) return e.tflops * 1e12;
  return 0.0;
}

}  // namespace veomni
