// The parameter registry: HF-named parameters, their groups, and single-process or deferred materialisation.
#include "model/param.h"

namespace veomni {

Shape Parameter::local_shape() const {
  Shape local = shape;
  if (!local.empty()) local[0] = local_row_end() - local_begin;
  return local;
}

void ParamStore::begin_group(const std::string& group_name) {
  for (const ParamGroup& group : groups_)
    VEOMNI_CHECK(group.name != group_name, "parameter group '{}' registered twice", group_name);
  groups_.push_back(ParamGroup{group_name, {}});
}

Parameter* ParamStore::add(const std::string& name, const Shape& shape, bool is_expert) {
  VEOMNI_CHECK(!groups_.empty(), "parameter '{}' added before any group was begun", name);
  VEOMNI_CHECK(find(name) == nullptr, "parameter '{}' registered twice", name);
  VEOMNI_CHECK(!is_expert || !shape.empty(), "expert parameter '{}' needs a leading expert dimension", name);
  auto param = std::make_unique<Parameter>();
  param->name = name;
  param->shape = shape;
  param->is_expert = is_expert;
  param->group = static_cast<int64_t>(groups_.size()) - 1;
  Parameter* raw = param.get();
  params_.push_back(std::move(param));
  by_name_.emplace(name, raw);
  groups_.back().params.push_back(raw);
  return raw;
}

void ParamStore::add_shared(Parameter* param) {
  VEOMNI_CHECK(!groups_.empty() && param != nullptr, "shared parameter without a group");
  VEOMNI_CHECK(find(param->name) == param, "shared parameter '{}' is not registered in this store", param->name);
  groups_.back().params.push_back(param);
}

Parameter* ParamStore::find(const std::string& name) {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Parameter& ParamStore::at(const std::string& name) {
  Parameter* param = find(name);
  if (!param) throw InputError(fmt::format("model has no parameter named '{}'", name));
  return *param;
}

int64_t ParamStore::num_elements() const {
  int64_t total = 0;
  for (const auto& param : params_) total += shape_numel(param->shape);
  return total;
}

void ParamStore::materialize_all(Device device, DType dtype) {
  for (const auto& param : params_) {
    param->value = Tensor::zeros(param->local_shape(), dtype, device);
    param->deferred = false;
    param->start_values = nullptr;
  }
}

void ParamStore::defer_values(Device device) {
  deferred_device_ = device;
  for (const auto& param : params_) {
    param->value = Tensor();
    param->deferred = true;
  }
}

void ParamStore::zero_grads() {
  for (const auto& param : params_) {
    if (!param->trainable) continue;
    if (param->grad.defined()) {
      param->grad.zero_();
    } else {
      const Device device = param->value.defined() ? param->value.device() : Device::cpu();
      param->grad = Tensor::zeros(param->local_shape(), DType::F32, device);
    }
  }
}

}  // namespace veomni
