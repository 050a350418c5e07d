// LoRA adapters beside frozen projections: y += scale * (x A^T) B^T, their backward, and a model's adapter registry.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/lora_config.h"
#include "model/param.h"

namespace veomni {

// What a model's adapters share: the settings, whether the adapters apply (off: the base model exactly), and the
// adapter-capable modules its layers offered while registering (to report lora_modules entries that match none).
class LoraRegistry {
 public:
  explicit LoraRegistry(const LoraConfig& config);

  const LoraConfig& config() const { return config_; }
  float scale() const { return scale_; }
  bool applied() const { return applied_; }
  void set_applied(bool applied) { applied_ = applied; }

  // Records `module` (a weight's name without ".weight", or an expert tensor's name) as adapter-capable and says
  // whether the settings target it.
  bool offer(const std::string& module);
  const std::vector<std::string>& capable_modules() const { return capable_; }

 private:
  LoraConfig config_;
  float scale_;
  bool applied_ = true;
  std::vector<std::string> capable_;
};

// `<module>.lora_A.weight` / `<module>.lora_B.weight`: PEFT's names without its `base_model.model.` prefix.
std::string lora_a_name(const std::string& module);
std::string lora_b_name(const std::string& module);
// Whether a parameter name is an adapter's.
bool is_lora_param_name(const std::string& name);
// The module a weight parameter belongs to: its name without a trailing ".weight".
std::string module_of_weight(const std::string& weight_name);

// The adapter of one projection W [out, in] (or of rows [row_begin, row_end) of it: the fused qkv): A [r, in] and
// B [out, r]. A default-constructed adapter is none. Copies share the parameters.
class LoraAdapter {
 public:
  LoraAdapter() = default;

  // When the store's LoRA settings target the module of `weight` (just registered: the adapter's parameters
  // follow it in its group), registers and returns its adapter; else none.
  static LoraAdapter attach(ParamStore& store, const Parameter& weight);
  // The same adapter over output rows [begin, end) (B's rows): for layers that use a fused weight by row blocks.
  LoraAdapter rows(int64_t begin, int64_t end) const;

  bool exists() const { return a_ != nullptr; }
  // Exists and the model's adapters are applied.
  bool active() const { return a_ != nullptr && registry_->applied(); }

  // y [N, out] = scale * (x A^T) B^T + y_beta * y when active (y_beta 0: y is overwritten, and the base GEMM can then
  // add onto it, reading y once instead of twice); a defined addend (y's shape and dtype) stands in for y on the
  // right (ops::matmul's addend: a residual connection). Returns x A^T [N, r] (backward's input) when active and
  // save, else an undefined tensor.
  Tensor forward(const Tensor& x, Tensor& y, bool save, float y_beta = 1.0f, const Tensor& addend = Tensor()) const;
  // For a forward that returned xa (defined): dx = scale * (dy B) A + dx_beta * dx, dB += scale * dy^T xa, dA +=
  // scale * (dy B)^T x. dx is left alone when undefined (an input nothing upstream needs).
  void backward(const Tensor& x, Tensor xa, const Tensor& dy, Tensor& dx, float dx_beta = 1.0f) const;

  // The split form, for projections that read one input and stack their down-projections into one GEMM
  // (SharedInputLinears): the down-projection's parameter A [r, in], the up-projection y [N, out] = scale * h B^T +
  // y_beta * y from h^T = A x^T [r, N] (taken elsewhere), and its backward: dht [r, N] = B^T dy^T (overwritten; the
  // caller takes dA and dx from it), dB += scale * dy^T h.
  Parameter& a_param() const { return *a_; }
  // B [out, r] (all its rows, whatever rows() selected).
  Parameter& b_param() const { return *b_; }
  float scale() const;
  void up_forward(const Tensor& ht, Tensor& y, float y_beta = 1.0f) const;
  void up_backward(const Tensor& ht, const Tensor& dy, Tensor& dht) const;

 private:
  Tensor b_rows(const Tensor& full) const;

  const LoraRegistry* registry_ = nullptr;
  Parameter* a_ = nullptr;
  Parameter* b_ = nullptr;
  int64_t row_begin_ = 0;
  int64_t row_end_ = -1;
};

}  // namespace veomni
