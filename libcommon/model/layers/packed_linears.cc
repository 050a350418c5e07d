// PackedLinears: one base GEMM over the joined frozen weight, the adapters' products through stacked A's and a
// block-diagonal B.
#include "model/layers/packed_linears.h"

#include "core/device.h"
#include "kernels/ops.h"
#include "model/layers/common.h"
#include "model/layers/shared_input_linears.h"

namespace veomni {

namespace {

// Copies a [rows, width] block between row-major matrices of one device and dtype (pitches in elements).
void copy_block(const Tensor& src, int64_t src_offset, int64_t src_pitch, Tensor& dst, int64_t dst_offset,
                int64_t dst_pitch, int64_t rows, int64_t width) {
  const size_t esize = dtype_size(dst.dtype());
  device_allocator(dst.device().type)
      .copy_2d(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(dst_offset) * esize,
               static_cast<size_t>(dst_pitch) * esize,
               static_cast<const char*>(src.raw_data()) + static_cast<size_t>(src_offset) * esize,
               static_cast<size_t>(src_pitch) * esize, static_cast<size_t>(width) * esize, static_cast<size_t>(rows),
               dst.device());
}

}  // namespace

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
  int64_t ranks = 0;
  for (size_t i : which) ranks += linears_[i]->adapter().a_param().value.dim(0);
  const Tensor& first = linears_[which[0]]->adapter().a_param().value;
  Tensor b = Tensor::zeros({weight_.dim(0), ranks}, first.dtype(), first.device());
  int64_t column = 0;
  for (size_t i : which) {
    const Tensor& part = linears_[i]->adapter().b_param().value;  // [out_i, r_i]
    copy_block(part, 0, part.dim(1), b, row_offsets_[i] * ranks + column, ranks, part.dim(0), part.dim(1));
    column += part.dim(1);
  }
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
    Tensor ht = empty_like(x, {a.dim(0), x.dim(0)});
    ops::matmul(a, false, x, true, ht);
    ops::matmul(ht, true, block_b(which), true, result.out, scale, 0.0f);
    ops::matmul(x, false, weight_, true, result.out, 1.0f, 1.0f);
    if (save) result.saved.ht = ht;
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
  const Tensor a = which.empty() ? Tensor() : stacked_lora_a(linears_, which);
  VEOMNI_CHECK(a.defined() && a.dim(0) == kept.ht.dim(0),
               "packed projections' backward: the forward stacked {} adapter rows, the adapters that apply now have {}",
               kept.ht.dim(0), a.defined() ? a.dim(0) : 0);
  const float scale = linears_[which[0]]->adapter().scale();
  const Tensor b = block_b(which);
  Tensor dht = empty_like(dy, kept.ht.shape());
  ops::matmul(b, true, dy, true, dht);
  ops::matmul(dht, true, a, false, dx, scale, 0.0f);
  ops::matmul(dy, false, weight_, false, dx, 1.0f, 1.0f);
  // dB of the block-diagonal (its off-diagonal blocks are not parameters), then each adapter's block of it.
  Tensor db = Tensor::empty(b.shape(), DType::F32, b.device());
  ops::matmul(dy, true, kept.ht, true, db, scale);
  Tensor da = Tensor::empty(a.shape(), DType::F32, a.device());
  ops::matmul(dht, false, kept.x, false, da, scale);
  int64_t column = 0;
  for (size_t i : which) {
    const LoraAdapter& adapter = linears_[i]->adapter();
    const int64_t out = linears_[i]->weight().value.dim(0), rank = adapter.a_param().value.dim(0);
    Tensor block = Tensor::empty({out, rank}, DType::F32, db.device());
    copy_block(db, row_offsets_[i] * db.dim(1) + column, db.dim(1), block, 0, rank, out, rank);
    ops::add_(grad_of(adapter.b_param()), block);
    ops::add_(grad_of(adapter.a_param()), da.slice(column, column + rank));
    column += rank;
  }
  return dx;
}

}  // namespace veomni
