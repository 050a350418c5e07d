// GPU tests of packed variable-length attention: the CUDA kernels (f32 FMA, bf16 tensor cores) against the CPU fp32
// reference on the same inputs, and sampled double-precision checks of long sequences (16k, 32k tokens); then
// cuDNN's fused attention (bf16) against the same reference and against our bf16 kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/ops_cpu.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/runtime.h"
#include "kernels/ops.h"

using namespace veomni;

namespace {

// Skips the test on machines without a GPU; otherwise makes sure the runtime is up.
#define REQUIRE_GPU()                                                   \
  do {                                                                  \
    if (cuda_rt::device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
    cuda_rt::initialize(0);                                             \
  } while (0)

// Runs a scope's attention calls under one backend (VEOMNI_ATTENTION_BACKEND's choices), then restores the previous.
class BackendScope {
 public:
  explicit BackendScope(ops::cuda::AttentionBackend backend) : previous_(ops::cuda::attention_backend()) {
    ops::cuda::set_attention_backend(backend);
  }
  ~BackendScope() { ops::cuda::set_attention_backend(previous_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  ops::cuda::AttentionBackend previous_;
};

struct AttentionCase {
  std::vector<int32_t> cu;
  int64_t hq, hkv, d;
  bool causal;
};

std::string describe_attention(const AttentionCase& c, DType dtype) {
  std::string lens;
  for (size_t b = 0; b + 1 < c.cu.size(); ++b) lens += (b ? "," : "") + std::to_string(c.cu[b + 1] - c.cu[b]);
  return std::string(dtype_name(dtype)) + " lens {" + lens + "} Hq " + std::to_string(c.hq) + " Hkv " +
         std::to_string(c.hkv) + " D " + std::to_string(c.d) + (c.causal ? " causal" : " full");
}

// Uniform values in [-range, range) from a 64-bit LCG: fast enough for the 67M-element tensors of the long tests.
Tensor random_tensor(const Shape& shape, uint64_t seed, float range = 1.0f) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = range * (static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
  return t;
}

// The values a dtype can hold, as f32 on the host: the CPU reference then sees exactly the GPU's inputs.
Tensor attention_representable(const Tensor& t, DType dtype) {
  return dtype == DType::F32 ? t : t.to_dtype(dtype).to_dtype(DType::F32);
}

Tensor attention_to_gpu(const Tensor& host_f32, DType dtype) { return host_f32.to_dtype(dtype).to(Device::cuda(0)); }
Tensor to_host_f32(const Tensor& device) { return device.to(Device::cpu()).to_dtype(DType::F32); }

struct Inputs {
  Tensor q, k, v, dout;  // host f32, representable in the dtype under test
};

Inputs make_inputs(const AttentionCase& c, DType dtype, uint64_t seed) {
  const int64_t s = c.cu.back();
  return {attention_representable(random_tensor({s, c.hq, c.d}, seed), dtype),
          attention_representable(random_tensor({s, c.hkv, c.d}, seed + 1), dtype),
          attention_representable(random_tensor({s, c.hkv, c.d}, seed + 2), dtype),
          attention_representable(random_tensor({s, c.hq, c.d}, seed + 3), dtype)};
}

struct Outputs {
  Tensor out, lse, dq, dk, dv;  // host f32
};

Outputs cpu_attention(const AttentionCase& c, const Inputs& in, float scale) {
  const int64_t s = c.cu.back();
  Outputs r{Tensor::empty(in.q.shape(), DType::F32), Tensor::empty({c.hq, s}, DType::F32),
            Tensor::empty(in.q.shape(), DType::F32), Tensor::empty(in.k.shape(), DType::F32),
            Tensor::empty(in.v.shape(), DType::F32)};
  ops::cpu::attention_forward(in.q, in.k, in.v, c.cu, c.causal, scale, r.out, r.lse);
  ops::cpu::attention_backward(in.dout, in.q, in.k, in.v, r.out, r.lse, c.cu, c.causal, scale, r.dq, r.dk, r.dv);
  return r;
}

// Forward and backward through the op API on the GPU in `dtype`; the backward uses the GPU's own out and lse.
Outputs gpu_attention(const AttentionCase& c, const Inputs& in, float scale, DType dtype) {
  const Device gpu = Device::cuda(0);
  const Tensor q = attention_to_gpu(in.q, dtype), k = attention_to_gpu(in.k, dtype), v = attention_to_gpu(in.v, dtype),
               dout = attention_to_gpu(in.dout, dtype);
  Tensor out = Tensor::empty(q.shape(), dtype, gpu), lse = Tensor::empty({c.hq, c.cu.back()}, DType::F32, gpu);
  Tensor dq = Tensor::empty(q.shape(), dtype, gpu), dk = Tensor::empty(k.shape(), dtype, gpu);
  Tensor dv = Tensor::empty(v.shape(), dtype, gpu);
  ops::attention_forward(q, k, v, c.cu, c.causal, scale, out, lse);
  ops::attention_backward(dout, q, k, v, out, lse, c.cu, c.causal, scale, dq, dk, dv);
  return {to_host_f32(out), to_host_f32(lse), to_host_f32(dq), to_host_f32(dk), to_host_f32(dv)};
}

// max |got - want| <= rtol * max |want|, every value finite. A normwise bound: elementwise relative error means
// nothing on the elements that cancel to ~0 (a length-1 sequence has dq = dk = 0).
::testing::AssertionResult normwise_close_to(const std::vector<double>& got, const std::vector<double>& want,
                                             double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " values, " << want.size() << " expected";
  double scale = 0.0, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return ::testing::AssertionFailure() << "element " << i << " is " << got[i];
    scale = std::max(scale, std::fabs(want[i]));
    if (std::fabs(got[i] - want[i]) > worst) {
      worst = std::fabs(got[i] - want[i]);
      at = i;
    }
  }
  if (worst <= rtol * std::max(scale, 1e-6)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << at << ": got " << got[at] << ", want " << want[at]
                                       << " (max error " << worst << " > " << rtol << " * max |want| " << scale << ")";
}

std::vector<double> host_values(const Tensor& host_f32) {
  const float* p = host_f32.data<float>();
  return std::vector<double>(p, p + host_f32.numel());
}

void expect_matches_cpu(const AttentionCase& c, DType dtype, double rtol, uint64_t seed) {
  SCOPED_TRACE(describe_attention(c, dtype));
  const Inputs in = make_inputs(c, dtype, seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const Outputs want = cpu_attention(c, in, scale);
  const Outputs got = gpu_attention(c, in, scale, dtype);
  EXPECT_TRUE(normwise_close_to(host_values(got.out), host_values(want.out), rtol)) << "out";
  EXPECT_TRUE(normwise_close_to(host_values(got.lse), host_values(want.lse), rtol)) << "lse";
  EXPECT_TRUE(normwise_close_to(host_values(got.dq), host_values(want.dq), rtol)) << "dq";
  EXPECT_TRUE(normwise_close_to(host_values(got.dk), host_values(want.dk), rtol)) << "dk";
  EXPECT_TRUE(normwise_close_to(host_values(got.dv), host_values(want.dv), rtol)) << "dv";
}

// Lengths 1, 37, 0, 70, 1, 130: single tokens, an empty sequence, sequences crossing the 32- and 64-row blocks.
const std::vector<int32_t> kPackedLengths = {0, 1, 38, 38, 108, 109, 239};

void sweep(DType dtype, double rtol) {
  uint64_t seed = 100;
  for (const auto& [hq, hkv] : {std::pair<int64_t, int64_t>{4, 4}, {4, 2}, {8, 2}})
    for (bool causal : {true, false})
      for (int64_t d : {16, 64, 128, 256})
        expect_matches_cpu({kPackedLengths, hq, hkv, d, causal}, dtype, rtol, seed++);
}

constexpr double kF32Tolerance = 1e-5;
// bf16 inputs are shared with the reference; what remains is bf16 rounding of P, dS and the outputs.
constexpr double kBf16Tolerance = 2e-2;

}  // namespace

TEST(CudaAttention, F32MatchesCpuReference) {
  REQUIRE_GPU();
  sweep(DType::F32, kF32Tolerance);
}

TEST(CudaAttention, Bf16MatchesCpuReference) {
  REQUIRE_GPU();
  const BackendScope native(ops::cuda::AttentionBackend::Native);  // our kernels, not cuDNN
  sweep(DType::BF16, kBf16Tolerance);
}

// Head dims off the kernels' instantiations: 7 and 20 take the element-wise loads (not a multiple of 8), 7 the odd
// stores, 40 and 80 the padded 16-byte path.
TEST(CudaAttention, UnpaddedHeadDims) {
  REQUIRE_GPU();
  const BackendScope native(ops::cuda::AttentionBackend::Native);  // our kernels, not cuDNN
  uint64_t seed = 200;
  for (int64_t d : {7, 20, 40, 80})
    for (bool causal : {true, false}) {
      expect_matches_cpu({kPackedLengths, 4, 2, d, causal}, DType::F32, kF32Tolerance, seed++);
      expect_matches_cpu({kPackedLengths, 4, 2, d, causal}, DType::BF16, kBf16Tolerance, seed++);
    }
}

// Many key and query blocks per sequence: the pipelined loads and the causal tile order.
TEST(CudaAttention, MultiBlockSequencesMatchCpuReference) {
  REQUIRE_GPU();
  const BackendScope native(ops::cuda::AttentionBackend::Native);  // our kernels, not cuDNN
  const std::vector<int32_t> cu = {0, 700, 1500};
  for (bool causal : {true, false}) {
    expect_matches_cpu({cu, 4, 2, 128, causal}, DType::F32, kF32Tolerance, 300 + causal);
    expect_matches_cpu({cu, 4, 2, 128, causal}, DType::BF16, kBf16Tolerance, 310 + causal);
  }
}

namespace {

// Double-precision attention for chosen rows and keys of a problem too long for the full CPU reference.
class SampledReference {
 public:
  SampledReference(const AttentionCase& c, const Inputs& in, double scale)
      : c_(c),
        q_(in.q.data<float>()),
        k_(in.k.data<float>()),
        v_(in.v.data<float>()),
        dout_(in.dout.data<float>()),
        scale_(scale) {}

  struct Row {
    std::vector<double> out, dq;
    double lse = 0.0;
  };

  // Query token i of head h: out, lse and dq from the full softmax row.
  Row row(int64_t i, int64_t h) const {
    const auto [b0, b1] = sequence_of(i);
    const int64_t end = c_.causal ? i + 1 : b1, kv = h / (c_.hq / c_.hkv);
    std::vector<double> s, dp;
    for (int64_t j = b0; j < end; ++j) {
      s.push_back(scale_ * dot(q(i, h), k(j, kv)));
      dp.push_back(dot(dout(i, h), v(j, kv)));
    }
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - m));
    Row r{std::vector<double>(static_cast<size_t>(c_.d), 0.0), std::vector<double>(static_cast<size_t>(c_.d), 0.0),
          m + std::log(sum)};
    double delta = 0.0;
    for (size_t n = 0; n < s.size(); ++n) {
      s[n] /= sum;
      delta += s[n] * dp[n];
      axpy(s[n], v(b0 + static_cast<int64_t>(n), kv), r.out);
    }
    for (size_t n = 0; n < s.size(); ++n)
      axpy(scale_ * s[n] * (dp[n] - delta), k(b0 + static_cast<int64_t>(n), kv), r.dq);
    return r;
  }

  // dk and dv of key token j of kv head g, summed over the query heads of its group. The probabilities come from
  // the GPU's lse and D_i from the GPU's out (both [.., S] host f32): rows of those are checked by row().
  std::pair<std::vector<double>, std::vector<double>> key(int64_t j, int64_t g, const Tensor& lse,
                                                          const Tensor& out) const {
    const auto [b0, b1] = sequence_of(j);
    const int64_t group = c_.hq / c_.hkv, total = c_.cu.back();
    std::vector<double> dk(static_cast<size_t>(c_.d), 0.0), dv(static_cast<size_t>(c_.d), 0.0);
    for (int64_t h = g * group; h < (g + 1) * group; ++h)
      for (int64_t i = c_.causal ? j : b0; i < b1; ++i) {
        const double p = std::exp(scale_ * dot(q(i, h), k(j, g)) - lse.data<float>()[h * total + i]);
        const double dp = dot(dout(i, h), v(j, g));
        const double delta = dot(dout(i, h), out.data<float>() + (i * c_.hq + h) * c_.d);
        axpy(p, dout(i, h), dv);
        axpy(scale_ * p * (dp - delta), q(i, h), dk);
      }
    return {dk, dv};
  }

 private:
  std::pair<int64_t, int64_t> sequence_of(int64_t token) const {
    const auto it = std::upper_bound(c_.cu.begin(), c_.cu.end(), token);
    return {*(it - 1), *it};
  }
  const float* q(int64_t t, int64_t h) const { return q_ + (t * c_.hq + h) * c_.d; }
  const float* dout(int64_t t, int64_t h) const { return dout_ + (t * c_.hq + h) * c_.d; }
  const float* k(int64_t t, int64_t h) const { return k_ + (t * c_.hkv + h) * c_.d; }
  const float* v(int64_t t, int64_t h) const { return v_ + (t * c_.hkv + h) * c_.d; }
  double dot(const float* a, const float* b) const {
    double s = 0.0;
    for (int64_t e = 0; e < c_.d; ++e) s += static_cast<double>(a[e]) * b[e];
    return s;
  }
  void axpy(double alpha, const float* x, std::vector<double>& y) const {
    for (int64_t e = 0; e < c_.d; ++e) y[static_cast<size_t>(e)] += alpha * x[e];
  }

  AttentionCase c_;
  const float *q_, *k_, *v_, *dout_;
  double scale_;
};

void append(std::vector<double>& dst, const Tensor& host_f32, int64_t offset, int64_t n) {
  const float* p = host_f32.data<float>() + offset;
  dst.insert(dst.end(), p, p + n);
}

// Runs the GPU kernels on a long problem and checks sampled rows (out, lse, dq) and keys (dk, dv). Each quantity
// is judged against the largest reference value over its samples: some rows are exactly zero in theory (dq of a
// sequence's first token under causal attention) and carry only rounding noise.
void expect_sampled_rows_match(const AttentionCase& c, DType dtype, double rtol, const std::vector<int64_t>& tokens,
                               const std::vector<int64_t>& heads, const std::vector<int64_t>& keys,
                               const std::vector<int64_t>& kv_heads) {
  SCOPED_TRACE(describe_attention(c, dtype));
  const Inputs in = make_inputs(c, dtype, 400);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const Outputs got = gpu_attention(c, in, scale, dtype);
  const SampledReference ref(c, in, scale);
  const int64_t total = c.cu.back();
  std::vector<double> got_out, want_out, got_dq, want_dq, got_lse, want_lse;
  for (int64_t i : tokens)
    for (int64_t h : heads) {
      const SampledReference::Row want = ref.row(i, h);
      append(got_out, got.out, (i * c.hq + h) * c.d, c.d);
      append(got_dq, got.dq, (i * c.hq + h) * c.d, c.d);
      append(got_lse, got.lse, h * total + i, 1);
      want_out.insert(want_out.end(), want.out.begin(), want.out.end());
      want_dq.insert(want_dq.end(), want.dq.begin(), want.dq.end());
      want_lse.push_back(want.lse);
    }
  const std::string rows = "element n is sample n / D of the (token, head) pairs in order";
  EXPECT_TRUE(normwise_close_to(got_out, want_out, rtol)) << "out; " << rows;
  EXPECT_TRUE(normwise_close_to(got_dq, want_dq, rtol)) << "dq; " << rows;
  EXPECT_TRUE(normwise_close_to(got_lse, want_lse, rtol)) << "lse";
  std::vector<double> got_dk, want_dk, got_dv, want_dv;
  for (int64_t j : keys)
    for (int64_t g : kv_heads) {
      const auto [dk, dv] = ref.key(j, g, got.lse, got.out);
      append(got_dk, got.dk, (j * c.hkv + g) * c.d, c.d);
      append(got_dv, got.dv, (j * c.hkv + g) * c.d, c.d);
      want_dk.insert(want_dk.end(), dk.begin(), dk.end());
      want_dv.insert(want_dv.end(), dv.begin(), dv.end());
    }
  EXPECT_TRUE(normwise_close_to(got_dk, want_dk, rtol)) << "dk; element n is sample n / D of the (key, kv head) pairs";
  EXPECT_TRUE(normwise_close_to(got_dv, want_dv, rtol)) << "dv; element n is sample n / D of the (key, kv head) pairs";
}

}  // namespace

// The training shape: one 32k-token causal sequence, Hq 16 / Hkv 8, head_dim 128, bf16.
TEST(CudaAttention, Long32kCausalBf16Sampled) {
  REQUIRE_GPU();
  const BackendScope native(ops::cuda::AttentionBackend::Native);  // our kernels, not cuDNN
  const int64_t s = 32768;
  expect_sampled_rows_match({{0, static_cast<int32_t>(s)}, 16, 8, 128, true}, DType::BF16, kBf16Tolerance,
                            {0, 1, 63, 64, 4095, 16411, s - 1}, {0, 5, 15}, {0, 77, 16384, s - 2, s - 1}, {0, 7});
}

// 16k tokens in two sequences, full attention, f32: sums over 10k keys in another order than the reference, hence
// 1e-4 rather than the 1e-5 of the short cases.
TEST(CudaAttention, Long16kPackedF32Sampled) {
  REQUIRE_GPU();
  expect_sampled_rows_match({{0, 6000, 16384}, 4, 2, 64, false}, DType::F32, 1e-4, {0, 5999, 6000, 6001, 12000, 16383},
                            {0, 3}, {0, 5999, 6000, 16383}, {0, 1});
}

TEST(CudaAttention, RejectsUnsupportedArguments) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const std::vector<int32_t> cu = {0, 4};
  Tensor lse = Tensor::empty({2, 4}, DType::F32, gpu);
  {
    const Tensor q = Tensor::zeros({4, 2, 320}, DType::BF16, gpu);  // head_dim above 256
    Tensor out = Tensor::empty(q.shape(), DType::BF16, gpu);
    EXPECT_THROW(ops::attention_forward(q, q, q, cu, true, 0.1f, out, lse), Error);
  }
  {
    const Tensor q = Tensor::zeros({4, 2, 64}, DType::BF16, gpu), k = Tensor::zeros({4, 2, 64}, DType::F32, gpu);
    Tensor out = Tensor::empty(q.shape(), DType::BF16, gpu);
    EXPECT_THROW(ops::attention_forward(q, k, k, cu, true, 0.1f, out, lse), Error);  // mixed dtypes
  }
}

// ---------------------------------------------------------------- cuDNN fused attention (bf16)

namespace {

// cuDNN's packed (ragged) attention needs sm90+; the tests below skip elsewhere and fail if cuDNN refuses there.
#define REQUIRE_SM90()                                                                       \
  do {                                                                                       \
    REQUIRE_GPU();                                                                           \
    int major = 0;                                                                           \
    VEOMNI_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0)); \
    if (major < 9) GTEST_SKIP() << "cuDNN packed attention needs sm90 or newer, not sm" << major << "x"; \
  } while (0)

