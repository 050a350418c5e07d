// CPU AdamW, step for step as torch's _single_tensor_adamw on fp32 tensors: the scalar factors in double (Python
// floats), each tensor operation in fp32 with torch's operand order:
//   p *= 1 - lr*wd; m.lerp_(g, 1-b1); v = v*b2 + ((1-b2)*g)*g;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps; p += (-lr / (1 - b1^t)) * m / denom.
#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kernels/adamw_factors.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

using Factors = AdamWFactors;

// One chunk of the update. torch's lerp(start, end, w) is start + w*(end - start) for |w| < 0.5, else
// end - (end - start)*(1 - w); the branch is a template parameter so the loop stays branch-free and vectorises.
template <bool kSmallLerpWeight>
void update(int64_t n, const Factors& f, float grad_scale, float* __restrict p, const float* __restrict g,
            float* __restrict m, float* __restrict v) {
  const float w = f.one_minus_beta1;
  for_each_lane(n, [&](int64_t i) {
    const float gi = g[i] * grad_scale;  // exact when grad_scale is 1
    const float mi = kSmallLerpWeight ? m[i] + w * (gi - m[i]) : gi - (gi - m[i]) * (1.0f - w);
    const float vi = v[i] * f.beta2 + f.one_minus_beta2 * gi * gi;
    const float denom = std::sqrt(vi) / f.bias2_sqrt + f.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * f.decay + f.neg_step_size * mi / denom;
  });
}

constexpr int64_t kChunk = 1 << 14;


void adamw_scaled(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const Factors& f,
                  float grad_scale) {
  const int64_t n = param.numel();
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, 12 * kChunk, [&](int64_t c) {
    const int64_t begin = c * kChunk;
    const int64_t len = std::min(kChunk, n - begin);
    if (std::fabs(f.one_minus_beta1) < 0.5f)
      update<true>(len, f, grad_scale, p + begin, g + begin, m + begin, v + begin);
    else
      update<false>(len, f, grad_scale, p + begin, g + begin, m + begin, v + begin);
  });
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
  adamw_scaled(param, grad, exp_avg, exp_avg_sq, adamw_factors(lr, beta1, beta2, eps, weight_decay, step), 1.0f);
}

// Every chunk of every slot is one item of a single parallel loop, so all cores work also when a model's tensors are
// many and small (an offloaded optimizer steps every shard of a rank here). Each element is updated once, by the
// same expression: the bits do not depend on the split.
void adamw_step_multi(const std::vector<AdamWTensors>& slots, double lr, double beta1, double beta2, double eps,
                      int64_t step, float grad_scale) {
  struct Piece {
    const AdamWTensors* slot;
    Factors factors;
    int64_t begin;
  };
  std::vector<Piece> pieces;
  for (const AdamWTensors& s : slots) {
    const Factors f = adamw_factors(lr, beta1, beta2, eps, s.weight_decay, step);
    for (int64_t begin = 0; begin < s.param->numel(); begin += kChunk) pieces.push_back({&s, f, begin});
  }
  parallel_for(static_cast<int64_t>(pieces.size()), 12 * kChunk, [&](int64_t k) {
    const Piece& piece = pieces[static_cast<size_t>(k)];
    const AdamWTensors& s = *piece.slot;
    const int64_t begin = piece.begin;
    const int64_t len = std::min(kChunk, s.param->numel() - begin);
    float* p = s.param->data<float>() + begin;
    const float* g = s.grad->data<float>() + begin;
    float* m = s.exp_avg->data<float>() + begin;
    float* v = s.exp_avg_sq->data<float>() + begin;
    if (std::fabs(piece.factors.one_minus_beta1) < 0.5f)
      update<true>(len, piece.factors, grad_scale, p, g, m, v);
    else
      update<false>(len, piece.factors, grad_scale, p, g, m, v);
  });
}

}  // namespace veomni::ops::cpu
