// Audio convolution stem forward and backward: im2col / col2im and per-chunk GEMMs through the op API.
#include "model/audio/audio_conv_stem.h"

#include "kernels/ops.h"
#include "model/layers/common.h"

namespace veomni {

namespace {

constexpr int64_t kKernel = 3;
constexpr int64_t kStride = 2;
constexpr int64_t kPad = 1;

int64_t conv_length(int64_t n) { return (n + 2 * kPad - kKernel) / kStride + 1; }

// A ones vector [n] in x's dtype and device: GEMMs with it broadcast a per-channel bias and sum its gradient.
Tensor ones_like(const Tensor& x, int64_t n) {
  return Tensor::full<float>({n}, 1.0f).to_dtype(x.dtype()).to(x.device());
}

}  // namespace

AudioConv2d::Output AudioConv2d::forward(const Tensor& x, bool save) const {
  const Tensor& w = weight_->value;
  const int64_t b = x.dim(0), in = x.dim(1), out = w.dim(0);
  VEOMNI_CHECK(x.ndim() == 4 && w.dim(1) == in, "convolution '{}' of {} input over {} weights", weight_->name,
               x.describe(), w.describe());
  const int64_t ho = conv_length(x.dim(2)), wo = conv_length(x.dim(3)), plane = ho * wo;
  Tensor cols = empty_like(x, {b * plane, in * kKernel * kKernel});
  ops::im2col_2d(x, kKernel, kKernel, kStride, kPad, cols);
  const Tensor w2 = w.view({out, in * kKernel * kKernel});
  const Tensor bias_col = bias_->value.view({out, 1});
  const Tensor ones_row = ones_like(x, plane).view({1, plane});
  Tensor z = empty_like(x, {b, out, ho, wo});
  for (int64_t i = 0; i < b; ++i) {
    // z_i [out, plane] = W cols_i^T + bias 1^T: channel-major, ready for the next im2col.
    Tensor zi = z.select(i).view({out, plane});
    ops::matmul(w2, false, cols.slice(i * plane, (i + 1) * plane), true, zi);
    ops::matmul(bias_col, false, ones_row, false, zi, 1.0f, 1.0f);
  }
  Tensor y = empty_like(z, z.shape());
  ops::gelu_forward(z, ops::GeluKind::Erf, y);
  Output result{y, {}};
  if (save) result.saved = {x, z};
  return result;
}

Tensor AudioConv2d::backward(Saved&& saved, const Tensor& dy, bool need_dx) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.x.defined(), "backward of '{}' without a saved forward input", weight_->name);
  const Tensor& w = weight_->value;
  const int64_t b = kept.x.dim(0), in = kept.x.dim(1), out = w.dim(0);
  const int64_t plane = kept.z.dim(2) * kept.z.dim(3), patch = in * kKernel * kKernel;
  Tensor dz = empty_like(dy, dy.shape());
  ops::gelu_backward(dy, kept.z, ops::GeluKind::Erf, dz);
  Tensor cols = empty_like(kept.x, {b * plane, patch});
  ops::im2col_2d(kept.x, kKernel, kKernel, kStride, kPad, cols);

  const Tensor w2 = w.view({out, patch});
  Tensor dw = weight_->trainable ? grad_of(*weight_).view({out, patch}) : Tensor();
  Tensor db = bias_->trainable ? grad_of(*bias_).view({out, 1}) : Tensor();
  const Tensor ones_col = ones_like(dz, plane).view({plane, 1});
  Tensor dcols = need_dx ? empty_like(dz, {b * plane, patch}) : Tensor();
  for (int64_t i = 0; i < b; ++i) {
    const Tensor dzi = dz.select(i).view({out, plane});
    const Tensor cols_i = cols.slice(i * plane, (i + 1) * plane);
    if (dw.defined()) ops::matmul(dzi, false, cols_i, false, dw, 1.0f, 1.0f);
    if (db.defined()) ops::matmul(dzi, false, ones_col, false, db, 1.0f, 1.0f);
    if (need_dx) {
      Tensor dcols_i = dcols.slice(i * plane, (i + 1) * plane);
      ops::matmul(dzi, true, w2, false, dcols_i);
    }
  }
  Tensor dx;
  if (need_dx) {
    dx = empty_like(dz, kept.x.shape());
    ops::col2im_2d(dcols, kKernel, kKernel, kStride, kPad, dx);
  }
  return dx;
}

AudioConvStem::Output AudioConvStem::forward(const Tensor& chunks, bool save) const {
  Output result;
  Tensor h = chunks;
  for (size_t i = 0; i < convs_.size(); ++i) h = take_out(convs_[i].forward(h, save), result.saved.convs[i]);
  const Tensor& w = conv_out_->value;
  const int64_t b = h.dim(0), features = h.dim(1) * h.dim(2), steps = h.dim(3);
  VEOMNI_CHECK(w.dim(1) == features, "conv_out '{}' takes {} features, the convolutions give {} ({} channels x {} "
               "mel bins)", conv_out_->name, w.dim(1), features, h.dim(1), h.dim(2));
  Tensor out = empty_like(h, {b * steps, w.dim(0)});
  for (int64_t i = 0; i < b; ++i) {
    // out_i [T', d_model] = h_i^T W^T with h_i [(channel, bin), T'].
    Tensor out_i = out.slice(i * steps, (i + 1) * steps);
    ops::matmul(h.select(i).view({features, steps}), true, w, true, out_i);
  }
  if (save) result.saved.features = h;
  result.out = out;
  return result;
}

void AudioConvStem::backward(Saved&& saved, const Tensor& dy) const {
  Saved kept = std::move(saved);
  VEOMNI_CHECK(kept.features.defined(), "backward of '{}' without a saved forward", conv_out_->name);
  const Tensor& w = conv_out_->value;
  const Tensor& h = kept.features;
  const int64_t b = h.dim(0), features = h.dim(1) * h.dim(2), steps = h.dim(3);
  // Frozen convolutions need no gradient of their output; a frozen stem needs no backward at all.
  size_t convs_to_train = 0;  // convs_[0, convs_to_train) hold every convolution that trains
  for (size_t i = 0; i < convs_.size(); ++i)
    if (convs_[i].trains()) convs_to_train = i + 1;
  Tensor dw = conv_out_->trainable ? grad_of(*conv_out_) : Tensor();
  Tensor dh = convs_to_train > 0 ? empty_like(dy, h.shape()) : Tensor();
  for (int64_t i = 0; i < b; ++i) {
    const Tensor dy_i = dy.slice(i * steps, (i + 1) * steps);
    if (dh.defined()) {
      Tensor dh_i = dh.select(i).view({features, steps});
      ops::matmul(w, true, dy_i, true, dh_i);
    }
    if (dw.defined()) ops::matmul(dy_i, true, h.select(i).view({features, steps}), true, dw, 1.0f, 1.0f);
  }
  kept.features = Tensor();
  for (size_t i = convs_to_train; i-- > 0;)
    dh = convs_[i].backward(std::move(kept.convs[i]), dh, i > 0);
}

}  // namespace veomni