bool has_plan(const std::string& name) {
  const std::vector<std::string> plans = ops::cuda::cudnn_attention_plans();
  const bool found = std::find(plans.begin(), plans.end(), name) != plans.end();
  if (!found) {
    std::string all;
    for (const std::string& p : plans) all += "\n  " + p;
    ADD_FAILURE() << "no cuDNN plan '" << name << "'; the plans:" << all;
  }
  return found;
}

struct GpuTensors {
  Tensor q, k, v, dout, out, lse, dq, dk, dv;
};

GpuTensors gpu_tensors(const AttentionCase& c, const Inputs& in) {
  const Device gpu = Device::cuda(0);
  const DType bf16 = DType::BF16;
  GpuTensors t{attention_to_gpu(in.q, bf16), attention_to_gpu(in.k, bf16), attention_to_gpu(in.v, bf16),
               attention_to_gpu(in.dout, bf16), {}, {}, {}, {}, {}};
  t.out = Tensor::empty(t.q.shape(), bf16, gpu);
  t.lse = Tensor::empty({c.hq, c.cu.back()}, DType::F32, gpu);
  t.dq = Tensor::empty(t.q.shape(), bf16, gpu);
  t.dk = Tensor::empty(t.k.shape(), bf16, gpu);
  t.dv = Tensor::empty(t.v.shape(), bf16, gpu);
  return t;
}

