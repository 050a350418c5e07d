// CUDA kernel benchmark: GEMM TFLOP/s at Qwen3-0.6B shapes (4096 tokens, hidden 1024, 16 query heads of 128,
// intermediate 3072, vocab 151936) and Qwen3-30B-A3B shapes (hidden 2048, 32 query heads, expert intermediate 768,
// 128 experts, top-8), each plain GEMM with cuBLASLt's heuristic first pick and with the autotuned choice
// (kernels/cuda/gemm_autotune.h), and the memory-bound kernels in GB/s, counting each input read once and each output
// written once (the least traffic the op needs; kernels that read a row twice show it as lower GB/s). Prints markdown
// tables; asserts nothing.
// Usage: bench_kernels_cuda [-v] [gemm] [lora] [memory] [encoder] [decode] [moe]   (no section: all); -v logs every
// autotuned GEMM's candidates and their times; VEOMNI_GROUPED_GEMM=loop runs the expert GEMMs as one cuBLASLt call
// per expert.
#ifdef VEOMNI_WITH_CUDA
#include <cuda_runtime.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "bench/cuda_timer.h"
#include "kernels/cuda/gemm_autotune.h"
#include "kernels/cuda/gemm_skinny.h"
#include "kernels/cuda/runtime.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"

using namespace veomni;

namespace {

Device gpu() { return Device::cuda(0); }

// Uniform values in [-scale, scale): a fast LCG on the host in f32 (the big logits tensors have 622M elements),
// uploaded and converted on the device.
Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937& rng, float scale = 1.0f) {
  Tensor host = Tensor::empty(shape, DType::F32);
  float* p = host.data<float>();
  uint64_t state = rng() * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < host.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f) * scale;
  }
  Tensor f32 = host.to(gpu());
  if (dtype == DType::F32) return f32;
  Tensor out = Tensor::empty(shape, dtype, gpu());
  ops::cast(f32, out);
  return out;
}

using veomni::benchmarking::time_ms;

void header(const char* unit) {
  fmt::print("| {:<34} | {:<40} | {:>9} | {:>9} |\n", "op", "shape", "ms", unit);
  fmt::print("|{:-<36}|{:-<42}|{:->11}|{:->11}|\n", "", "", "", "");
}

void row(const std::string& op, const std::string& shape, double ms, double rate) {
  fmt::print("| {:<34} | {:<40} | {:>9.3f} | {:>9.1f} |\n", op, shape, ms, rate);
}

// ---------------------------------------------------------------- GEMM

struct MatmulCase {
  const char* name;
  int64_t m, n, k;
  bool ta, tb;
  DType in, out;
  float alpha, beta;
};

double tflops(const MatmulCase& c, double ms) { return 2.0 * c.m * c.n * c.k / (ms * 1e-3) / 1e12; }

struct MatmulTimes {
  double heuristic_ms, tuned_ms;
};

// The same ops::matmul call as the trainer's layers on random operands, timed with the heuristic's first pick and
// then with autotuning (the warm-up call of time_ms times the candidates; the median is of the calls after it).
MatmulTimes time_matmul(const MatmulCase& c, std::mt19937& rng) {
  const Tensor a = random_tensor(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, c.in, rng);
  const Tensor b = random_tensor(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, c.in, rng);
  Tensor out = Tensor::zeros({c.m, c.n}, c.out, gpu());
  const auto median_ms = [&](bool autotune) {
    ops::cuda::set_gemm_autotune(autotune);
    return time_ms(10, [&] { ops::matmul(a, c.ta, b, c.tb, out, c.alpha, c.beta); });
  };
  const double heuristic_ms = median_ms(false);
  return {heuristic_ms, median_ms(true)};
}

void bench_matmul(const MatmulCase& c, std::mt19937& rng) {
  const auto [heuristic_ms, tuned_ms] = time_matmul(c, rng);
  fmt::print("| {:<44} | {:<29} | {:>9.3f} | {:>9.1f} | {:>9.3f} | {:>9.1f} | {:>5.2f}x |\n",
             fmt::format("{} ({}->{})", c.name, dtype_name(c.in), dtype_name(c.out)),
             fmt::format("{}{} M={} N={} K={}", c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.m, c.n, c.k), heuristic_ms,
             tflops(c, heuristic_ms), tuned_ms, tflops(c, tuned_ms), heuristic_ms / tuned_ms);
}

