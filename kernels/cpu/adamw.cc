// CPU AdamW, step for step as torch's _single_tensor_adamw on fp32 tensors: the scalar factors in double (Python
// floats), each tensor operation in fp32 with torch's operand order:
//   p *= 1 - lr*wd; m.lerp_(g, 1-b1); v = v*b2 + ((1-b2)*g)*g;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps; p += (-lr / (1 - b1^t)) * m / denom.
// bf16 moments (anyprecision_adamw) take the same f32 expressions between a widening load and a rounding store;
// a compute copy gets the updated parameter rounded as cast() rounds it.
#include "kernels/cpu/ops_cpu.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <type_traits>

#include "core/float_element.h"
#include "kernels/adamw_factors.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_loops.h"

namespace veomni::ops::cpu {
namespace {

using Factors = AdamWFactors;

// A slot without a compute copy.
struct NoCopy {};

// One chunk of the update. torch's lerp(start, end, w) is start + w*(end - start) for |w| < 0.5, else
// end - (end - start)*(1 - w); the branch is a template parameter so the loop stays branch-free and vectorises.
// M: the moments' storage (float, or bf16: rounded when stored, the update reads what was stored). C: the compute
// copy's element (bf16, f16) or NoCopy.
template <bool kSmallLerpWeight, typename M, typename C>
void update(int64_t n, const Factors& f, float grad_scale, float* __restrict p, const float* __restrict g,
            M* __restrict m, M* __restrict v, C* __restrict c) {
  const float w = f.one_minus_beta1;
  for_each_lane(n, [&](int64_t i) {
    const float gi = g[i] * grad_scale;  // exact when grad_scale is 1
    const float m0 = to_float(m[i]);
    const float mi = kSmallLerpWeight ? m0 + w * (gi - m0) : gi - (gi - m0) * (1.0f - w);
    const float vi = to_float(v[i]) * f.beta2 + f.one_minus_beta2 * gi * gi;
    const M ms = from_float<M>(mi);
    const M vs = from_float<M>(vi);
    const float denom = std::sqrt(to_float(vs)) / f.bias2_sqrt + f.eps;
    m[i] = ms;
    v[i] = vs;
    const float pi = p[i] * f.decay + f.neg_step_size * to_float(ms) / denom;
    p[i] = pi;
    if constexpr (!std::is_same_v<C, NoCopy>) c[i] = from_float<C>(pi);
  });
}

constexpr int64_t kAdamwChunk = 1 << 14;

// Elements [begin, begin + len) of one slot, dispatched on its dtypes.
void update_range(const AdamWTensors& s, const Factors& f, float grad_scale, int64_t begin, int64_t len) {
  float* p = s.param->data<float>() + begin;
  const float* g = s.grad->data<float>() + begin;
  const bool small = std::fabs(f.one_minus_beta1) < 0.5f;
  auto with_copy = [&](auto* m, auto* v) {
    auto run = [&](auto* c) {
      if (small)
        update<true>(len, f, grad_scale, p, g, m, v, c);
      else
        update<false>(len, f, grad_scale, p, g, m, v, c);
    };
    if (!s.compute)
      run(static_cast<NoCopy*>(nullptr));
    else if (s.compute->dtype() == DType::BF16)
      run(s.compute->data<bf16>() + begin);
    else
      run(s.compute->data<f16>() + begin);
  };
  if (s.exp_avg->dtype() == DType::BF16)
    with_copy(s.exp_avg->data<bf16>() + begin, s.exp_avg_sq->data<bf16>() + begin);
  else
    with_copy(s.exp_avg->data<float>() + begin, s.exp_avg_sq->data<float>() + begin);
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
  adamw_step_multi({{&param, &grad, &exp_avg, &exp_avg_sq, weight_decay}}, lr, beta1, beta2, eps, step, 1.0f);
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
    for (int64_t begin = 0; begin < s.param->numel(); begin += kAdamwChunk) pieces.push_back({&s, f, begin});
  }
  parallel_for(static_cast<int64_t>(pieces.size()), 12 * kAdamwChunk, [&](int64_t k) {
    const Piece& piece = pieces[static_cast<size_t>(k)];
    const int64_t len = std::min(kAdamwChunk, piece.slot->param->numel() - piece.begin);
    update_range(*piece.slot, piece.factors, grad_scale, piece.begin, len);
  });
}

}  // namespace veomni::ops::cpu
