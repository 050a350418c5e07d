// Loads HuggingFace weights into a ParamStore and exports them back, in stacked (v5) or per-expert expert naming.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/param.h"
#include "model/weight_source.h"

namespace veomni {

// How expert tensors are named on disk: per expert (`mlp.experts.{e}.{gate,up,down}_proj.weight`, what
// transformers 5.x save_pretrained writes) or stacked (`mlp.experts.gate_up_proj` [E, 2I, H], `...down_proj`).
enum class ExpertNaming { PerExpert, Stacked };

// This rank's rows of one parameter read from the source (exact name, or the per-expert tensors stacked on dim 0
// with gate/up concatenated on dim 1), as a CPU tensor of `dtype`. A missing or mis-shaped tensor, a non-floating
// one, or one holding NaN or Inf, is an InputError naming it and its file.
Tensor read_hf_parameter(const WeightSource& source, const Parameter& param, DType dtype);

// Checks that the source holds the parameter's tensors (this rank's experts' when per-expert) in its shape, reading
// no values: the InputError read_hf_parameter would throw for a missing or mis-shaped tensor.
void check_hf_parameter(const WeightSource& source, const Parameter& param);
// Elements [begin, begin + count) of the parameter's local rows (flattened) in f32, reading only the rows that
// hold them; the checks of read_hf_parameter apply to those rows.
void read_hf_elements(const WeightSource& source, const Parameter& param, int64_t begin, int64_t count, float* out);

// Fills every parameter's value (which must be materialised) in its own dtype and device, except those named in
// `skip` (left as they are: a value head the source does not have). A tied lm_head is not a parameter, so a
// checkpoint without lm_head.weight loads; tensors of the source that are no parameter (a causal LM's lm_head.weight
// under a value head) are not read.
void load_hf_weights(ParamStore& store, const WeightSource& source, const std::set<std::string>& skip = {});
// The same, and a deferred parameter (Parameter::deferred) gets start values that read its rows from the source
// when FSDP fills its shard (the source stays open until then); its tensors' presence and shapes are checked now.
void load_hf_weights(ParamStore& store, const std::shared_ptr<const WeightSource>& source,
                     const std::set<std::string>& skip = {});

struct HfTensorSpec {
  std::string name;
  Shape shape;
};
using HfTensorSink = std::function<void(const std::string& name, const Tensor& tensor)>;

// The HF tensors a parameter of full shape `shape` is written as (for declaring a writer's layout up front).
std::vector<HfTensorSpec> hf_tensor_specs(const std::string& name, const Shape& shape, ExpertNaming naming);
// Hands the full tensor of parameter `name` to the sink under its HF name(s), splitting experts when per-expert.
void export_hf_tensor(const std::string& name, const Tensor& full, ExpertNaming naming, const HfTensorSink& sink);
// Every parameter of the store in registration order, as CPU tensors in the values' dtype. Values must be
// materialised and hold all rows (gather expert-parallel shards first).
void export_hf_weights(ParamStore& store, ExpertNaming naming, const HfTensorSink& sink);

}  // namespace veomni