Outputs outputs_to_host(const GpuTensors& t) {
  return {to_host_f32(t.out), to_host_f32(t.lse), to_host_f32(t.dq), to_host_f32(t.dk), to_host_f32(t.dv)};
}

// Forward and backward straight through cuDNN: a refusal fails the test with cuDNN's reason.
void run_cudnn(const AttentionCase& c, const Inputs& in, float scale, Outputs& result) {
  GpuTensors t = gpu_tensors(c, in);
  std::string why;
  ASSERT_TRUE(ops::cuda::cudnn_attention_forward(t.q, t.k, t.v, c.cu, c.causal, scale, t.out, t.lse, &why))
      << "cuDNN refused the forward: " << why;
  ASSERT_TRUE(ops::cuda::cudnn_attention_backward(t.dout, t.q, t.k, t.v, t.out, t.lse, c.cu, c.causal, scale, t.dq,
                                                  t.dk, t.dv, &why))
      << "cuDNN refused the backward: " << why;
  result = outputs_to_host(t);
}

Outputs native_attention(const AttentionCase& c, const Inputs& in, float scale) {
  const BackendScope native(ops::cuda::AttentionBackend::Native);
  return gpu_attention(c, in, scale, DType::BF16);
}

// lse of cuDNN and of our kernels: both fp32 statistics of the same bf16 inputs, so far closer than bf16 outputs.
constexpr double kLseTolerance = 1e-4;

