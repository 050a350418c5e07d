// SharedInputLinears: the projections' base GEMMs one by one, their adapters' down-projections stacked.
#include "model/layers/shared_input_linears.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

std::vector<size_t> SharedInputLinears::stacked() const {
  std::vector<size_t> which;
  for (size_t i = 0; i < linears_.size(); ++i)
    if (linears_[i]->adapter().active()) which.push_back(i);
  if (which.size() < 2) which.clear();
  return which;
}

Tensor stacked_lora_a(const std::vector<const Linear*>& linears, const std::vector<size_t>& which) {
  const Tensor& first = linears[which[0]]->adapter().a_param().value;
  int64_t rows = 0;
  for (size_t i : which) rows += linears[i]->adapter().a_param().value.dim(0);
  Tensor a = Tensor::empty({rows, first.dim(1)}, first.dtype(), first.device());
  int64_t begin = 0;
  for (size_t i : which) {
    const Tensor& part = linears[i]->adapter().a_param().value;
    a.slice(begin, begin + part.dim(0)).copy_from(part);
    begin += part.dim(0);
  }
  return a;
}

Tensor SharedInputLinears::rows_of(const Tensor& stacked_rows, const std::vector<size_t>& which, size_t j) const {
  int64_t begin = 0;
  for (size_t k = 0; k < j; ++k) begin += linears_[which[k]]->adapter().a_param().value.dim(0);
  return stacked_rows.slice(begin, begin + linears_[which[j]]->adapter().a_param().value.dim(0));
}

SharedInputLinears::Output SharedInputLinears::forward(const Tensor& x, bool save) const {
  Output result;
  result.saved.parts.resize(linears_.size());
  const std::vector<size_t> which = stacked();
  if (which.empty()) {
    for (size_t i = 0; i < linears_.size(); ++i)
      result.out.push_back(take_out(linears_[i]->forward(x, save), result.saved.parts[i]));
    return result;
  }
  const Tensor a = stacked_lora_a(linears_, which);
  Tensor ht = empty_like(x, {a.dim(0), x.dim(0)});
  ops::matmul(a, false, x, true, ht);
  result.out.resize(linears_.size());
  std::vector<bool> adapted(linears_.size(), false);
  // As Linear::forward: each adapter's up-projection is written first and its base GEMM adds onto it.
  for (size_t j = 0; j < which.size(); ++j) {
    const Linear& linear = *linears_[which[j]];
    if (!linear.base_accumulates(x)) continue;
    Tensor& y = result.out[which[j]];
    y = empty_like(x, {x.dim(0), linear.weight().value.dim(0)});
    linear.adapter().up_forward(rows_of(ht, which, j), y, 0.0f);
    result.saved.parts[which[j]] = linear.forward_base_onto(x, y, save);
    adapted[which[j]] = true;
  }
  for (size_t i = 0; i < linears_.size(); ++i)
    if (!adapted[i]) result.out[i] = take_out(linears_[i]->forward_base(x, save), result.saved.parts[i]);
  for (size_t j = 0; j < which.size(); ++j)
    if (!adapted[which[j]]) linears_[which[j]]->adapter().up_forward(rows_of(ht, which, j), result.out[which[j]]);
  if (save) result.saved.lora_ht = ht;
  return result;
}

Tensor SharedInputLinears::backward(Saved&& saved, const std::vector<Tensor>& dys) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.parts.size() == linears_.size() && dys.size() == linears_.size(),
               "shared-input backward of {} projections with {} saved and {} gradients", linears_.size(),
               kept.parts.size(), dys.size());
  const Tensor x = kept.parts[0].x;
  if (!kept.lora_ht.defined()) {
    Tensor dx = linears_[0]->backward(std::move(kept.parts[0]), dys[0]);
    for (size_t i = 1; i < linears_.size(); ++i)
      linears_[i]->backward_accumulate(std::move(kept.parts[i]), dys[i], dx);
    return dx;
  }

  const std::vector<size_t> which = stacked();
  const Tensor ht = std::move(kept.lora_ht);
  const Tensor a = which.empty() ? Tensor() : stacked_lora_a(linears_, which);
  VEOMNI_CHECK(a.defined() && a.dim(0) == ht.dim(0),
               "shared-input backward: the forward stacked {} adapter rows, the adapters that apply now have {}",
               ht.dim(0), a.defined() ? a.dim(0) : 0);
  Tensor dht = empty_like(dys[0], ht.shape());
  for (size_t j = 0; j < which.size(); ++j) {
    Tensor part = rows_of(dht, which, j);
    linears_[which[j]]->adapter().up_backward(rows_of(ht, which, j), dys[which[j]], part);
  }
  // Every adapter of the model has the same scale (a dense projection's rank and alpha are the config's). The
  // adapters' part of dx is written first and every projection's dy W adds onto it, as in Linear::backward.
  const float scale = linears_[which[0]]->adapter().scale();
  Tensor dx = empty_like(dys[0], {dys[0].dim(0), x.dim(1)});
  ops::matmul(dht, true, a, false, dx, scale, 0.0f);
  for (size_t i = 0; i < linears_.size(); ++i) linears_[i]->backward_accumulate(std::move(kept.parts[i]), dys[i], dx);
  Tensor da = Tensor::empty(a.shape(), DType::F32, a.device());
  ops::matmul(dht, false, x, false, da, scale);
  for (size_t j = 0; j < which.size(); ++j)
    ops::add_(grad_of(linears_[which[j]]->adapter().a_param()), rows_of(da, which, j));
  return dx;
}

}  // namespace veomni