void bench_plain_gemms(std::mt19937& rng) {
  fmt::print("\nGEMM (cuBLASLt, fp32 accumulation): heuristic first pick vs autotuned\n\n");
  fmt::print("| {:<44} | {:<29} | {:>9} | {:>9} | {:>9} | {:>9} | {:>6} |\n",
             "op (ops::matmul as the trainer calls it)", "shape", "heur. ms", "TFLOP/s", "tuned ms", "TFLOP/s", "gain");
  fmt::print("|{:-<46}|{:-<31}|{:->11}|{:->11}|{:->11}|{:->11}|{:->8}|\n", "", "", "", "", "", "", "");
  const DType bf = DType::BF16, f32 = DType::F32;
  // alpha of the lm_head GEMMs: the loss's gradient scale (1 / tokens), as LmHead::loss_backward passes it.
  const float ce = 1.0f / 4096;
  const MatmulCase cases[] = {
      // Issue #7: the q_proj forward NT GEMMs (40 and 18 TFLOP/s in an H100 profile with the heuristic's pick), the
      // NN GEMM of q_proj's m, n, k (o_proj's input gradient, 571 TFLOP/s there) and the lm_head weight gradient
      // accumulated into its f32 gradient (170 TFLOP/s in the profile).
      {"0.6B q_proj x W^T", 4096, 2048, 1024, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B o_proj dx = dy W", 4096, 2048, 1024, false, false, bf, bf, 1.0f, 0.0f},
      {"30B-A3B q_proj x W^T", 4096, 4096, 2048, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B lm_head dW += dlogits^T x", 151936, 1024, 4096, true, false, bf, f32, ce, 1.0f},
      {"30B-A3B lm_head dW += dlogits^T x", 151936, 2048, 4096, true, false, bf, f32, ce, 1.0f},
      // The other dense GEMMs of a 0.6B step, and q, k, v as one GEMM for comparison.
      {"0.6B k_proj / v_proj x W^T", 4096, 1024, 1024, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B q,k,v fused x W^T", 4096, 4096, 1024, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B q_proj dW += dy^T x", 2048, 1024, 4096, true, false, bf, f32, 1.0f, 1.0f},
      {"0.6B o_proj x W^T", 4096, 1024, 2048, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B gate_up x W^T", 4096, 6144, 1024, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B down x W^T", 4096, 1024, 3072, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B down dx = dy W", 4096, 3072, 1024, false, false, bf, bf, 1.0f, 0.0f},
      {"0.6B down dW += dy^T x", 1024, 3072, 4096, true, false, bf, f32, 1.0f, 1.0f},
      {"0.6B lm_head x W^T", 4096, 151936, 1024, false, true, bf, bf, 1.0f, 0.0f},
      {"0.6B lm_head dx = dlogits W", 4096, 1024, 151936, false, false, bf, bf, ce, 0.0f},
      {"0.6B gate_up x W^T", 4096, 6144, 1024, false, true, f32, f32, 1.0f, 0.0f},
  };
  const bool autotune_before = ops::cuda::gemm_autotune_enabled();
  for (const MatmulCase& c : cases) bench_matmul(c, rng);
  ops::cuda::set_gemm_autotune(autotune_before);
}

// The LoRA adapters' thin GEMMs of a Qwen3-8B layer at seq 4096 (hidden 4096, q/k/v 6144 columns, intermediate
// 12288), rank 16, as the packed projections run them (model/layers/packed_linears.cc, lora_adapter.cc): q/k/v with
// three stacked A's (48 rows), gate|up with two (32), o_proj and down_proj one each. Each is bound by the one full
// activation it reads or writes (x, y, dy or dx); GB/s counts those bytes only. Heuristic pick and autotuned.
void bench_lora_gemms(std::mt19937& rng) {
  fmt::print("\nLoRA thin GEMMs, Qwen3-8B shape, seq 4096, rank 16 (GB/s of the full activation each moves)\n\n");
  fmt::print("| {:<44} | {:<29} | {:>9} | {:>9} | {:>9} | {:>9} |\n", "op (ops::matmul as the adapters call it)",
             "shape", "heur. ms", "GB/s", "tuned ms", "GB/s");
  fmt::print("|{:-<46}|{:-<31}|{:->11}|{:->11}|{:->11}|{:->11}|\n", "", "", "", "", "", "");
  struct Set {
    const char* name;
    int64_t k, n, rank;  // input width, output width, stacked rank
  };
  const Set sets[] = {{"q/k/v", 4096, 6144, 48}, {"o_proj", 4096, 4096, 16}, {"gate|up", 4096, 24576, 32},
                      {"down_proj", 12288, 4096, 16}};
  const int64_t m = 4096;
  const DType bf = DType::BF16, f32 = DType::F32;
  const bool autotune_before = ops::cuda::gemm_autotune_enabled();
  for (const Set& set : sets) {
    struct Thin {
      std::string what;
      MatmulCase c;
      int64_t activation;  // elements of the full activation it moves
    };
    const Thin thins[] = {
        {"xa = x A^T", {"", m, set.rank, set.k, false, true, bf, bf, 1.0f, 0.0f}, m * set.k},
        {"y = s xa B^T", {"", m, set.n, set.rank, false, true, bf, bf, 2.0f, 0.0f}, m * set.n},
        {"dyb = dy B", {"", m, set.rank, set.n, false, false, bf, bf, 1.0f, 0.0f}, m * set.n},
        {"dx = s dyb A", {"", m, set.k, set.rank, false, false, bf, bf, 2.0f, 0.0f}, m * set.k},
        {"dB += s dy^T xa", {"", set.n, set.rank, m, true, false, bf, f32, 2.0f, 1.0f}, m * set.n},
        {"dA += s dyb^T x", {"", set.rank, set.k, m, true, false, bf, f32, 2.0f, 1.0f}, m * set.k},
    };
    for (const Thin& t : thins) {
      const MatmulCase& c = t.c;
      const auto [heuristic_ms, tuned_ms] = time_matmul(c, rng);
      const double bytes = 2.0 * static_cast<double>(t.activation);
      fmt::print("| {:<44} | {:<29} | {:>9.3f} | {:>9.1f} | {:>9.3f} | {:>9.1f} |\n",
                 fmt::format("{} {}", set.name, t.what),
                 fmt::format("{}{} M={} N={} K={}", c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.m, c.n, c.k), heuristic_ms,
                 bytes / (heuristic_ms * 1e-3) / 1e9, tuned_ms, bytes / (tuned_ms * 1e-3) / 1e9);
    }
  }
  ops::cuda::set_gemm_autotune(autotune_before);
}

// Uneven expert loads as routing makes them: a skewed share of `rows` per expert, every expert some rows.
std::vector<int64_t> expert_loads(int64_t experts, int64_t rows, std::mt19937& rng) {
  std::gamma_distribution<double> share(2.0, 1.0);
  std::vector<double> w(static_cast<size_t>(experts));
  double total = 0.0;
  for (double& x : w) total += (x = share(rng));
  std::vector<int64_t> sizes(static_cast<size_t>(experts));
  int64_t assigned = 0;
  for (size_t e = 0; e < sizes.size(); ++e) assigned += (sizes[e] = static_cast<int64_t>(w[e] / total * rows));
  sizes.back() += rows - assigned;
  return sizes;
}

// The grouped expert GEMMs: never autotuned (their row counts change every step), so one column.
void bench_expert_gemms(std::mt19937& rng) {
  fmt::print("\nExpert GEMMs (grouped, not autotuned)\n\n");
  header("TFLOP/s");
  const DType bf = DType::BF16, f32 = DType::F32;
  // Qwen3-30B-A3B experts: 4096 tokens x top-8 = 32768 routed rows over 128 experts. VEOMNI_GROUPED_GEMM=loop
  // times one cuBLASLt call per expert instead of cuBLAS's grouped GEMM.
  const char* mode = std::getenv("VEOMNI_GROUPED_GEMM");
  fmt::print("| {:<34} | {:<40} | {:>9} | {:>9} |\n", "expert GEMMs:", mode ? mode : "grouped API", "", "");
  const int64_t experts = 128, rows = 4096 * 8, hidden = 2048, inter = 768;
  const std::vector<int64_t> sizes = expert_loads(experts, rows, rng);
  const double gate_up_flops = 2.0 * rows * (2 * inter) * hidden;
  const Tensor x = random_tensor({rows, hidden}, bf, rng);
  const Tensor w_gate_up = random_tensor({experts, 2 * inter, hidden}, bf, rng);
  Tensor gate_up = Tensor::empty({rows, 2 * inter}, bf, gpu());
  double ms = time_ms(10, [&] { ops::grouped_matmul(x, w_gate_up, true, sizes, gate_up); });
  row("30B experts gate_up x W^T", fmt::format("T={} N={} K={} G={}", rows, 2 * inter, hidden, experts), ms,
      gate_up_flops / (ms * 1e-3) / 1e12);
  const Tensor h = random_tensor({rows, inter}, bf, rng);
  const Tensor w_down = random_tensor({experts, hidden, inter}, bf, rng);
  Tensor y = Tensor::empty({rows, hidden}, bf, gpu());
  ms = time_ms(10, [&] { ops::grouped_matmul(h, w_down, true, sizes, y); });
  row("30B experts down x W^T", fmt::format("T={} N={} K={} G={}", rows, hidden, inter, experts), ms,
      2.0 * rows * hidden * inter / (ms * 1e-3) / 1e12);
  Tensor dx = Tensor::empty({rows, hidden}, bf, gpu());
  ms = time_ms(10, [&] { ops::grouped_matmul(gate_up, w_gate_up, false, sizes, dx); });
  row("30B experts gate_up dx = dy W", fmt::format("T={} N={} K={} G={}", rows, hidden, 2 * inter, experts), ms,
      gate_up_flops / (ms * 1e-3) / 1e12);
  Tensor dw = Tensor::zeros({experts, 2 * inter, hidden}, f32, gpu());
  ms = time_ms(10, [&] { ops::grouped_matmul_weight_grad(gate_up, x, sizes, dw, true); });
  row("30B experts gate_up dW += dy^T x", fmt::format("T={} N={} K={} G={} (f32 dW)", rows, 2 * inter, hidden, experts),
      ms, gate_up_flops / (ms * 1e-3) / 1e12);
}

// ---------------------------------------------------------------- memory-bound kernels

void memory_row(const std::string& op, const std::string& shape, double bytes, const std::function<void()>& fn) {
  const double ms = time_ms(20, fn);
  row(op, shape, ms, bytes / (ms * 1e-3) / 1e9);
}

void bench_memory(std::mt19937& rng) {
  fmt::print("\nMemory-bound kernels (bf16 activations unless noted)\n\n");
  header("GB/s");
  const DType bf = DType::BF16, f32 = DType::F32;
  const int64_t t = 4096, hidden = 1024, inter = 3072, vocab = 151936, heads = 16, head_dim = 128;

  {
    const Tensor x = random_tensor({t, hidden}, bf, rng), dy = random_tensor({t, hidden}, bf, rng);
    const Tensor w = random_tensor({hidden}, bf, rng);
    Tensor y = Tensor::empty({t, hidden}, bf, gpu()), rstd = Tensor::empty({t}, f32, gpu());
    Tensor dx = Tensor::empty({t, hidden}, bf, gpu()), dw = Tensor::zeros({hidden}, f32, gpu());
    const double act = 2.0 * t * hidden;
    const std::string shape = fmt::format("[{}, {}]", t, hidden);
    memory_row("rmsnorm_forward", shape, 2 * act, [&] { ops::rmsnorm_forward(x, w, 1e-6f, y, rstd); });
    memory_row("rmsnorm_backward", shape, 3 * act, [&] { ops::rmsnorm_backward(dy, x, w, rstd, dx, dw); });
  }
  {
    std::vector<int64_t> pos(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) pos[static_cast<size_t>(i)] = i;
    const Tensor positions = Tensor::from_vector(pos, {t}).to(gpu());
    Tensor cos = Tensor::empty({t, head_dim}, f32, gpu()), sin = Tensor::empty({t, head_dim}, f32, gpu());
    ops::rope_tables(positions, head_dim, 1e6, {}, cos, sin);
    Tensor q = random_tensor({t, heads, head_dim}, bf, rng);
    memory_row("rope_apply (q)", fmt::format("[{}, {}, {}]", t, heads, head_dim), 2.0 * 2 * q.numel(),
               [&] { ops::rope_apply(q, cos, sin, false); });
  }
  {
    const Tensor gate_up = random_tensor({t, 2 * inter}, bf, rng), dout = random_tensor({t, inter}, bf, rng);
    Tensor out = Tensor::empty({t, inter}, bf, gpu()), dgate_up = Tensor::empty({t, 2 * inter}, bf, gpu());
    const double n = 2.0 * t * inter;
    const std::string shape = fmt::format("[{}, {}] -> [{}, {}]", t, 2 * inter, t, inter);
    memory_row("swiglu_fused_forward", shape, 3 * n, [&] { ops::swiglu_fused_forward(gate_up, out); });
    memory_row("swiglu_fused_backward", shape, 5 * n, [&] { ops::swiglu_fused_backward(dout, gate_up, dgate_up); });
  }
  {
    Tensor logits = random_tensor({t, vocab}, bf, rng, 8.0f);
    std::vector<int64_t> y(static_cast<size_t>(t));
    std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
    for (auto& l : y) l = pick(rng);
    const Tensor labels = Tensor::from_vector(y, {t}).to(gpu());
    Tensor losses = Tensor::empty({t}, f32, gpu());
    // In place: the logits become their gradient each run (the values stay in range for the next run).
    memory_row("cross_entropy + grad (in place)", fmt::format("[{}, {}]", t, vocab), 2.0 * 2 * logits.numel(),
               [&] { ops::cross_entropy(logits, labels, -100, 1.0f, losses, logits); });
    Tensor none;
    memory_row("cross_entropy loss only", fmt::format("[{}, {}]", t, vocab), 2.0 * logits.numel(),
               [&] { ops::cross_entropy(logits, labels, -100, 1.0f, losses, none); });
    // The label log-prob head (DPO, PPO actor, scoring): forward with and without the entropy, and the backward in
    // place with both gradients. The gradients are small, so the logits stay in range across runs.
    Tensor logprobs = Tensor::empty({t}, f32, gpu()), entropy = Tensor::empty({t}, f32, gpu());
    memory_row("token_logprobs", fmt::format("[{}, {}]", t, vocab), 2.0 * logits.numel(),
               [&] { ops::token_logprobs(logits, labels, -100, logprobs, none); });
    memory_row("token_logprobs + entropy", fmt::format("[{}, {}]", t, vocab), 2.0 * logits.numel(),
               [&] { ops::token_logprobs(logits, labels, -100, logprobs, entropy); });
    const Tensor dlogprobs = random_tensor({t}, f32, rng, 1e-3f), dentropy = random_tensor({t}, f32, rng, 1e-3f);
    memory_row("token_logprobs_backward (in place)", fmt::format("[{}, {}]", t, vocab), 2.0 * 2 * logits.numel(),
               [&] { ops::token_logprobs_backward(logits, labels, -100, dlogprobs, dentropy, logits); });
  }
  {
    std::vector<int64_t> id(static_cast<size_t>(t));
    std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
    for (auto& v : id) v = pick(rng);
    const Tensor ids = Tensor::from_vector(id, {t}).to(gpu());
    const Tensor table = random_tensor({vocab, hidden}, bf, rng);
    Tensor out = Tensor::empty({t, hidden}, bf, gpu()), dout = random_tensor({t, hidden}, bf, rng);
    Tensor dtable = Tensor::zeros({vocab, hidden}, f32, gpu());
    memory_row("embedding_forward (ids checked)", fmt::format("[{}] of [{}, {}]", t, vocab, hidden),
               2.0 * 2 * t * hidden, [&] { ops::embedding_forward(ids, table, out); });
    memory_row("embedding_backward (f32 table)", fmt::format("[{}] into [{}, {}]", t, vocab, hidden),
               (2.0 + 8.0) * t * hidden, [&] { ops::embedding_backward(ids, dout, dtable); });
  }
  {
    const int64_t experts = 128, k = 8, moe_hidden = 2048;
    const Tensor logits = random_tensor({t, experts}, bf, rng, 3.0f);
    Tensor probs = Tensor::empty({t, experts}, f32, gpu()), idx = Tensor::empty({t, k}, DType::I32, gpu());
    Tensor weight = Tensor::empty({t, k}, f32, gpu());
    memory_row("moe_route (E=128, k=8)", fmt::format("[{}, {}]", t, experts), (2.0 + 4.0) * t * experts,
               [&] { ops::moe_route(logits, k, true, probs, idx, weight); });
    const Tensor x = random_tensor({t, moe_hidden}, bf, rng);
    Tensor permuted = Tensor::empty({t * k, moe_hidden}, bf, gpu()), row_map = Tensor::empty({t * k}, DType::I32, gpu());
    std::vector<int64_t> counts;
    const double rows_bytes = 2.0 * t * k * moe_hidden;
    const std::string shape = fmt::format("[{}, {}] x {}", t, moe_hidden, k);
    memory_row("moe_permute (host sync)", shape, rows_bytes + 2.0 * t * moe_hidden,
               [&] { ops::moe_permute(x, idx, experts, permuted, row_map, counts); });
    Tensor out = Tensor::empty({t, moe_hidden}, bf, gpu());
    memory_row("moe_unpermute", shape, rows_bytes + 2.0 * t * moe_hidden,
               [&] { ops::moe_unpermute(permuted, row_map, weight, out); });
    Tensor dy = Tensor::empty({t * k, moe_hidden}, bf, gpu()), dweight = Tensor::empty({t, k}, f32, gpu());
    memory_row("moe_unpermute_backward", shape, 2 * rows_bytes + 2.0 * t * moe_hidden,
               [&] { ops::moe_unpermute_backward(out, permuted, row_map, weight, dy, dweight); });
    memory_row("moe_permute_backward", shape, rows_bytes + 2.0 * t * moe_hidden,
               [&] { ops::moe_permute_backward(dy, row_map, k, out); });
  }
  {
    const int64_t n = 100'000'000;
    const std::string shape = fmt::format("{}M", n / 1'000'000);
    Tensor p = random_tensor({n}, f32, rng), g = random_tensor({n}, f32, rng, 0.01f);
    Tensor m = Tensor::zeros({n}, f32, gpu()), v = Tensor::zeros({n}, f32, gpu());
    int64_t step = 0;
    memory_row("adamw_step (f32)", shape, 7.0 * 4 * n,
               [&] { ops::adamw_step(p, g, m, v, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, ++step); });
    Tensor half = Tensor::empty({n}, bf, gpu());
    memory_row("cast f32 -> bf16", shape, 6.0 * n, [&] { ops::cast(p, half); });
    memory_row("cast bf16 -> f32", shape, 6.0 * n, [&] { ops::cast(half, m); });
    memory_row("add_ (f32)", shape, 12.0 * n, [&] { ops::add_(m, g, 0.5f); });
    memory_row("sum_squares (f32, to host)", shape, 4.0 * n, [&] { (void)ops::sum_squares(p); });
    memory_row("sum_squares (bf16, to host)", shape, 2.0 * n, [&] { (void)ops::sum_squares(half); });
  }
}

// ---------------------------------------------------------------- decode ops

// The KV-cache kernels of one decode step of the Qwen3-0.6B shape (16 query heads, 8 kv heads of 128, bf16 cache):
// attention over caches of 256 and 4,096 rows, every row attending to all of them, and the write of a step's keys;
// GB/s counts the cache rows read (keys and values) once.
void bench_decode(std::mt19937& rng) {
  fmt::print("\nDecode kernels (bf16 KV cache, 16 query heads, 8 kv heads of 128)\n\n");
  header("GB/s");
  const DType bf = DType::BF16;
  const int64_t hq = 16, hkv = 8, d = 128;
  for (int64_t rows : {1, 32}) {
    for (int64_t len : {256, 4096}) {
      const Tensor q = random_tensor({rows, hq, d}, bf, rng);
      const Tensor k = random_tensor({rows, len, hkv, d}, bf, rng), v = random_tensor({rows, len, hkv, d}, bf, rng);
      std::vector<int32_t> table;
      for (int64_t i = 0; i < rows; ++i) table.push_back(static_cast<int32_t>(i));
      for (int64_t i = 0; i < rows; ++i) table.push_back(static_cast<int32_t>(len));
      const Tensor cache_rows = Tensor::from_vector(table, {2, rows}).to(gpu());
      Tensor out = Tensor::empty({rows, hq, d}, bf, gpu());
      const std::string shape = fmt::format("{} rows x {} cached", rows, len);
      memory_row("attention_kv_cache", shape, 2.0 * 2 * rows * len * hkv * d,
                 [&] { ops::attention_kv_cache(q, k, v, cache_rows, 0.088f, out); });
      if (len == 256) {
        const Tensor step = random_tensor({rows, hkv, d}, bf, rng);
        std::vector<int32_t> dest;
        for (int64_t i = 0; i < rows; ++i) dest.push_back(static_cast<int32_t>(i * len + len / 2));
        const Tensor dest_rows = Tensor::from_vector(dest, {rows}).to(gpu());
        Tensor cache = k.clone();
        memory_row("kv_cache_write", fmt::format("{} rows", rows), 2.0 * 2 * rows * hkv * d,
                   [&] { ops::kv_cache_write(step, dest_rows, cache); });
      }
    }
  }
}

// The GEMMs of a decode step with a few bf16 rows (ops::matmul, ops::rmsnorm_matmul and ops::rmsnorm_matmul_swiglu;
// gemm_skinny.cu for the rows and weights it takes, cuBLASLt otherwise): the LM heads of the 0.6B and 8B shapes (vocab
// 151936, the final norm in front) and the layers' q/k/v, gate|up (SwiGLU), o_proj and down_proj of both, at 1, 2, 4
// and 8 rows; for up to kSkinnyMaxRows rows also the skinny kernel called directly, whether or not the ops take it
// (where the two differ, the op ran cuBLASLt). GB/s counts the weight read once (x and the output are a few KB).
// VEOMNI_SKINNY_GEMM=0 times cuBLASLt for the ops (with the norm or SwiGLU as their own ops).
void bench_skinny(std::mt19937& rng) {
  fmt::print("\nDecode GEMMs (bf16, x W^T with 1 to 8 rows)\n\n");
  header("GB/s");
  struct Case {
    const char* name;
    int64_t n, k;  // n: the weight's rows ([gate; up]: twice the intermediate size)
    bool norm, swiglu;
  };
  const Case cases[] = {{"0.6B lm_head (final norm in front)", 151936, 1024, true, false},
                        {"8B lm_head (final norm in front)", 151936, 4096, true, false},
                        {"0.6B q/k/v (input norm in front)", 4096, 1024, true, false},
                        {"0.6B gate|up SwiGLU (norm in front)", 6144, 1024, true, true},
                        {"0.6B o_proj", 1024, 2048, false, false},
                        {"0.6B down_proj", 1024, 3072, false, false},
                        {"8B q/k/v (input norm in front)", 6144, 4096, true, false},
                        {"8B gate|up SwiGLU (norm in front)", 24576, 4096, true, true},
                        {"8B o_proj", 4096, 4096, false, false},
                        {"8B down_proj", 4096, 12288, false, false}};
  for (const Case& c : cases) {
    const Tensor w = random_tensor({c.n, c.k}, DType::BF16, rng, 0.05f);
    const Tensor gain = random_tensor({c.k}, DType::BF16, rng);
    for (int64_t rows : {1, 2, 4, 8}) {
      const Tensor x = random_tensor({rows, c.k}, DType::BF16, rng);
      Tensor out = Tensor::empty({rows, c.swiglu ? c.n / 2 : c.n}, DType::BF16, gpu());
      const std::string shape = fmt::format("{} rows x N={} K={}", rows, c.n, c.k);
      const double gigabytes = 2.0 * c.n * c.k / 1e9;
      const double ms = time_ms(20, [&] {
        if (c.swiglu) {
          ops::rmsnorm_matmul_swiglu(x, gain, 1e-6f, w, out);
        } else if (c.norm) {
          ops::rmsnorm_matmul(x, gain, 1e-6f, w, out);
        } else {
          ops::matmul(x, false, w, true, out);
        }
      });
      row(c.name, shape, ms, gigabytes / (ms * 1e-3));
      if (rows > ops::cuda::kSkinnyMaxRows) continue;
      const Tensor* norm_gain = c.norm ? &gain : nullptr;
      const double skinny_ms = time_ms(20, [&] {
        if (c.swiglu) {
          ops::cuda::skinny_swiglu(x, w, out, norm_gain, 1e-6f);
        } else {
          ops::cuda::skinny_matmul(x, w, out, false, norm_gain, 1e-6f);
        }
      });
      row(fmt::format("{} (skinny kernel)", c.name), shape, skinny_ms, gigabytes / (skinny_ms * 1e-3));
    }
  }
}

// ---------------------------------------------------------------- MoE decode

// A decode step's experts of the Qwen3-30B-A3B shape (128 experts of hidden 2048 and intermediate 768, top-8, bf16)
// at several batch sizes: ops::moe_decode_experts (the plan and GEMV kernels a graph records) against the ops of the
// training block in turn (moe_permute, which reads the expert counts back to the host, the grouped GEMMs, SwiGLU,
// moe_unpermute). Each timed call runs four steps with different random routes, so that the experts' weights come
// from HBM rather than L2; GB/s counts the distinct experts each step routes to, their weights read once.
void bench_moe_decode(std::mt19937& rng) {
  fmt::print("\nMoE decode experts (128 experts, hidden 2048, intermediate 768, top-8, bf16; 4 routes a call)\n\n");
  header("GB/s");
  const DType bf = DType::BF16;
  const int64_t experts = 128, k = 8, hidden = 2048, inter = 768, routes = 4;
  const Tensor gate_up = random_tensor({experts, 2 * inter, hidden}, bf, rng, 0.05f);
  const Tensor down = random_tensor({experts, hidden, inter}, bf, rng, 0.05f);
  const double expert_bytes = 2.0 * 3 * hidden * inter;
  for (int64_t rows : {1, 4, 8, 16, 32, 64}) {
    const Tensor x = random_tensor({rows, hidden}, bf, rng);
    std::vector<Tensor> idx, weight;
    double routed = 0.0;  // distinct experts over the routes
    for (int64_t r = 0; r < routes; ++r) {
      std::vector<int32_t> ids;
      std::vector<bool> used(experts, false);
      for (int64_t i = 0; i < rows; ++i) {
        std::vector<int32_t> all(experts);
        for (int32_t e = 0; e < experts; ++e) all[e] = e;
        std::shuffle(all.begin(), all.end(), rng);
        for (int64_t j = 0; j < k; ++j) {
          ids.push_back(all[j]);
          used[all[j]] = true;
        }
      }
      routed += static_cast<double>(std::count(used.begin(), used.end(), true));
      idx.push_back(Tensor::from_vector(ids, {rows, k}).to(gpu()));
      weight.push_back(Tensor::full<float>({rows, k}, 1.0f / k).to(gpu()));
    }
    const double bytes = routed / routes * expert_bytes + 2.0 * 2 * rows * hidden;
    Tensor out = Tensor::empty({rows, hidden}, bf, gpu());
    const std::string shape = fmt::format("{} rows, {:.1f} experts", rows, routed / routes);
    const double graph_ms = time_ms(20, [&] {
      for (int64_t r = 0; r < routes; ++r) ops::moe_decode_experts(x, idx[r], weight[r], gate_up, down, out);
    }) / routes;
    row("moe_decode_experts", shape, graph_ms, bytes / (graph_ms * 1e-3) / 1e9);
    const int64_t pairs = rows * k;
    Tensor permuted = Tensor::empty({pairs, hidden}, bf, gpu()), row_map = Tensor::empty({pairs}, DType::I32, gpu());
    Tensor product = Tensor::empty({pairs, 2 * inter}, bf, gpu()), act = Tensor::empty({pairs, inter}, bf, gpu());
    Tensor y = Tensor::empty({pairs, hidden}, bf, gpu());
    std::vector<int64_t> counts;
    const double in_turn_ms = time_ms(20, [&] {
      for (int64_t r = 0; r < routes; ++r) {
        ops::moe_permute(x, idx[r], experts, permuted, row_map, counts);
        ops::grouped_matmul(permuted, gate_up, true, counts, product);
        ops::swiglu_fused_forward(product, act);
        ops::grouped_matmul(act, down, true, counts, y);
        ops::moe_unpermute(y, row_map, weight[r], out);
      }
    }) / routes;
    row("permute, grouped GEMMs (host sync)", shape, in_turn_ms, bytes / (in_turn_ms * 1e-3) / 1e9);
  }
}

// ---------------------------------------------------------------- encoder ops

// The vision tower's LayerNorm and GELU MLP (hidden 1152, intermediate 4304) and the audio stem's im2col, in GB/s.
void bench_encoder(std::mt19937& rng) {
  fmt::print("\nEncoder ops (bf16 activations, f32 statistics and parameter gradients)\n\n");
  header("GB/s");
  const DType bf = DType::BF16, f32 = DType::F32;
  const int64_t t = 4096, hidden = 1152, inter = 4304;
  {
    const Tensor x = random_tensor({t, hidden}, bf, rng), dy = random_tensor({t, hidden}, bf, rng);
    const Tensor w = random_tensor({hidden}, bf, rng), b = random_tensor({hidden}, bf, rng);
    Tensor y = Tensor::empty({t, hidden}, bf, gpu()), mean = Tensor::empty({t}, f32, gpu());
    Tensor rstd = Tensor::empty({t}, f32, gpu()), dx = Tensor::empty({t, hidden}, bf, gpu());
    Tensor dw = Tensor::zeros({hidden}, f32, gpu()), db = Tensor::zeros({hidden}, f32, gpu());
    const double act = 2.0 * t * hidden;
    const std::string shape = fmt::format("[{}, {}]", t, hidden);
    memory_row("layernorm_forward", shape, 2 * act, [&] { ops::layernorm_forward(x, w, b, 1e-6f, y, mean, rstd); });
    memory_row("layernorm_backward", shape, 3 * act,
               [&] { ops::layernorm_backward(dy, x, w, mean, rstd, dx, dw, db); });
  }
  {
    const Tensor x = random_tensor({t, inter}, bf, rng, 3.0f), dy = random_tensor({t, inter}, bf, rng);
    Tensor y = Tensor::empty({t, inter}, bf, gpu()), dx = Tensor::empty({t, inter}, bf, gpu());
    const Tensor bias = random_tensor({inter}, bf, rng);
    Tensor db = Tensor::zeros({inter}, f32, gpu());
    const double act = 2.0 * t * inter;
    const std::string shape = fmt::format("[{}, {}]", t, inter);
    memory_row("gelu_forward (tanh)", shape, 2 * act, [&] { ops::gelu_forward(x, ops::GeluKind::Tanh, y); });
    memory_row("gelu_backward (erf)", shape, 3 * act, [&] { ops::gelu_backward(dy, x, ops::GeluKind::Erf, dx); });
    memory_row("add_bias_", shape, 2 * act, [&] { ops::add_bias_(y, bias); });
    memory_row("bias_grad (f32 dbias)", shape, act, [&] { ops::bias_grad(dy, db); });
  }
  {
    // The audio encoder's second stem conv: 480 channels of 64x50, 3x3 kernel, stride 2, padding 1.
    const int64_t batch = 16, ch = 480, h = 64, w = 50, ho = 32, wo = 25;
    const Tensor x = random_tensor({batch, ch, h, w}, bf, rng);
    Tensor cols = Tensor::empty({batch * ho * wo, ch * 9}, bf, gpu()), dx = Tensor::empty(x.shape(), bf, gpu());
    const std::string shape = fmt::format("[{}, {}, {}, {}] 3x3/2/1", batch, ch, h, w);
    const double bytes = 2.0 * static_cast<double>(x.numel() + cols.numel());
    memory_row("im2col_2d", shape, bytes, [&] { ops::im2col_2d(x, 3, 3, 2, 1, cols); });
    memory_row("col2im_2d", shape, bytes, [&] { ops::col2im_2d(cols, 3, 3, 2, 1, dx); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> wanted(argv + 1, argv + argc);
  const auto verbose = std::find(wanted.begin(), wanted.end(), "-v");
  if (verbose != wanted.end()) {
    spdlog::set_level(spdlog::level::debug);
    wanted.erase(verbose);
  }
  auto selected = [&](const char* section) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), section) != wanted.end();
  };
  if (cuda_rt::device_count() == 0) {
    fmt::print(stderr, "bench_kernels_cuda: no CUDA device\n");
    return 1;
  }
  cuda_rt::initialize(0);
  cudaDeviceProp prop{};
  VEOMNI_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  fmt::print("CUDA kernels on {}\n", prop.name);
  std::mt19937 rng(2024);
  if (selected("gemm")) {
    bench_plain_gemms(rng);
    bench_expert_gemms(rng);
  }
  if (selected("lora")) bench_lora_gemms(rng);
  if (selected("memory")) bench_memory(rng);
  if (selected("encoder")) bench_encoder(rng);
  if (selected("decode")) {
    bench_decode(rng);
    bench_skinny(rng);
  }
  if (selected("moe")) bench_moe_decode(rng);
  const cuda_rt::MemoryStats stats = cuda_rt::memory_stats();
  fmt::print("\npeak allocated {:.2f} GiB, reserved {:.2f} GiB, cudaMalloc calls {}\n",
             static_cast<double>(stats.peak_allocated) / (1 << 30), static_cast<double>(stats.peak_reserved) / (1 << 30),
             stats.device_mallocs);
  return 0;
}
#else
#include <cstdio>

int main() {
  std::fprintf(stderr, "bench_kernels_cuda: this build has no CUDA backend (configure with -DVEOMNI_CUDA=ON)\n");
  return 1;
}
#endif