void expect_all_close(const Outputs& got, const Outputs& want, double rtol, double lse_rtol, const char* against) {
  EXPECT_TRUE(normwise_close_to(host_values(got.out), host_values(want.out), rtol)) << "out vs " << against;
  EXPECT_TRUE(normwise_close_to(host_values(got.lse), host_values(want.lse), lse_rtol)) << "lse vs " << against;
  EXPECT_TRUE(normwise_close_to(host_values(got.dq), host_values(want.dq), rtol)) << "dq vs " << against;
  EXPECT_TRUE(normwise_close_to(host_values(got.dk), host_values(want.dk), rtol)) << "dk vs " << against;
  EXPECT_TRUE(normwise_close_to(host_values(got.dv), host_values(want.dv), rtol)) << "dv vs " << against;
}

// cuDNN against the CPU fp32 reference and against our bf16 kernels on the same inputs.
void expect_cudnn_matches(const AttentionCase& c, uint64_t seed) {
  SCOPED_TRACE(describe_attention(c, DType::BF16) + " through cuDNN");
  const Inputs in = make_inputs(c, DType::BF16, seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  Outputs got;
  ASSERT_NO_FATAL_FAILURE(run_cudnn(c, in, scale, got));
  expect_all_close(got, cpu_attention(c, in, scale), kBf16Tolerance, kBf16Tolerance, "the CPU reference");
  expect_all_close(got, native_attention(c, in, scale), kBf16Tolerance, kLseTolerance, "our bf16 kernels");
}

}  // namespace

