// GPU tests of the label log-prob and entropy op pair: the CUDA kernels against their CPU twin in f32 and bf16
// (vectorised and element-wise rows, in place, gradients in another dtype, ignored rows), and label checks.
#include <spdlog/fmt/fmt.h>

#include "gpu_test_util.h"
#include "kernels/ops.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaTokenLogprobs : public CudaTest {};

constexpr int64_t kIgnore = -100;

struct LogprobCase {
  int64_t n, v;
  DType dtype;
  bool in_place = false;
  bool with_entropy = true;
  DType grad_dtype = DType::Bool;  // Bool: the logits' dtype
};

void check(const LogprobCase& k, std::mt19937& rng) {
  const DType grad_dtype = k.grad_dtype == DType::Bool ? k.dtype : k.grad_dtype;
  SCOPED_TRACE(fmt::format("n {} v {} {} in_place {} entropy {} grad {}", k.n, k.v, dtype_name(k.dtype), k.in_place,
                           k.with_entropy, dtype_name(grad_dtype)));
  // The CPU reference sees the values the GPU's dtype holds.
  const Tensor logits = representable(random_f32({k.n, k.v}, rng, -8.0f, 8.0f), k.dtype);
  std::vector<int64_t> y(static_cast<size_t>(k.n));
  std::uniform_int_distribution<int64_t> pick(0, k.v - 1);
  for (int64_t r = 0; r < k.n; ++r) y[static_cast<size_t>(r)] = r % 5 == 3 ? kIgnore : pick(rng);
  if (k.n > 1) y[1] = k.v - 1;
  const Tensor labels = Tensor::from_vector(y, {k.n});
  const Tensor dlp = random_f32({k.n}, rng), dent_host = random_f32({k.n}, rng);
  Tensor none;
  const Tensor& dent = k.with_entropy ? dent_host : none;

  Tensor lp = Tensor::empty({k.n}, DType::F32), ent = Tensor::empty({k.n}, DType::F32);
  Tensor grad = Tensor::empty({k.n, k.v}, DType::F32);
  Tensor& ent_out = k.with_entropy ? ent : none;
  ops::token_logprobs(logits, labels, kIgnore, lp, ent_out);
  ops::token_logprobs_backward(logits, labels, kIgnore, dlp, dent, grad);

  Tensor glogits = to_gpu(logits, k.dtype);
  const Tensor glabels = labels.to(gpu());
  Tensor glp = Tensor::full<float>({k.n}, NAN).to(gpu()), gent = Tensor::full<float>({k.n}, NAN).to(gpu()), gnone;
  ops::token_logprobs(glogits, glabels, kIgnore, glp, k.with_entropy ? gent : gnone);
  // Log-probs and entropies are f32 on both sides (the row sums in f32 on the GPU, double on the CPU).
  EXPECT_TRUE(close_to(glp, lp, kF32Rtol));
  if (k.with_entropy) {
    EXPECT_TRUE(close_to(gent, ent, kF32Rtol));
  }
  Tensor ggrad = k.in_place ? glogits : Tensor::empty({k.n, k.v}, grad_dtype, gpu());
  const Tensor gdent = k.with_entropy ? to_gpu(dent_host) : Tensor();
  ops::token_logprobs_backward(glogits, glabels, kIgnore, to_gpu(dlp), gdent, ggrad);
  EXPECT_TRUE(close_to(ggrad, grad, rtol_for(grad_dtype)));
}

}  // namespace

TEST_F(CudaTokenLogprobs, MatchesCpu) {
  std::mt19937 rng(31);
  for (DType dtype : float_dtypes()) {
    check({37, 1000, dtype}, rng);
    check({37, 1000, dtype, true}, rng);
    check({6, 1, dtype}, rng);
    check({4, 151936, dtype, true}, rng);        // Qwen3's vocabulary
    check({9, 8193, dtype, false, false}, rng);  // element-wise path, no entropy
    check({9, 8193, dtype}, rng);
  }
  // The gradient in another dtype than the logits (vectorised and element-wise paths).
  check({7, 4096, DType::BF16, false, true, DType::F32}, rng);
  check({7, 4096, DType::F32, false, true, DType::BF16}, rng);
  check({7, 4097, DType::BF16, false, true, DType::F32}, rng);
}

TEST_F(CudaTokenLogprobs, LogProbIsMinusCrossEntropy) {
  std::mt19937 rng(32);
  const int64_t n = 33, v = 5000;
  const Tensor logits = to_gpu(random_f32({n, v}, rng, -8.0f, 8.0f));
  std::vector<int64_t> y(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> pick(0, v - 1);
  for (auto& l : y) l = pick(rng);
  y[2] = kIgnore;
  const Tensor labels = Tensor::from_vector(y, {n}).to(gpu());
  Tensor losses = Tensor::empty({n}, DType::F32, gpu()), lp = Tensor::empty({n}, DType::F32, gpu()), none;
  ops::cross_entropy(logits, labels, kIgnore, 1.0f, losses, none);
  ops::token_logprobs(logits, labels, kIgnore, lp, none);
  const std::vector<float> l = to_host(losses).to_float_vector(), p = to_host(lp).to_float_vector();
  for (int64_t r = 0; r < n; ++r) EXPECT_NEAR(p[static_cast<size_t>(r)], -l[static_cast<size_t>(r)], 1e-5) << r;
  Tensor ce_grad = Tensor::empty({n, v}, DType::F32, gpu()), grad = Tensor::empty({n, v}, DType::F32, gpu());
  ops::cross_entropy(logits, labels, kIgnore, 1.0f, losses, ce_grad);
  ops::token_logprobs_backward(logits, labels, kIgnore, Tensor::full<float>({n}, -1.0f).to(gpu()), none, grad);
  EXPECT_TRUE(close_to(grad, ce_grad, kF32Rtol));
}

TEST_F(CudaTokenLogprobs, RejectsLabelsOutsideTheVocabulary) {
  const DebugChecksOn debug_checks;
  const Tensor logits = Tensor::zeros({3, 10}, DType::BF16, gpu());
  Tensor lp = Tensor::empty({3}, DType::F32, gpu()), none, grad = Tensor::empty({3, 10}, DType::BF16, gpu());
  const Tensor dlp = Tensor::zeros({3}, DType::F32, gpu());
  for (int64_t bad : {int64_t{10}, int64_t{-1}, int64_t{1} << 40}) {
    const Tensor labels = Tensor::from_vector<int64_t>({0, bad, 3}, {3}).to(gpu());
    EXPECT_THROW(ops::token_logprobs(logits, labels, kIgnore, lp, none), InputError) << bad;
    EXPECT_THROW(ops::token_logprobs_backward(logits, labels, kIgnore, dlp, none, grad), InputError) << bad;
  }
  const Tensor ok = Tensor::from_vector<int64_t>({0, kIgnore, 9}, {3}).to(gpu());
  EXPECT_NO_THROW(ops::token_logprobs(logits, ok, kIgnore, lp, none));
  EXPECT_NO_THROW(ops::token_logprobs_backward(logits, ok, kIgnore, dlp, none, grad));
  EXPECT_THROW(ops::token_logprobs_backward(logits, ok, kIgnore, dlp, none, lp), Error);  // dlogits of the wrong shape
}
