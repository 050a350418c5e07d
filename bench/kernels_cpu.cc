// CPU kernel benchmark: GEMM GFLOP/s at model-like shapes, attention forward/backward, cross-entropy (and the label
// log-prob and entropy op pair beside it) and the encoder ops' throughput.
// Prints a markdown table (the figures recorded in bench/RESULTS.md); it asserts nothing. Threads: OMP_NUM_THREADS.
// Usage: bench_kernels_cpu [gemm] [attention] [cross_entropy] [encoder]   (no argument: all sections)
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/threads.h"
#include "kernels/ops.h"

using namespace veomni;

namespace {

Tensor random_tensor(const Shape& shape, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

// Median seconds of `reps` runs after one warm-up run.
double time_it(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> runs;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

void row(const std::string& name, const std::string& shape, double seconds, double flops, const std::string& note) {
  fmt::print("| {:<28} | {:<34} | {:>9.2f} | {:>8.1f} | {} |\n", name, shape, seconds * 1e3, flops / seconds / 1e9,
             note);
}

void bench_gemm(std::mt19937& rng) {
  struct Case {
    const char* name;
    int64_t m, n, k;
    bool ta, tb;
  };
  const Case cases[] = {
      {"matmul square", 1024, 1024, 1024, false, false},
      {"linear fwd x W^T", 2048, 3072, 1024, false, true},
      {"linear dx = dy W", 2048, 1024, 3072, false, false},
      {"linear dW += dy^T x", 3072, 1024, 2048, true, false},
      {"lm_head x W^T (V=32000)", 512, 32000, 1024, false, true},
  };
  for (const Case& c : cases) {
    const Tensor a = c.ta ? random_tensor({c.k, c.m}, rng) : random_tensor({c.m, c.k}, rng);
    const Tensor b = c.tb ? random_tensor({c.n, c.k}, rng) : random_tensor({c.k, c.n}, rng);
    Tensor out = Tensor::zeros({c.m, c.n}, DType::F32);
    const double s = time_it(3, [&] { ops::matmul(a, c.ta, b, c.tb, out, 1.0f, c.ta ? 1.0f : 0.0f); });
    row(c.name, fmt::format("M={} N={} K={}", c.m, c.n, c.k), s, 2.0 * c.m * c.n * c.k, "");
  }
  // 64 experts, 8 of 64 per token over 1024 tokens: uneven groups as routing makes them.
  const int64_t experts = 64, tokens = 1024 * 8, hidden = 1024, inter = 768;
  std::vector<int64_t> sizes(experts);
  std::discrete_distribution<int64_t> skew({4, 2, 1, 1});
  int64_t assigned = 0;
  for (int64_t e = 0; e < experts; ++e) assigned += (sizes[static_cast<size_t>(e)] = 64 + 32 * skew(rng));
  sizes.back() += tokens - assigned;
  const Tensor x = random_tensor({tokens, hidden}, rng);
  const Tensor w = random_tensor({experts, 2 * inter, hidden}, rng);
  Tensor y = Tensor::empty({tokens, 2 * inter}, DType::F32);
  const double s = time_it(3, [&] { ops::grouped_matmul(x, w, true, sizes, y); });
  row("grouped_matmul (64 experts)", fmt::format("T={} N={} K={}", tokens, 2 * inter, hidden), s,
      2.0 * tokens * 2 * inter * hidden, "");
}

void bench_attention(std::mt19937& rng) {
  struct Case {
    int64_t seq, hq, hkv, d;
    int batch;
  };
  for (const Case& c : {Case{1024, 16, 8, 128, 2}, Case{4096, 16, 8, 128, 1}}) {
    const int64_t s = c.seq * c.batch;
    std::vector<int32_t> cu;
    for (int b = 0; b <= c.batch; ++b) cu.push_back(static_cast<int32_t>(b * c.seq));
    const Tensor q = random_tensor({s, c.hq, c.d}, rng), k = random_tensor({s, c.hkv, c.d}, rng);
    const Tensor v = random_tensor({s, c.hkv, c.d}, rng), dout = random_tensor({s, c.hq, c.d}, rng);
    Tensor out = Tensor::empty(q.shape(), DType::F32), lse = Tensor::empty({c.hq, s}, DType::F32);
    Tensor dq = Tensor::empty(q.shape(), DType::F32), dk = Tensor::empty(k.shape(), DType::F32);
    Tensor dv = Tensor::empty(v.shape(), DType::F32);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    // Causal: half of the S x S scores; 2 GEMMs forward, 5 backward (the usual flash-attention count).
    const double half = 0.5 * static_cast<double>(c.seq) * c.seq * c.batch * c.hq * c.d;
    const std::string shape = fmt::format("{}x{} Hq={} Hkv={} D={}", c.batch, c.seq, c.hq, c.hkv, c.d);
    const double f = time_it(2, [&] { ops::attention_forward(q, k, v, cu, true, scale, out, lse); });
    row("attention fwd (causal)", shape, f, 4.0 * half, "");
    const double b = time_it(2, [&] { ops::attention_backward(dout, q, k, v, out, lse, cu, true, scale, dq, dk, dv); });
    row("attention bwd (causal)", shape, b, 10.0 * half, "recomputes P twice");
  }
}

void bench_cross_entropy(std::mt19937& rng) {
  for (const auto& [n, v] : {std::pair<int64_t, int64_t>{2048, 32000}, {512, 151936}}) {
    const Tensor logits = random_tensor({n, v}, rng, 4.0f);
    std::vector<int64_t> y(static_cast<size_t>(n));
    std::uniform_int_distribution<int64_t> dist(0, v - 1);
    for (auto& l : y) l = dist(rng);
    const Tensor labels = Tensor::from_vector(y, {n});
    Tensor losses = Tensor::empty({n}, DType::F32), grad = Tensor::empty({n, v}, DType::F32);
    const double s = time_it(3, [&] { ops::cross_entropy(logits, labels, -100, 1.0f / n, losses, grad); });
    fmt::print("| {:<28} | {:<34} | {:>9.2f} | {:>8} | {:.1f} M logits/s |\n", "cross_entropy + grad",
               fmt::format("N={} V={}", n, v), s * 1e3, "-", static_cast<double>(n) * v / s / 1e6);
    // The label log-prob head beside it: log-probs and entropy, then the backward with both gradients.
    Tensor logprobs = Tensor::empty({n}, DType::F32), entropy = Tensor::empty({n}, DType::F32);
    const Tensor dlogprobs = Tensor::full<float>({n}, -1.0f / n), dentropy = Tensor::full<float>({n}, 0.01f / n);
    const double st = time_it(3, [&] {
      ops::token_logprobs(logits, labels, -100, logprobs, entropy);
      ops::token_logprobs_backward(logits, labels, -100, dlogprobs, dentropy, grad);
    });
    fmt::print("| {:<28} | {:<34} | {:>9.2f} | {:>8} | {:.1f} M logits/s |\n", "token_logprobs+entropy, bwd",
               fmt::format("N={} V={}", n, v), st * 1e3, "-", static_cast<double>(n) * v / st / 1e6);
  }
}

// Memory-bound encoder ops in GB/s (each input read once, each output written once, f32).
void bench_encoder(std::mt19937& rng) {
  auto memory_row = [](const char* name, const std::string& shape, double bytes, const std::function<void()>& fn) {
    const double s = time_it(3, fn);
    fmt::print("| {:<28} | {:<34} | {:>9.2f} | {:>8} | {:.1f} GB/s |\n", name, shape, s * 1e3, "-", bytes / s / 1e9);
  };
  const int64_t t = 2048, hidden = 1152, inter = 4304;
  {
    const Tensor x = random_tensor({t, hidden}, rng), dy = random_tensor({t, hidden}, rng);
    const Tensor w = random_tensor({hidden}, rng), b = random_tensor({hidden}, rng);
    Tensor y = Tensor::empty({t, hidden}, DType::F32), mean = Tensor::empty({t}, DType::F32);
    Tensor rstd = Tensor::empty({t}, DType::F32), dx = Tensor::empty({t, hidden}, DType::F32);
    Tensor dw = Tensor::zeros({hidden}, DType::F32), db = Tensor::zeros({hidden}, DType::F32);
    const double act = 4.0 * t * hidden;
    const std::string shape = fmt::format("[{}, {}]", t, hidden);
    memory_row("layernorm_forward", shape, 2 * act, [&] { ops::layernorm_forward(x, w, b, 1e-6f, y, mean, rstd); });
    memory_row("layernorm_backward", shape, 3 * act,
               [&] { ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db); });
  }
  {
    const Tensor x = random_tensor({t, inter}, rng, 3.0f), dy = random_tensor({t, inter}, rng);
    Tensor y = Tensor::empty({t, inter}, DType::F32), dx = Tensor::empty({t, inter}, DType::F32);
    Tensor db = Tensor::zeros({inter}, DType::F32);
    const double act = 4.0 * t * inter;
    const std::string shape = fmt::format("[{}, {}]", t, inter);
    memory_row("gelu_forward (tanh)", shape, 2 * act, [&] { ops::gelu_forward(x, ops::GeluKind::Tanh, y); });
    memory_row("gelu_backward (erf)", shape, 3 * act, [&] { ops::gelu_backward(dy, x, ops::GeluKind::Erf, dx); });
    memory_row("add_bias_", shape, 2 * act, [&] { ops::add_bias_(y, db); });
    memory_row("bias_grad", shape, act, [&] { ops::bias_grad(dy, db); });
  }
  {
    // The audio encoder's second stem conv: 480 channels of 64x50, 3x3 kernel, stride 2, padding 1.
    const int64_t batch = 4, ch = 480, h = 64, w = 50, ho = 32, wo = 25;
    const Tensor x = random_tensor({batch, ch, h, w}, rng);
    Tensor cols = Tensor::empty({batch * ho * wo, ch * 9}, DType::F32), dx = Tensor::empty(x.shape(), DType::F32);
    const std::string shape = fmt::format("[{}, {}, {}, {}] 3x3/2/1", batch, ch, h, w);
    const double bytes = 4.0 * (x.numel() + cols.numel());
    memory_row("im2col_2d", shape, bytes, [&] { ops::im2col_2d(x, 3, 3, 2, 1, cols); });
    memory_row("col2im_2d", shape, bytes, [&] { ops::col2im_2d(cols, 3, 3, 2, 1, dx); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> wanted(argv + 1, argv + argc);
  auto selected = [&](const char* section) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), section) != wanted.end();
  };
  std::mt19937 rng(2024);
  fmt::print("CPU kernels, {} thread(s)\n\n", ops::cpu::num_threads());
  fmt::print("| {:<28} | {:<34} | {:>9} | {:>8} | {} |\n", "op", "shape", "ms", "GFLOP/s", "note");
  fmt::print("|{:-<30}|{:-<36}|{:->11}|{:->10}|------|\n", "", "", "", "");
  if (selected("gemm")) bench_gemm(rng);
  if (selected("attention")) bench_attention(rng);
  if (selected("cross_entropy")) bench_cross_entropy(rng);
  if (selected("encoder")) bench_encoder(rng);
  return 0;
}