// The training shape must go through cuDNN on Hopper: a silent refusal here would quietly cost 2x in attention.
TEST(CudnnAttention, TakesTheTrainingShape) {
  REQUIRE_SM90();
  expect_cudnn_matches({{0, 1024}, 16, 8, 128, true}, 500);
  EXPECT_TRUE(has_plan("backward dense b=1 s=1024 Hq=16 Hkv=8 D=128 causal"));
}

TEST(CudnnAttention, PackedUnevenSequencesCausal) {
  REQUIRE_SM90();
  expect_cudnn_matches({{0, 1, 78, 378, 1378}, 16, 8, 128, true}, 501);
  EXPECT_TRUE(has_plan("backward ragged b=4 s=1024 Hq=16 Hkv=8 D=128 causal"));
}

// A pack that fills its plan bucket exactly runs a dense plan: no padding mask, the lse in our layout (strided
// across the sequences when there are several). Equal lengths short of the bucket stay ragged.
TEST(CudnnAttention, PacksFillingTheirBucketRunADensePlan) {
  REQUIRE_SM90();
  expect_cudnn_matches({{0, 256, 512, 768, 1024}, 16, 8, 128, true}, 509);
  EXPECT_TRUE(has_plan("forward dense b=4 s=256 Hq=16 Hkv=8 D=128 causal"));
  EXPECT_TRUE(has_plan("backward dense b=4 s=256 Hq=16 Hkv=8 D=128 causal"));
  expect_cudnn_matches({{0, 512}, 8, 2, 64, false}, 510);
  EXPECT_TRUE(has_plan("backward dense b=1 s=512 Hq=8 Hkv=2 D=64 full"));
  expect_cudnn_matches({{0, 200, 400}, 8, 2, 64, true}, 511);
  EXPECT_TRUE(has_plan("backward ragged b=2 s=256 Hq=8 Hkv=2 D=64 causal"));
}

