// Parameters with their HuggingFace names and full shapes, grouped per layer: the unit FSDP gathers and frees.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace veomni {

class LoraRegistry;

struct Parameter {
  std::string name;   // HF name, e.g. "model.layers.0.self_attn.q_proj.weight" (v5 stacked names for experts)
  Shape shape;        // full logical shape
  bool is_expert = false;  // [E, ...] expert weights: split over EP groups along dim 0
  int64_t group = -1;      // index of its ParamGroup
  // Rows [local_begin, local_end) of dim 0 are this rank's (expert parallelism: E/ep experts). value and grad hold
  // only those rows; local_end == -1 means all rows.
  int64_t local_begin = 0;
  int64_t local_end = -1;
  // false: a frozen weight (the base model under LoRA). It gets no gradient (backward skips its weight-gradient
  // GEMM), no float32 master copy and no optimizer state; it is held in the compute dtype only.
  bool trainable = true;
  // The full tensor used by compute while materialised (the compute dtype; f32 on the CPU reference path).
  // Without FSDP it is always materialised; under FSDP it is only between gather and release.
  Tensor value;
  // Gradient of the full tensor (same shape, f32), accumulated by backward; undefined until first written.
  Tensor grad;
  // Deferred (ParamStore::defer_values): the parameter is not materialised; initialisation and loading record here
  // how to produce its start values instead of writing them into `value`: elements [begin, begin + count) of its
  // local rows, flattened row-major, in f32. FSDP then fills only this rank's shard from it, so no rank ever holds
  // the whole tensor. Unset on a deferred parameter: zeros (a resume, whose checkpoint overwrites the shards).
  bool deferred = false;
  std::function<void(int64_t begin, int64_t count, float* out)> start_values;

  // The shape of this rank's rows (the full shape unless expert-parallel).
  Shape local_shape() const;
  int64_t local_row_end() const { return local_end < 0 ? shape.at(0) : local_end; }
  // Whether initialisation or loading can give it start values: materialised, or deferred.
  bool takes_start_values() const { return value.defined() || deferred; }
};

// The parameters of one unit (embedding, each decoder layer, final norm + lm_head): gathered together.
struct ParamGroup {
  std::string name;  // "embed", "layers.3", "head"
  std::vector<Parameter*> params;
};

class ParamStore {
 public:
  // Registers a parameter in the current group (see begin_group); returns a stable pointer.
  Parameter* add(const std::string& name, const Shape& shape, bool is_expert = false);
  void begin_group(const std::string& group_name);
  // The model's LoRA settings while its layers register (null: no LoRA). Layers that can carry an adapter ask it
  // whether theirs is targeted and register the adapter right after their weight (model/layers/lora_adapter.h).
  void set_lora(std::shared_ptr<LoraRegistry> lora) { lora_ = std::move(lora); }
  LoraRegistry* lora() const { return lora_.get(); }
  // Lists an already registered parameter in the current group as well (tied weights: the head group uses the
  // embedding). Its `group` stays the owner's, so hooks can tell an owned parameter from a shared one.
  void add_shared(Parameter* param);

  Parameter* find(const std::string& name);  // nullptr when absent
  Parameter& at(const std::string& name);    // throws InputError naming the parameter when absent
  const std::vector<std::unique_ptr<Parameter>>& all() const { return params_; }
  std::vector<ParamGroup>& groups() { return groups_; }
  int64_t num_elements() const;

  // Allocates value tensors (zeros) for every parameter on a device/dtype; used by the single-process path.
  void materialize_all(Device device, DType dtype);
  // Materialises nothing: every parameter is deferred (Parameter::start_values) until FSDP builds its shards on
  // `device` from the start values, so that a rank's host memory holds its share of the model, never all of it.
  void defer_values(Device device);
  // The device defer_values named (the CPU when never called).
  Device deferred_device() const { return deferred_device_; }
  // Sets every trainable parameter's grad to zero (allocating f32 zeros where undefined); frozen ones keep none.
  void zero_grads();

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unordered_map<std::string, Parameter*> by_name_;  // lookups stay O(1): a model has thousands of parameters
  std::vector<ParamGroup> groups_;
  std::shared_ptr<LoraRegistry> lora_;
  Device deferred_device_ = Device::cpu();
};

}  // namespace veomni
