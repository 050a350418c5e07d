// PackedLinears: one base GEMM over the joined frozen weight, the adapters' products through stacked A's and a
// block-diagonal B.
#include "model/layers/packed_linears.h"

#include "kernels/ops.h"
#include "model/layers/common.h"
#include "model/layers/shared_input_linears.h"

namespace veomni {

Tensor PackedLinears::joined_weight(std::initializer_list<const Linear*> linears, const Tensor& x) {
  std::vector<Tensor> weights;
  for (const Linear* linear : linears) {
    const Parameter& w = linear->weight();
    if (w.trainable || !w.value.defined() || !linear->base_accumulates(x)) return {};
    weights.push_back(w.value);
  }
  Tensor joined = Tensor::join_rows(weights);
  if (!joined.defined() || joined.ndim() != 2 || joined.dtype() != x.dtype()) return {};
  return joined;
}

PackedLinears::PackedLinears(Tensor weight, std::initializer_list<const Linear*> linears)
    : weight_(std::move(weight)), linears_(linears) {
  int64_t offset = 0;
  for (const Linear* linear : linears_) {
    row_offsets_.push_back(offset);
    offset += linear->weight().value.dim(0);
  }
  VEOMNI_CHECK(weight_.defined() && offset == weight_.dim(0), "packed projections of {} rows over a weight {}", offset,
               weight_.describe());
}

std::vector<size_t> PackedLinears::adapted() const {
  std::vector<size_t> which;
  for (size_t i = 0; i < linears_.size(); ++i)
    if (linears_[i]->adapter().active()) which.push_back(i);
  return which;
}

Tensor PackedLinears::block_b(const std::vector<size_t>& which) const {
  std::vector<Tensor> parts;
  std::vector<int64_t> rows, columns;
  int64_t ranks = 0;
  for (size_t i : which) {
    parts.push_back(linears_[i]->adapter().b_param().value);  // [out_i, r_i]
    rows.push_back(row_offsets_[i]);
    columns.push_back(ranks);
    ranks += parts.back().dim(1);
  }
  Tensor b = Tensor::empty({weight_.dim(0), ranks}, parts[0].dtype(), parts[0].device());
  ops::place_blocks(parts, rows, columns, b);
  return b;
}

PackedLinears::Output PackedLinears::forward(const Tensor& x, bool save) const {
  Output result;
  result.out = empty_like(x, {x.dim(0), weight_.dim(0)});
  const std::vector<size_t> which = adapted();
  if (which.empty()) {
    ops::matmul(x, false, weight_, true, result.out);
  } else {
    // Every adapter of a dense projection has the model's scale. As Linear::forward: the adapters' product is written
    // first and the base GEMM adds onto it.
    const float scale = linears_[which[0]]->adapter().scale();
    const Tensor a = stacked_lora_a(linears_, which);
    const Tensor b = block_b(which);
    Tensor ht = empty_like(x, {a.dim(0), x.dim(0)});
    ops::matmul(a, false, x, true, ht);
    ops::matmul(ht, true, b, true, result.out, scale, 0.0f);
    ops::matmul(x, false, weight_, true, result.out, 1.0f, 1.0f);
    if (save) {
      result.saved.ht = ht;
      result.saved.a = a;
      result.saved.b = b;
    }
  }
  if (save) result.saved.x = x;
  return result;
}

Tensor PackedLinears::backward(Saved&& saved, const Tensor& dy) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.x.defined(), "packed projections' backward without a saved forward");
  Tensor dx = empty_like(dy, {dy.dim(0), weight_.dim(1)});
  if (!kept.ht.defined()) {
    ops::matmul(dy, false, weight_, false, dx);
    return dx;
  }
  const std::vector<size_t> which = adapted();
  int64_t ranks = 0;
  for (size_t i : which) ranks += linears_[i]->adapter().a_param().value.dim(0);
  VEOMNI_CHECK(ranks == kept.ht.dim(0) && kept.a.defined() && kept.b.defined(),
               "packed projections' backward: the forward stacked {} adapter rows, the adapters that apply now have {}",
               kept.ht.dim(0), ranks);
  const float scale = linears_[which[0]]->adapter().scale();
  Tensor dht = empty_like(dy, kept.ht.shape());
  ops::matmul(kept.b, true, dy, true, dht);
  ops::matmul(dht, true, kept.a, false, dx, scale, 0.0f);
  ops::matmul(dy, false, weight_, false, dx, 1.0f, 1.0f);
  // dB of the whole block-diagonal (its other blocks are no parameters' and are dropped), and dA stacked; each
  // adapter's block of each is added to its gradient.
  Tensor db = Tensor::empty(kept.b.shape(), DType::F32, kept.b.device());
  ops::matmul(dy, true, kept.ht, true, db, scale);
  Tensor da = Tensor::empty(kept.a.shape(), DType::F32, kept.a.device());
  ops::matmul(dht, false, kept.x, false, da, scale);
  std::vector<int64_t> b_rows, columns, a_columns;
  std::vector<Tensor*> db_parts, da_parts;
  int64_t column = 0;
  for (size_t i : which) {
    const LoraAdapter& adapter = linears_[i]->adapter();
    b_rows.push_back(row_offsets_[i]);
    columns.push_back(column);
    a_columns.push_back(0);
    db_parts.push_back(&grad_of(adapter.b_param()));
    da_parts.push_back(&grad_of(adapter.a_param()));
    column += adapter.a_param().value.dim(0);
  }
  ops::add_blocks(db, b_rows, columns, db_parts);
  ops::add_blocks(da, columns, a_columns, da_parts);
  return dx;
}

}  // namespace veomni
