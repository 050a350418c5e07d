// CPU label log-probabilities and entropy, one row per item, in double: the shifted logits s = x - max and their
// exponentials are kept for the row, so the backward can write its gradient over the logits (in place).
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/index_checks.h"
#include "kernels/cpu/parallel.h"

namespace veomni::ops::cpu {
namespace {

constexpr const char* kLabelHint =
    "labels must be token ids of the model's vocabulary (does the data match the model?)";

// One row's softmax in double: s[j] = x[j] - max, e[j] = exp(s[j]), log_sum = log(sum e).
struct RowSoftmax {
  std::vector<double> s, e;
  double sum = 0.0, log_sum = 0.0;

  void compute(int64_t vocab, const float* x) {
    s.resize(static_cast<size_t>(vocab));
    e.resize(static_cast<size_t>(vocab));
    const double max = *std::max_element(x, x + vocab);
    sum = 0.0;
    for (size_t j = 0; j < s.size(); ++j) {
      s[j] = static_cast<double>(x[j]) - max;
      e[j] = std::exp(s[j]);
      sum += e[j];
    }
    log_sum = std::log(sum);
  }

  // log p[j]; the same expression as cross_entropy's loss, negated, so the two agree bit for bit.
  double log_prob(int64_t j) const { return -(log_sum - s[static_cast<size_t>(j)]); }

  // H = log(sum) - sum_j p_j s_j. Classes with p = 0 add nothing (their s may be -inf).
  double entropy() const {
    double weighted = 0.0;
    for (size_t j = 0; j < s.size(); ++j)
      if (e[j] > 0.0) weighted += e[j] * s[j];
    return log_sum - weighted / sum;
  }
};

}  // namespace

void token_logprobs(const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs,
                    Tensor& entropy) {
  const int64_t rows = logits.dim(0);
  const int64_t vocab = logits.dim(1);
  check_ids_in_range("token_logprobs", "labels", labels, vocab, kLabelHint, &ignore_index);
  const float* x = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();
  float* lp = logprobs.data<float>();
  float* ent = entropy.defined() ? entropy.data<float>() : nullptr;
  parallel_for(rows, 40 * vocab, [&](int64_t r) {
    if (y[r] == ignore_index) {
      lp[r] = 0.0f;
      if (ent) ent[r] = 0.0f;
      return;
    }
    thread_local RowSoftmax row;
    row.compute(vocab, x + r * vocab);
    lp[r] = static_cast<float>(row.log_prob(y[r]));
    if (ent) ent[r] = static_cast<float>(row.entropy());
  });
}

void token_logprobs_backward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
                             const Tensor& dentropy, Tensor& dlogits) {
  const int64_t rows = logits.dim(0);
  const int64_t vocab = logits.dim(1);
  check_ids_in_range("token_logprobs_backward", "labels", labels, vocab, kLabelHint, &ignore_index);
  const float* x = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();
  const float* dlp = dlogprobs.data<float>();
  const float* dent = dentropy.defined() ? dentropy.data<float>() : nullptr;
  float* grad = dlogits.data<float>();
  parallel_for(rows, 60 * vocab, [&](int64_t r) {
    float* gr = grad + r * vocab;
    if (y[r] == ignore_index) {
      std::fill(gr, gr + vocab, 0.0f);
      return;
    }
    thread_local RowSoftmax row;
    row.compute(vocab, x + r * vocab);  // read whole before gr (which may be the logits) is written
    const double g_lp = dlp[r];
    const double g_ent = dent ? static_cast<double>(dent[r]) : 0.0;
    const double h = dent ? row.entropy() : 0.0;
    const double inv_sum = 1.0 / row.sum;
    for (int64_t j = 0; j < vocab; ++j) {
      const double p = row.e[static_cast<size_t>(j)] * inv_sum;
      double g = g_lp * ((j == y[r] ? 1.0 : 0.0) - p);
      if (dent && p > 0.0) g += g_ent * (-p * (row.log_prob(j) + h));
      gr[j] = static_cast<float>(g);
    }
  });
}

}  // namespace veomni::ops::cpu
