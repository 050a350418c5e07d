// CPU cross-entropy, one row per item: max-subtracted softmax with the exponentials and their sum in double, the loss
// log(sum) - (x_label - max), and the gradient written over the row (which may be the logits themselves).
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/index_checks.h"
#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {
namespace {

float row_max(int64_t n, const float* x) { return *std::max_element(x, x + n); }

// Fills e[j] = exp(x[j] - max) and returns their sum, in order.
double exp_shifted(int64_t n, const float* x, float max, double* e) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    e[j] = std::exp(static_cast<double>(x[j]) - static_cast<double>(max));
    sum += e[j];
  }
  return sum;
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale, Tensor& losses,
                   Tensor& dlogits) {
  const int64_t rows = logits.dim(0);
  const int64_t vocab = logits.dim(1);
  check_ids_in_range("cross_entropy", "labels", labels, vocab,
                     "labels must be token ids of the model's vocabulary (does the data match the model?)",
                     &ignore_index);
  const float* x = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();
  float* loss = losses.data<float>();
  float* grad = dlogits.defined() ? dlogits.data<float>() : nullptr;
  const double scale = grad_scale;
  parallel_for(rows, 40 * vocab, [&](int64_t r) {
    const float* xr = x + r * vocab;
    float* gr = grad ? grad + r * vocab : nullptr;
    if (y[r] == ignore_index) {
      loss[r] = 0.0f;
      if (gr) std::fill(gr, gr + vocab, 0.0f);
      return;
    }
    thread_local std::vector<double> e;
    e.resize(static_cast<size_t>(vocab));
    const float max = row_max(vocab, xr);
    const double sum = exp_shifted(vocab, xr, max, e.data());
    loss[r] = static_cast<float>(std::log(sum) - (static_cast<double>(xr[y[r]]) - static_cast<double>(max)));
    if (!gr) return;
    const double inv_sum = 1.0 / sum;
    for (int64_t j = 0; j < vocab; ++j) gr[j] = static_cast<float>(scale * (e[static_cast<size_t>(j)] * inv_sum));
    gr[y[r]] = static_cast<float>(scale * (e[static_cast<size_t>(y[r])] * inv_sum - 1.0));
  });
}

}  // namespace veomni::ops::cpu