// Encoders attend both ways; a zero-length sequence in the middle too.
TEST(CudnnAttention, PackedFullAttention) {
  REQUIRE_SM90();
  expect_cudnn_matches({{0, 1, 78, 78, 378, 878}, 8, 2, 128, false}, 502);
}

TEST(CudnnAttention, GroupedQueries32To4) {
  REQUIRE_SM90();
  expect_cudnn_matches({{0, 5, 205, 605}, 32, 4, 128, true}, 503);
}

TEST(CudnnAttention, HeadDim64AndMultiHead) {
  REQUIRE_SM90();
  expect_cudnn_matches({{0, 100, 433}, 8, 2, 64, true}, 504);
  expect_cudnn_matches({{0, 100, 433}, 4, 4, 64, false}, 505);
}

// The backward accumulates dQ in a workspace that cuDNN must clear itself: run it twice on one recycled workspace
// (the caching allocator hands the same block back) and the second dq must not carry the first.
TEST(CudnnAttention, RepeatedBackwardIsStable) {
  REQUIRE_SM90();
  const AttentionCase c{{0, 300, 1000}, 16, 8, 128, true};
  const Inputs in = make_inputs(c, DType::BF16, 506);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  GpuTensors t = gpu_tensors(c, in);
  std::string why;
  ASSERT_TRUE(ops::cuda::cudnn_attention_forward(t.q, t.k, t.v, c.cu, c.causal, scale, t.out, t.lse, &why)) << why;
  std::vector<Outputs> runs;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ops::cuda::cudnn_attention_backward(t.dout, t.q, t.k, t.v, t.out, t.lse, c.cu, c.causal, scale, t.dq,
                                                    t.dk, t.dv, &why))
        << why;
    runs.push_back(outputs_to_host(t));
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(normwise_close_to(host_values(runs[i].dq), host_values(runs[0].dq), 1e-2)) << "dq of run " << i;
    EXPECT_TRUE(normwise_close_to(host_values(runs[i].dk), host_values(runs[0].dk), 1e-2)) << "dk of run " << i;
    EXPECT_TRUE(normwise_close_to(host_values(runs[i].dv), host_values(runs[0].dv), 1e-2)) << "dv of run " << i;
  }
}

// A forward of one backend and the backward of the other share out and lse: our forward, cuDNN's backward.
TEST(CudnnAttention, BackwardTakesOurKernelsLse) {
  REQUIRE_SM90();
  const AttentionCase c{{0, 77, 377}, 16, 8, 128, true};
  const Inputs in = make_inputs(c, DType::BF16, 507);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  GpuTensors t = gpu_tensors(c, in);
  {
    const BackendScope native(ops::cuda::AttentionBackend::Native);
    ops::attention_forward(t.q, t.k, t.v, c.cu, c.causal, scale, t.out, t.lse);
  }
  std::string why;
  ASSERT_TRUE(ops::cuda::cudnn_attention_backward(t.dout, t.q, t.k, t.v, t.out, t.lse, c.cu, c.causal, scale, t.dq,
                                                  t.dk, t.dv, &why))
      << why;
  expect_all_close(outputs_to_host(t), cpu_attention(c, in, scale), kBf16Tolerance, kBf16Tolerance,
                   "the CPU reference");
}

// The op API under auto (the default) on the short packed lengths of the bf16 kernels' sweep (an empty sequence,
// single tokens): through cuDNN where it takes the case (head dims 16, 64, 128), our kernels where it does not (20;
// 256, where cuDNN 9.14 gave NaN key/value gradients). Fewer shapes than that sweep: each new shape builds a plan.
TEST(CudnnAttention, AutoBackendMatchesCpuReference) {
  REQUIRE_GPU();
  const BackendScope backend(ops::cuda::AttentionBackend::Auto);
  uint64_t seed = 600;
  for (int64_t d : {16, 20, 64, 128, 256})
    expect_matches_cpu({kPackedLengths, 4, 2, d, true}, DType::BF16, kBf16Tolerance, seed++);
  expect_matches_cpu({kPackedLengths, 8, 2, 128, false}, DType::BF16, kBf16Tolerance, seed++);
}

// One 32k-token causal sequence through cuDNN (the plan's longest bucket in training), sampled.
TEST(CudnnAttention, Long32kCausalSampled) {
  REQUIRE_SM90();
  const BackendScope backend(ops::cuda::AttentionBackend::Cudnn);
  const int64_t s = 32768;
  expect_sampled_rows_match({{0, static_cast<int32_t>(s)}, 16, 8, 128, true}, DType::BF16, kBf16Tolerance,
                            {0, 1, 63, 64, 4095, 16411, s - 1}, {0, 5, 15}, {0, 77, 16384, s - 2, s - 1}, {0, 7});
}

// VEOMNI_ATTENTION_BACKEND=cudnn turns a case cuDNN cannot take into an error naming the reason; auto runs ours.
TEST(CudnnAttention, ForcedBackendRefusesWithReason) {
  REQUIRE_SM90();  // elsewhere the reason is the GPU, not the head dim
  const AttentionCase c{{0, 40}, 4, 2, 20, true};  // head_dim 20: not one cuDNN is used for
  const Inputs in = make_inputs(c, DType::BF16, 508);
  GpuTensors t = gpu_tensors(c, in);
  std::string why;
  EXPECT_FALSE(ops::cuda::cudnn_attention_forward(t.q, t.k, t.v, c.cu, c.causal, 0.2f, t.out, t.lse, &why));
  EXPECT_NE(why.find("head_dim"), std::string::npos) << why;
  {
    const BackendScope backend(ops::cuda::AttentionBackend::Cudnn);
    try {
      ops::attention_forward(t.q, t.k, t.v, c.cu, c.causal, 0.2f, t.out, t.lse);
      ADD_FAILURE() << "VEOMNI_ATTENTION_BACKEND=cudnn ran a case cuDNN cannot take";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
    }
  }
  const BackendScope backend(ops::cuda::AttentionBackend::Auto);
  EXPECT_NO_THROW(ops::attention_forward(t.q, t.k, t.v, c.cu, c.causal, 0.2f, t.out, t.lse));
}

TEST(CudnnAttention, BackendNames) {
  using ops::cuda::AttentionBackend;
  EXPECT_EQ(ops::cuda::parse_attention_backend("auto", "test"), AttentionBackend::Auto);
  EXPECT_EQ(ops::cuda::parse_attention_backend("", "test"), AttentionBackend::Auto);
  EXPECT_EQ(ops::cuda::parse_attention_backend("cudnn", "test"), AttentionBackend::Cudnn);
  EXPECT_EQ(ops::cuda::parse_attention_backend("native", "test"), AttentionBackend::Native);
  EXPECT_THROW(ops::cuda::parse_attention_backend("flash", "VEOMNI_ATTENTION_BACKEND"), InputError);
  EXPECT_STREQ(ops::cuda::attention_backend_name(AttentionBackend::Cudnn), "cudnn");
}

