// The op API's front door: checks every call's shapes, dtypes and devices, then runs the backend of the tensors'
// device. The CPU backend (kernels/cpu/ops_cpu.h) is always built; the CUDA backend joins by providing
// kernels/cuda/ops_cuda.h. Both declare the ops of kernels/op_list.h and kernels/decode_op_list.h, so an op here
// is defined against the one signature its backends share.
#include "kernels/ops.h"
#include "kernels/decode_ops.h"

#include <spdlog/fmt/ranges.h>

#include <climits>
#include <cmath>
#include <numeric>
#include <string>

#include "kernels/cpu/gpu_order_sums.h"
#include "kernels/cpu/ops_cpu.h"
#include "kernels/op_profiler.h"

#if defined(VEOMNI_WITH_CUDA) && __has_include("kernels/cuda/ops_cuda.h")
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/decode_layers_clustered.h"
#include "kernels/cuda/ops_cuda.h"
#define VEOMNI_HAVE_CUDA_OPS 1
#endif

namespace veomni::ops {
namespace {

// Stands in for the CUDA backend in builds without it.
template <typename Result>
[[noreturn]] Result no_cuda_backend(const char* op, Device device) {
  throw Error(
      fmt::format("ops::{}: tensors are on {} but this build has no CUDA kernels (configure with "
                  "-DVEOMNI_CUDA=ON on a machine with nvcc)",
                  op, device.str()));
}

}  // namespace

// Runs backend::op(args...) for the device the call's tensors live on.
#ifdef VEOMNI_HAVE_CUDA_OPS
#define VEOMNI_BACKEND(op, device, ...) ((device).is_cuda() ? cuda::op(__VA_ARGS__) : cpu::op(__VA_ARGS__))
#else
#define VEOMNI_BACKEND(op, device, ...) \
  ((device).is_cuda() ? no_cuda_backend<decltype(cpu::op(__VA_ARGS__))>(#op, device) : cpu::op(__VA_ARGS__))
#endif

// The backend call, timed under `key_expr` (an OpKey, built only when VEOMNI_PROFILE_OPS is on).
#define VEOMNI_ROUTE_KEYED(key_expr, op, device, ...)                       \
  ::veomni::op_profile_timed(                                              \
      device, [&]() -> OpKey { return key_expr; },                          \
      [&]() -> decltype(auto) { return VEOMNI_BACKEND(op, device, __VA_ARGS__); })
// The backend call, timed under the op's name.
#define VEOMNI_ROUTE(fn, device, ...) VEOMNI_ROUTE_KEYED(OpKey{.op = #fn}, fn, device, __VA_ARGS__)

namespace {

// The checks of one call. Each failure throws veomni::Error naming the op and the argument.
class Call {
 public:
  Call(const char* op, const Tensor& first) : op_(op), device_(first.device()) {}

  Device device() const { return device_; }

  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("ops::{}: {}", op_, what)); }

  // Formats the message only when the check fails: these checks run on every op call.
  template <typename... Args>
  void require(bool condition, fmt::format_string<Args...> format, Args&&... args) const {
    if (!condition) fail(fmt::format(format, std::forward<Args>(args)...));
  }

  // Defined, on the call's device, of rank `ndim`.
  void rank(const Tensor& t, const char* name, int ndim) const {
    if (!t.defined()) fail(fmt::format("{} is undefined", name));
    if (t.device() != device_)
      fail(fmt::format("{} is on {} but the call's first tensor is on {}", name, t.device().str(), device_.str()));
    if (t.ndim() != ndim) fail(fmt::format("{} is {}, expected {} dimensions", name, t.describe(), ndim));
  }

  // An activation or weight: f32 on the CPU (the reference); f32 or bf16 on CUDA.
  void floats(const Tensor& t, const char* name, const Shape& shape) const {
    typed(t, name, shape, t.dtype() == DType::F32 || (device_.is_cuda() && t.dtype() == DType::BF16),
          device_.is_cuda() ? "f32 or bf16" : "f32");
  }
  // Always f32 (statistics saved for backward, rope tables, router probabilities, optimizer state).
  void f32(const Tensor& t, const char* name, const Shape& shape) const {
    typed(t, name, shape, t.dtype() == DType::F32, "f32");
  }
  void index(const Tensor& t, const char* name, DType dtype, const Shape& shape) const {
    typed(t, name, shape, t.dtype() == dtype, dtype_name(dtype));
  }

  // An output must not share memory with an input (the kernels read inputs after writing outputs).
  void disjoint(const Tensor& out, const char* out_name, const Tensor& in, const char* in_name) const {
    if (!out.defined() || !in.defined() || out.numel() == 0 || in.numel() == 0) return;
    const char* o = static_cast<const char*>(out.raw_data());
    const char* i = static_cast<const char*>(in.raw_data());
    if (o < i + in.nbytes() && i < o + out.nbytes()) fail(fmt::format("{} overlaps {} in memory", out_name, in_name));
  }

 private:
  void typed(const Tensor& t, const char* name, const Shape& shape, bool dtype_ok, const char* expected) const {
    rank(t, name, static_cast<int>(shape.size()));
    if (!dtype_ok) fail(fmt::format("{} is {}, expected {}", name, t.describe(), expected));
    if (t.shape() != shape) fail(fmt::format("{} is {}, expected shape {}", name, t.describe(), shape_str(shape)));
  }

  const char* op_;
  Device device_;
};

// Group sizes of a grouped GEMM: one per group, none negative, summing to the rows.
void check_groups(const Call& c, const std::vector<int64_t>& sizes, int64_t groups, int64_t rows) {
  c.require(static_cast<int64_t>(sizes.size()) == groups, "{} group sizes for {} groups", sizes.size(), groups);
  for (int64_t s : sizes) c.require(s >= 0, "negative group size in [{}]", fmt::join(sizes, ", "));
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  c.require(total == rows, "group sizes sum to {} but there are {} rows", total, rows);
}

// cu_seqlens: cu[0] = 0, non-decreasing, cu[B] = S.
void check_cu_seqlens(const Call& c, const std::vector<int32_t>& cu, int64_t tokens) {
  c.require(!cu.empty() && cu.front() == 0 && cu.back() == tokens,
            "cu_seqlens must run from 0 to {} (the tokens), got [{}]", tokens, fmt::join(cu, ", "));
  for (size_t b = 0; b + 1 < cu.size(); ++b)
    c.require(cu[b] <= cu[b + 1], "cu_seqlens decreases at {}: [{}]", b, fmt::join(cu, ", "));
}

// Shapes of attention's q, k, v: [S, Hq, D] and [S, Hkv, D] with Hq a multiple of Hkv.
void check_qkv(const Call& c, const Tensor& q, const Tensor& k, const Tensor& v) {
  c.rank(q, "q", 3);
  c.rank(k, "k", 3);
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  c.floats(q, "q", {s, hq, d});
  c.floats(k, "k", {s, hkv, d});
  c.floats(v, "v", {s, hkv, d});
  c.require(hkv > 0 && hq % hkv == 0, "{} query heads are not a multiple of {} kv heads", hq, hkv);
}

// Profiler keys of the ops worth splitting by shape: GEMMs by (m, n, k) and transposes, attention by its heads.
OpKey matmul_key(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  static constexpr const char* kNames[2][2] = {{"matmul NN", "matmul NT"}, {"matmul TN", "matmul TT"}};
  return {kNames[trans_a][trans_b], {m, n, k, 0}, 3, 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                                                         static_cast<double>(k), 0.0};
}

OpKey grouped_key(const char* op, int64_t rows, int64_t n, int64_t k, int64_t groups) {
  return {op, {rows, n, k, groups}, 4, 2.0 * static_cast<double>(rows) * static_cast<double>(n) *
                                           static_cast<double>(k), 0.0};
}

// Forward FLOPs 4 * (query, key) pairs * Hq * D (causal pairs only); the backward counts 2.5x that (five GEMMs to two).
OpKey attention_key(const char* op, double flops_per_pair, const Tensor& q, const Tensor& k,
                    const std::vector<int32_t>& cu_seqlens, bool causal) {
  double pairs = 0.0;
  for (size_t b = 0; b + 1 < cu_seqlens.size(); ++b) {
    const double len = cu_seqlens[b + 1] - cu_seqlens[b];
    pairs += causal ? len * (len + 1) / 2 : len * len;
  }
  return {op, {q.dim(0), q.dim(1), k.dim(1), q.dim(2)}, 4,
          flops_per_pair * pairs * static_cast<double>(q.dim(1)) * static_cast<double>(q.dim(2)), 0.0};
}

}  // namespace

// ---------------------------------------------------------------- GEMM

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, float alpha, float beta,
            const Tensor& addend) {
  const Call c("matmul", a);
  c.rank(a, "a", 2);
  c.rank(b, "b", 2);
  const int64_t m = a.dim(trans_a ? 1 : 0), k = a.dim(trans_a ? 0 : 1);
  const int64_t kb = b.dim(trans_b ? 1 : 0), n = b.dim(trans_b ? 0 : 1);
  if (k != kb)
    c.fail(fmt::format("inner dimensions differ: op(a) is [{}, {}], op(b) is [{}, {}] (a {}, b {})", m, k, kb, n,
                       a.describe(), b.describe()));
  c.floats(a, "a", a.shape());
  c.floats(b, "b", b.shape());
  c.floats(out, "out", {m, n});
  c.disjoint(out, "out", a, "a");
  c.disjoint(out, "out", b, "b");
  if (addend.defined()) {
    c.floats(addend, "addend", {m, n});
    c.require(addend.dtype() == out.dtype(), "addend is {}, out {}: they must share a dtype",
              dtype_name(addend.dtype()), dtype_name(out.dtype()));
    c.require(beta != 0.0f, "an addend with beta 0 would be ignored");
    c.disjoint(out, "out", addend, "addend");
  }
  VEOMNI_ROUTE_KEYED(matmul_key(trans_a, trans_b, m, n, k), matmul, c.device(), a, trans_a, b, trans_b, out, alpha,
                     beta, addend);
}

void grouped_matmul(const Tensor& x, const Tensor& w, bool trans_w, const std::vector<int64_t>& group_sizes,
                    Tensor& out) {
  const Call c("grouped_matmul", x);
  c.rank(x, "x", 2);
  c.rank(w, "w", 3);
  const int64_t t = x.dim(0), k = x.dim(1), g = w.dim(0), n = w.dim(trans_w ? 1 : 2);
  c.floats(x, "x", {t, k});
  c.floats(w, "w", trans_w ? Shape{g, n, k} : Shape{g, k, n});
  c.floats(out, "out", {t, n});
  check_groups(c, group_sizes, g, t);
  c.disjoint(out, "out", x, "x");
  c.disjoint(out, "out", w, "w");
  VEOMNI_ROUTE_KEYED(grouped_key(trans_w ? "grouped_matmul NT" : "grouped_matmul NN", t, n, k, g), grouped_matmul,
                     c.device(), x, w, trans_w, group_sizes, out);
}

void grouped_matmul_weight_grad(const Tensor& dy, const Tensor& x, const std::vector<int64_t>& group_sizes, Tensor& dw,
                                bool accumulate) {
  const Call c("grouped_matmul_weight_grad", dy);
  c.rank(dy, "dy", 2);
  c.rank(x, "x", 2);
  c.rank(dw, "dw", 3);
  const int64_t t = dy.dim(0), n = dy.dim(1), k = x.dim(1), g = dw.dim(0);
  c.floats(dy, "dy", {t, n});
  c.floats(x, "x", {t, k});
  c.floats(dw, "dw", {g, n, k});
  check_groups(c, group_sizes, g, t);
  c.disjoint(dw, "dw", dy, "dy");
  c.disjoint(dw, "dw", x, "x");
  VEOMNI_ROUTE_KEYED(grouped_key("grouped_matmul_weight_grad", t, n, k, g), grouped_matmul_weight_grad, c.device(), dy,
                     x, group_sizes, dw, accumulate);
}

// ---------------------------------------------------------------- normalisation

void rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps, Tensor& y, Tensor& rstd) {
  const Call c("rmsnorm_forward", x);
  c.rank(x, "x", 2);
  const int64_t n = x.dim(0), d = x.dim(1);
  c.floats(x, "x", {n, d});
  c.floats(weight, "weight", {d});
  c.floats(y, "y", {n, d});
  c.f32(rstd, "rstd", {n});
  c.require(eps >= 0.0f, "eps {} is negative", eps);
  c.disjoint(y, "y", x, "x");
  c.disjoint(rstd, "rstd", x, "x");
  VEOMNI_ROUTE(rmsnorm_forward, c.device(), x, weight, eps, y, rstd);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, Tensor& dx,
                      Tensor& dweight, const Tensor& residual) {
  const Call c("rmsnorm_backward", dy);
  c.rank(x, "x", 2);
  const int64_t n = x.dim(0), d = x.dim(1);
  c.floats(dy, "dy", {n, d});
  c.floats(x, "x", {n, d});
  c.floats(weight, "weight", {d});
  c.f32(rstd, "rstd", {n});
  c.floats(dx, "dx", {n, d});
  c.disjoint(dx, "dx", dy, "dy");
  c.disjoint(dx, "dx", x, "x");
  // An undefined dweight: a frozen weight, dx only (the backends skip the column sums).
  if (dweight.defined()) {
    c.floats(dweight, "dweight", {d});
    c.disjoint(dweight, "dweight", dy, "dy");
    c.disjoint(dweight, "dweight", x, "x");
  }
  if (residual.defined()) {
    c.floats(residual, "residual", {n, d});
    c.require(residual.dtype() == dx.dtype(), "residual is {}, dx {}: they must share a dtype",
              dtype_name(residual.dtype()), dtype_name(dx.dtype()));
    c.disjoint(dx, "dx", residual, "residual");
  }
  VEOMNI_ROUTE(rmsnorm_backward, c.device(), dy, x, weight, rstd, dx, dweight, residual);
}

// ---------------------------------------------------------------- rotary position embedding

void rope_tables(const Tensor& positions, int64_t head_dim, double theta, const std::vector<int64_t>& mrope_section,
                 Tensor& cos, Tensor& sin) {
  const Call c("rope_tables", positions);
  if (!(positions.defined() && (positions.ndim() == 1 || (positions.ndim() == 2 && positions.dim(0) == 3))))
    c.fail(fmt::format("positions are {}, expected [S] or [3, S]", positions.describe()));
  if (!(positions.dtype() == DType::I64 || positions.dtype() == DType::F32))
    c.fail(fmt::format("positions are {}, expected i64 or f32", positions.describe()));
  c.require(head_dim > 0 && head_dim % 2 == 0, "head_dim {} must be positive and even", head_dim);
  c.require(theta > 0.0 && std::isfinite(theta), "rope theta {} must be positive", theta);
  // [S] positions ignore mrope_section: with one stream every frequency reads it (text-only M-RoPE is 1-D RoPE).
  if (positions.ndim() == 2) {
    c.require(mrope_section.size() == 3, "[3, S] positions need a 3-entry mrope_section, got [{}]",
              fmt::join(mrope_section, ", "));
    for (int64_t s : mrope_section)
      c.require(s >= 0, "negative entry in mrope_section [{}]", fmt::join(mrope_section, ", "));
  }
  const int64_t s = positions.dim(-1);
  c.f32(cos, "cos", {s, head_dim});
  c.f32(sin, "sin", {s, head_dim});
  c.disjoint(sin, "sin", cos, "cos");
  VEOMNI_ROUTE(rope_tables, c.device(), positions, head_dim, theta, mrope_section, cos, sin);
}

void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const Call c("rope_apply", x);
  c.rank(x, "x", 3);
  const int64_t s = x.dim(0), d = x.dim(2);
  c.floats(x, "x", x.shape());
  if (d % 2 != 0) c.fail(fmt::format("head_dim {} of x {} is odd", d, x.describe()));
  c.f32(cos, "cos", {s, d});
  c.f32(sin, "sin", {s, d});
  c.disjoint(x, "x", cos, "cos");
  c.disjoint(x, "x", sin, "sin");
  VEOMNI_ROUTE(rope_apply, c.device(), x, cos, sin, inverse);
}

namespace {

// The head layout of the packed q/k/v ops: hq and hkv from q [S, Hq, D] and k [S, Hkv, D] (or their gradients), with
// qkv [S, (Hq + 2 Hkv) D] of their dtype, the norms' gains [D] and the f32 tables [S, D]. CUDA holds a head in its
// warp's registers: D of 32 to 512, a power of two.
void check_packed_heads(const Call& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                        const Tensor& q_norm, const Tensor& k_norm, const Tensor& cos, const Tensor& sin) {
  check_qkv(c, q, k, v);
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  c.floats(qkv, "qkv", {s, (hq + 2 * hkv) * d});
  c.require(q.dtype() == qkv.dtype() && k.dtype() == qkv.dtype() && v.dtype() == qkv.dtype(),
            "q {}, k {} and v {} must have the dtype of qkv {}", q.describe(), k.describe(), v.describe(),
            qkv.describe());
  c.floats(q_norm, "q_norm", {d});
  c.floats(k_norm, "k_norm", {d});
  c.require(q_norm.dtype() == k_norm.dtype(), "q_norm is {} but k_norm {}", q_norm.describe(), k_norm.describe());
  c.require(d % 2 == 0, "head_dim {} is odd", d);
  c.require(c.device().is_cpu() || (d >= 32 && d <= 512 && (d & (d - 1)) == 0),
            "head_dim {} on CUDA: the kernels take 32, 64, 128, 256 or 512", d);
  c.f32(cos, "cos", {s, d});
  c.f32(sin, "sin", {s, d});
}

}  // namespace

void qkv_norm_rope_forward(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
                           const Tensor& sin, Tensor& q, Tensor& k, Tensor& v, Tensor& q_rstd, Tensor& k_rstd) {
  const Call c("qkv_norm_rope_forward", qkv);
  check_packed_heads(c, q, k, v, qkv, q_norm, k_norm, cos, sin);
  c.require(eps >= 0.0f, "eps {} is negative", eps);
  c.f32(q_rstd, "q_rstd", {q.dim(0) * q.dim(1)});
  c.f32(k_rstd, "k_rstd", {k.dim(0) * k.dim(1)});
  const std::initializer_list<std::pair<const Tensor*, const char*>> outs = {
      {&q, "q"}, {&k, "k"}, {&v, "v"}, {&q_rstd, "q_rstd"}, {&k_rstd, "k_rstd"}};
  for (const auto& [out, name] : outs) c.disjoint(*out, name, qkv, "qkv");
  VEOMNI_ROUTE(qkv_norm_rope_forward, c.device(), qkv, q_norm, k_norm, eps, cos, sin, q, k, v, q_rstd, k_rstd);
}

void qkv_norm_rope_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& qkv,
                            const Tensor& q_norm, const Tensor& k_norm, const Tensor& q_rstd, const Tensor& k_rstd,
                            const Tensor& cos, const Tensor& sin, Tensor& dqkv) {
  const Call c("qkv_norm_rope_backward", dq);
  check_packed_heads(c, dq, dk, dv, qkv, q_norm, k_norm, cos, sin);
  c.floats(dqkv, "dqkv", qkv.shape());
  c.require(dqkv.dtype() == qkv.dtype(), "dqkv is {} but qkv {}", dqkv.describe(), qkv.describe());
  c.f32(q_rstd, "q_rstd", {dq.dim(0) * dq.dim(1)});
  c.f32(k_rstd, "k_rstd", {dk.dim(0) * dk.dim(1)});
  const std::initializer_list<std::pair<const Tensor*, const char*>> ins = {
      {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}, {&qkv, "qkv"}};
  for (const auto& [in, name] : ins) c.disjoint(dqkv, "dqkv", *in, name);
  VEOMNI_ROUTE(qkv_norm_rope_backward, c.device(), dq, dk, dv, qkv, q_norm, k_norm, q_rstd, k_rstd, cos, sin, dqkv);
}

// ---------------------------------------------------------------- SwiGLU

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const Call c("swiglu_forward", gate);
  c.rank(gate, "gate", 2);
  c.floats(gate, "gate", gate.shape());
  c.floats(up, "up", gate.shape());
  c.floats(out, "out", gate.shape());
  c.disjoint(out, "out", gate, "gate");
  c.disjoint(out, "out", up, "up");
  VEOMNI_ROUTE(swiglu_forward, c.device(), gate, up, out);
}

void swiglu_backward(const Tensor& dout, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const Call c("swiglu_backward", dout);
  c.rank(gate, "gate", 2);
  const Shape& shape = gate.shape();
  c.floats(dout, "dout", shape);
  c.floats(gate, "gate", shape);
  c.floats(up, "up", shape);
  c.floats(dgate, "dgate", shape);
  c.floats(dup, "dup", shape);
  for (const Tensor* out : {&dgate, &dup}) {
    const char* name = out == &dgate ? "dgate" : "dup";
    c.disjoint(*out, name, dout, "dout");
    c.disjoint(*out, name, gate, "gate");
    c.disjoint(*out, name, up, "up");
  }
  c.disjoint(dgate, "dgate", dup, "dup");
  VEOMNI_ROUTE(swiglu_backward, c.device(), dout, gate, up, dgate, dup);
}

void swiglu_fused_forward(const Tensor& gate_up, Tensor& out) {
  const Call c("swiglu_fused_forward", gate_up);
  c.rank(gate_up, "gate_up", 2);
  const int64_t n = gate_up.dim(0), two_i = gate_up.dim(1);
  if (two_i % 2 != 0) c.fail(fmt::format("gate_up {} has an odd number of columns", gate_up.describe()));
  c.floats(gate_up, "gate_up", {n, two_i});
  c.floats(out, "out", {n, two_i / 2});
  c.disjoint(out, "out", gate_up, "gate_up");
  VEOMNI_ROUTE(swiglu_fused_forward, c.device(), gate_up, out);
}

void swiglu_fused_backward(const Tensor& dout, const Tensor& gate_up, Tensor& dgate_up) {
  const Call c("swiglu_fused_backward", dout);
  c.rank(dout, "dout", 2);
  const int64_t n = dout.dim(0), i = dout.dim(1);
  c.floats(dout, "dout", {n, i});
  c.floats(gate_up, "gate_up", {n, 2 * i});
  c.floats(dgate_up, "dgate_up", {n, 2 * i});
  c.disjoint(dgate_up, "dgate_up", dout, "dout");
  c.disjoint(dgate_up, "dgate_up", gate_up, "gate_up");
  VEOMNI_ROUTE(swiglu_fused_backward, c.device(), dout, gate_up, dgate_up);
}

// ---------------------------------------------------------------- attention

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu_seqlens,
                       bool causal, float scale, Tensor& out, Tensor& lse) {
  const Call c("attention_forward", q);
  check_qkv(c, q, k, v);
  check_cu_seqlens(c, cu_seqlens, q.dim(0));
  c.require(std::isfinite(scale), "scale {} is not finite", scale);
  c.floats(out, "out", q.shape());
  c.f32(lse, "lse", {q.dim(1), q.dim(0)});
  for (const Tensor* in : {&q, &k, &v}) {
    const char* name = in == &q ? "q" : in == &k ? "k" : "v";
    c.disjoint(out, "out", *in, name);
    c.disjoint(lse, "lse", *in, name);
  }
  VEOMNI_ROUTE_KEYED(attention_key("attention_forward", 4.0, q, k, cu_seqlens, causal), attention_forward, c.device(),
                     q, k, v, cu_seqlens, causal, scale, out, lse);
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const std::vector<int32_t>& cu_seqlens, bool causal, float scale, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  const Call c("attention_backward", dout);
  check_qkv(c, q, k, v);
  check_cu_seqlens(c, cu_seqlens, q.dim(0));
  c.require(std::isfinite(scale), "scale {} is not finite", scale);
  c.floats(dout, "dout", q.shape());
  c.floats(out, "out", q.shape());
  c.f32(lse, "lse", {q.dim(1), q.dim(0)});
  c.floats(dq, "dq", q.shape());
  c.floats(dk, "dk", k.shape());
  c.floats(dv, "dv", v.shape());
  const std::pair<const Tensor*, const char*> inputs[] = {{&dout, "dout"}, {&q, "q"},     {&k, "k"},
                                                          {&v, "v"},       {&out, "out"}, {&lse, "lse"}};
  const std::pair<const Tensor*, const char*> outputs[] = {{&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  for (const auto& [o, oname] : outputs) {
    for (const auto& [i, iname] : inputs) c.disjoint(*o, oname, *i, iname);
    for (const auto& [o2, o2name] : outputs)
      if (o2 != o) c.disjoint(*o, oname, *o2, o2name);
  }
  VEOMNI_ROUTE_KEYED(attention_key("attention_backward", 10.0, q, k, cu_seqlens, causal), attention_backward,
                     c.device(), dout, q, k, v, out, lse, cu_seqlens, causal, scale, dq, dk, dv);
}

// ---------------------------------------------------------------- loss

void cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index, float grad_scale, Tensor& losses,
                   Tensor& dlogits) {
  const Call c("cross_entropy", logits);
  c.rank(logits, "logits", 2);
  const int64_t n = logits.dim(0), v = logits.dim(1);
  if (v <= 0) c.fail(fmt::format("logits {} have no classes", logits.describe()));
  c.floats(logits, "logits", {n, v});
  c.index(labels, "labels", DType::I64, {n});
  c.f32(losses, "losses", {n});
  c.disjoint(losses, "losses", logits, "logits");
  if (dlogits.defined()) {
    c.floats(dlogits, "dlogits", {n, v});
    c.disjoint(dlogits, "dlogits", losses, "losses");
    // In place (the same memory, the same dtype) is allowed, any other overlap is not.
    if (dlogits.raw_data() == logits.raw_data())
      c.require(dlogits.dtype() == logits.dtype(), "dlogits written over the logits must share their dtype");
    else
      c.disjoint(dlogits, "dlogits", logits, "logits");
  }
  VEOMNI_ROUTE(cross_entropy, c.device(), logits, labels, ignore_index, grad_scale, losses, dlogits);
}

namespace {

// The logits and labels of the label log-prob ops: logits [N, V] with V > 0, labels i64 [N].
void check_logits_and_labels(const Call& c, const Tensor& logits, const Tensor& labels) {
  c.rank(logits, "logits", 2);
  if (logits.dim(1) <= 0) c.fail(fmt::format("logits {} have no classes", logits.describe()));
  c.floats(logits, "logits", logits.shape());
  c.index(labels, "labels", DType::I64, {logits.dim(0)});
}

}  // namespace

void token_logprobs(const Tensor& logits, const Tensor& labels, int64_t ignore_index, Tensor& logprobs,
                    Tensor& entropy) {
  const Call c("token_logprobs", logits);
  check_logits_and_labels(c, logits, labels);
  const int64_t n = logits.dim(0);
  c.f32(logprobs, "logprobs", {n});
  c.disjoint(logprobs, "logprobs", logits, "logits");
  if (entropy.defined()) {
    c.f32(entropy, "entropy", {n});
    c.disjoint(entropy, "entropy", logits, "logits");
    c.disjoint(entropy, "entropy", logprobs, "logprobs");
  }
  VEOMNI_ROUTE(token_logprobs, c.device(), logits, labels, ignore_index, logprobs, entropy);
}

void token_logprobs_backward(const Tensor& logits, const Tensor& labels, int64_t ignore_index, const Tensor& dlogprobs,
                             const Tensor& dentropy, Tensor& dlogits) {
  const Call c("token_logprobs_backward", logits);
  check_logits_and_labels(c, logits, labels);
  const int64_t n = logits.dim(0);
  c.f32(dlogprobs, "dlogprobs", {n});
  if (dentropy.defined()) c.f32(dentropy, "dentropy", {n});
  c.floats(dlogits, "dlogits", logits.shape());
  c.disjoint(dlogits, "dlogits", dlogprobs, "dlogprobs");
  c.disjoint(dlogits, "dlogits", dentropy, "dentropy");
  // In place (the same memory, the same dtype) is allowed, any other overlap is not.
  if (dlogits.raw_data() == logits.raw_data())
    c.require(dlogits.dtype() == logits.dtype(), "dlogits written over the logits must share their dtype");
  else
    c.disjoint(dlogits, "dlogits", logits, "logits");
  VEOMNI_ROUTE(token_logprobs_backward, c.device(), logits, labels, ignore_index, dlogprobs, dentropy, dlogits);
}

// ---------------------------------------------------------------- embedding

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  const Call c("embedding_forward", ids);
  c.rank(ids, "ids", 1);
  c.rank(table, "table", 2);
  c.index(ids, "ids", DType::I64, ids.shape());
  c.floats(table, "table", table.shape());
  c.floats(out, "out", {ids.dim(0), table.dim(1)});
  c.disjoint(out, "out", table, "table");
  VEOMNI_ROUTE(embedding_forward, c.device(), ids, table, out);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  const Call c("embedding_backward", ids);
  c.rank(ids, "ids", 1);
  c.rank(dtable, "dtable", 2);
  c.index(ids, "ids", DType::I64, ids.shape());
  c.floats(dout, "dout", {ids.dim(0), dtable.dim(1)});
  c.floats(dtable, "dtable", dtable.shape());
  c.disjoint(dtable, "dtable", dout, "dout");
  VEOMNI_ROUTE(embedding_backward, c.device(), ids, dout, dtable);
}

// ---------------------------------------------------------------- mixture of experts

void moe_route(const Tensor& router_logits, int64_t k, bool norm_topk_prob, Tensor& probs, Tensor& topk_idx,
               Tensor& topk_weight) {
  const Call c("moe_route", router_logits);
  c.rank(router_logits, "router_logits", 2);
  const int64_t n = router_logits.dim(0), e = router_logits.dim(1);
  c.require(k >= 1 && k <= e, "top-k {} must lie in [1, {}] (the experts)", k, e);
  c.floats(router_logits, "router_logits", {n, e});
  c.f32(probs, "probs", {n, e});
  c.index(topk_idx, "topk_idx", DType::I32, {n, k});
  c.f32(topk_weight, "topk_weight", {n, k});
  c.disjoint(probs, "probs", router_logits, "router_logits");
  c.disjoint(topk_weight, "topk_weight", probs, "probs");
  VEOMNI_ROUTE(moe_route, c.device(), router_logits, k, norm_topk_prob, probs, topk_idx, topk_weight);
}

void moe_route_backward(const Tensor& dtopk_weight, const Tensor& dprobs_extra, const Tensor& probs,
                        const Tensor& topk_idx, bool norm_topk_prob, Tensor& dlogits) {
  const Call c("moe_route_backward", probs);
  c.rank(probs, "probs", 2);
  c.rank(topk_idx, "topk_idx", 2);
  const int64_t n = probs.dim(0), e = probs.dim(1), k = topk_idx.dim(1);
  c.f32(probs, "probs", {n, e});
  c.index(topk_idx, "topk_idx", DType::I32, {n, k});
  c.f32(dtopk_weight, "dtopk_weight", {n, k});
  if (dprobs_extra.defined()) c.f32(dprobs_extra, "dprobs_extra", {n, e});
  c.floats(dlogits, "dlogits", {n, e});
  c.disjoint(dlogits, "dlogits", probs, "probs");
  c.disjoint(dlogits, "dlogits", dtopk_weight, "dtopk_weight");
  c.disjoint(dlogits, "dlogits", dprobs_extra, "dprobs_extra");
  VEOMNI_ROUTE(moe_route_backward, c.device(), dtopk_weight, dprobs_extra, probs, topk_idx, norm_topk_prob, dlogits);
}

void moe_router_stats(const Tensor& probs, const Tensor& topk_idx, int64_t rows, Tensor& stats) {
  const Call c("moe_router_stats", probs);
  c.rank(probs, "probs", 2);
  c.rank(topk_idx, "topk_idx", 2);
  const int64_t n = probs.dim(0), e = probs.dim(1), k = topk_idx.dim(1);
  c.require(rows >= 0 && rows <= n, "rows {} outside [0, {}]", rows, n);
  c.require(rows * k < (int64_t{1} << 24), "{} routed pairs are past f32's exact counts", rows * k);
  c.f32(probs, "probs", {n, e});
  c.index(topk_idx, "topk_idx", DType::I32, {n, k});
  c.f32(stats, "stats", {2, e});
  c.disjoint(stats, "stats", probs, "probs");
  VEOMNI_ROUTE(moe_router_stats, c.device(), probs, topk_idx, rows, stats);
}

void moe_aux_dprobs(const Tensor& dprob, int64_t rows, Tensor& dprobs) {
  const Call c("moe_aux_dprobs", dprobs);
  c.rank(dprobs, "dprobs", 2);
  const int64_t n = dprobs.dim(0), e = dprobs.dim(1);
  c.require(rows >= 0 && rows <= n, "rows {} outside [0, {}]", rows, n);
  c.f32(dprob, "dprob", {e});
  c.f32(dprobs, "dprobs", {n, e});
  c.disjoint(dprobs, "dprobs", dprob, "dprob");
  VEOMNI_ROUTE(moe_aux_dprobs, c.device(), dprob, rows, dprobs);
}

void moe_permute(const Tensor& x, const Tensor& topk_idx, int64_t num_experts, Tensor& permuted, Tensor& row_map,
                 std::vector<int64_t>& expert_counts) {
  const Call c("moe_permute", x);
  c.rank(x, "x", 2);
  c.rank(topk_idx, "topk_idx", 2);
  const int64_t n = x.dim(0), h = x.dim(1), k = topk_idx.dim(1);
  c.require(num_experts >= 1, "num_experts {} must be positive", num_experts);
  c.require(n * k <= INT32_MAX, "{} routed rows overflow the i32 row_map", n * k);
  c.floats(x, "x", {n, h});
  c.index(topk_idx, "topk_idx", DType::I32, {n, k});
  c.floats(permuted, "permuted", {n * k, h});
  c.index(row_map, "row_map", DType::I32, {n * k});
  c.disjoint(permuted, "permuted", x, "x");
  VEOMNI_ROUTE(moe_permute, c.device(), x, topk_idx, num_experts, permuted, row_map, expert_counts);
}

void moe_permute_backward(const Tensor& dpermuted, const Tensor& row_map, int64_t k, Tensor& dx) {
  const Call c("moe_permute_backward", dpermuted);
  c.rank(dx, "dx", 2);
  const int64_t n = dx.dim(0), h = dx.dim(1);
  c.require(k >= 1, "k {} must be positive", k);
  c.floats(dpermuted, "dpermuted", {n * k, h});
  c.index(row_map, "row_map", DType::I32, {n * k});
  c.floats(dx, "dx", {n, h});
  c.disjoint(dx, "dx", dpermuted, "dpermuted");
  VEOMNI_ROUTE(moe_permute_backward, c.device(), dpermuted, row_map, k, dx);
}

void moe_unpermute(const Tensor& y, const Tensor& row_map, const Tensor& topk_weight, Tensor& out) {
  const Call c("moe_unpermute", y);
  c.rank(topk_weight, "topk_weight", 2);
  c.rank(y, "y", 2);
  const int64_t n = topk_weight.dim(0), k = topk_weight.dim(1), h = y.dim(1);
  c.floats(topk_weight, "topk_weight", {n, k});
  c.floats(y, "y", {n * k, h});
  c.index(row_map, "row_map", DType::I32, {n * k});
  c.floats(out, "out", {n, h});
  c.disjoint(out, "out", y, "y");
  VEOMNI_ROUTE(moe_unpermute, c.device(), y, row_map, topk_weight, out);
}

void moe_unpermute_backward(const Tensor& dout, const Tensor& y, const Tensor& row_map, const Tensor& topk_weight,
                            Tensor& dy, Tensor& dtopk_weight) {
  const Call c("moe_unpermute_backward", dout);
  c.rank(topk_weight, "topk_weight", 2);
  c.rank(dout, "dout", 2);
  const int64_t n = topk_weight.dim(0), k = topk_weight.dim(1), h = dout.dim(1);
  c.floats(dout, "dout", {n, h});
  c.floats(y, "y", {n * k, h});
  c.index(row_map, "row_map", DType::I32, {n * k});
  c.floats(topk_weight, "topk_weight", {n, k});
  c.floats(dy, "dy", {n * k, h});
  c.floats(dtopk_weight, "dtopk_weight", {n, k});
  c.disjoint(dy, "dy", dout, "dout");
  c.disjoint(dy, "dy", y, "y");
  c.disjoint(dtopk_weight, "dtopk_weight", dy, "dy");
  VEOMNI_ROUTE(moe_unpermute_backward, c.device(), dout, y, row_map, topk_weight, dy, dtopk_weight);
}

// ---------------------------------------------------------------- optimizer

namespace {

void check_adamw_tensors(const Call& c, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq) {
  c.rank(param, "param", param.ndim());
  const std::pair<const Tensor*, const char*> tensors[] = {
      {&param, "param"}, {&grad, "grad"}, {&exp_avg, "exp_avg"}, {&exp_avg_sq, "exp_avg_sq"}};
  for (const auto& [t, name] : tensors) {
    c.rank(*t, name, t->ndim());
    if (t->dtype() != DType::F32) c.fail(fmt::format("{} is {}, expected f32", name, t->describe()));
    if (t->numel() != param.numel())
      c.fail(fmt::format("{} is {} but param is {}", name, t->describe(), param.describe()));
  }
  c.disjoint(param, "param", grad, "grad");
  c.disjoint(exp_avg, "exp_avg", param, "param");
  c.disjoint(exp_avg_sq, "exp_avg_sq", param, "param");
  c.disjoint(exp_avg_sq, "exp_avg_sq", exp_avg, "exp_avg");
}

// A slot of adamw_step_multi: f32 param and grad, moments f32 or bf16 and an optional bf16/f16 compute copy, the
// dtypes of both the same as the first slot's (one kernel instance per call).
void check_adamw_multi_slot(const Call& c, const AdamWTensors& s, const AdamWTensors& first) {
  const DType moments = first.exp_avg->dtype();
  const std::pair<const Tensor*, const char*> tensors[] = {
      {s.param, "param"}, {s.grad, "grad"}, {s.exp_avg, "exp_avg"}, {s.exp_avg_sq, "exp_avg_sq"}};
  for (const auto& [t, name] : tensors) {
    c.rank(*t, name, t->ndim());
    const bool moment = t == s.exp_avg || t == s.exp_avg_sq;
    const DType expected = moment ? moments : DType::F32;
    if (t->dtype() != expected)
      c.fail(fmt::format("{} is {}, expected {}", name, t->describe(), dtype_name(expected)));
    if (t->numel() != s.param->numel())
      c.fail(fmt::format("{} is {} but param is {}", name, t->describe(), s.param->describe()));
  }
  if (moments != DType::F32 && moments != DType::BF16)
    c.fail(fmt::format("moments are {}: f32 or bf16 expected", dtype_name(moments)));
  c.disjoint(*s.param, "param", *s.grad, "grad");
  c.disjoint(*s.exp_avg, "exp_avg", *s.param, "param");
  c.disjoint(*s.exp_avg_sq, "exp_avg_sq", *s.param, "param");
  c.disjoint(*s.exp_avg_sq, "exp_avg_sq", *s.exp_avg, "exp_avg");
  if ((s.compute == nullptr) != (first.compute == nullptr))
    c.fail("some slots have a compute copy and others none");
  if (!s.compute) return;
  c.rank(*s.compute, "compute", s.compute->ndim());
  if (s.compute->dtype() != first.compute->dtype() ||
      (s.compute->dtype() != DType::BF16 && s.compute->dtype() != DType::F16))
    c.fail(fmt::format("compute copy {}: bf16 or f16 expected, the same in every slot ({} in the first)",
                       s.compute->describe(), first.compute->describe()));
  if (s.compute->numel() != s.param->numel())
    c.fail(fmt::format("compute copy {} but param is {}", s.compute->describe(), s.param->describe()));
  c.disjoint(*s.compute, "compute", *s.param, "param");
}

void check_adamw_hyper(const Call& c, double lr, double beta1, double beta2, double eps, double weight_decay,
                       int64_t step) {
  c.require(lr >= 0.0f && std::isfinite(lr), "invalid learning rate {}", lr);
  c.require(beta1 >= 0.0f && beta1 < 1.0f, "invalid beta1 {} (need 0 <= beta1 < 1)", beta1);
  c.require(beta2 >= 0.0f && beta2 < 1.0f, "invalid beta2 {} (need 0 <= beta2 < 1)", beta2);
  c.require(eps >= 0.0f, "invalid eps {}", eps);
  c.require(weight_decay >= 0.0f, "invalid weight_decay {}", weight_decay);
  c.require(step >= 1, "step {} must be at least 1 (the count after this update)", step);
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
  const Call c("adamw_step", param);
  check_adamw_tensors(c, param, grad, exp_avg, exp_avg_sq);
  check_adamw_hyper(c, lr, beta1, beta2, eps, weight_decay, step);
  VEOMNI_ROUTE(adamw_step, c.device(), param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step);
}

void adamw_step_multi(const std::vector<AdamWTensors>& slots, double lr, double beta1, double beta2, double eps,
                      int64_t step, float grad_scale) {
  if (slots.empty()) return;
  VEOMNI_CHECK(slots.front().param != nullptr, "ops::adamw_step_multi: slot 0 has no param");
  const Call c("adamw_step_multi", *slots.front().param);
  const AdamWTensors& first = slots.front();
  for (const AdamWTensors& s : slots) {
    VEOMNI_CHECK(s.param && s.grad && s.exp_avg && s.exp_avg_sq, "ops::adamw_step_multi: a slot misses a tensor");
    check_adamw_multi_slot(c, s, first);
    check_adamw_hyper(c, lr, beta1, beta2, eps, s.weight_decay, step);
  }
  c.require(std::isfinite(grad_scale) && grad_scale >= 0.0f, "invalid grad_scale {}", grad_scale);
  VEOMNI_ROUTE(adamw_step_multi, c.device(), slots, lr, beta1, beta2, eps, step, grad_scale);
}

// ---------------------------------------------------------------- elementwise and reductions

double sum(const Tensor& x) {
  const Call c("sum", x);
  c.floats(x, "x", x.shape());
  return VEOMNI_ROUTE(sum, c.device(), x);
}

double sum_squares(const Tensor& x) {
  const Call c("sum_squares", x);
  c.floats(x, "x", x.shape());
  return VEOMNI_ROUTE(sum_squares, c.device(), x);
}

double sum_squares_multi(const std::vector<const Tensor*>& xs) {
  if (xs.empty()) return 0.0;
  VEOMNI_CHECK(xs.front() != nullptr, "ops::sum_squares_multi: tensor 0 is null");
  const Call c("sum_squares_multi", *xs.front());
  for (const Tensor* x : xs) {
    VEOMNI_CHECK(x != nullptr, "ops::sum_squares_multi: a tensor is null");
    c.f32(*x, "x", x->shape());
  }
  return VEOMNI_ROUTE(sum_squares_multi, c.device(), xs);
}

double sum_squares_multi_as_on(const std::vector<const Tensor*>& xs, Device order) {
  if (xs.empty() || !order.is_cuda() || !xs.front()->device().is_cpu()) return sum_squares_multi(xs);
  const Call c("sum_squares_multi_as_on", *xs.front());
  for (const Tensor* x : xs) {
    VEOMNI_CHECK(x != nullptr, "ops::sum_squares_multi_as_on: a tensor is null");
    c.f32(*x, "x", x->shape());
  }
  return cpu::sum_squares_multi_gpu_order(xs);
}

void add_(Tensor& dst, const Tensor& src, float alpha) {
  const Call c("add_", dst);
  c.floats(dst, "dst", dst.shape());
  c.floats(src, "src", src.shape());
  if (src.numel() != dst.numel()) c.fail(fmt::format("src {} does not match dst {}", src.describe(), dst.describe()));
  c.disjoint(dst, "dst", src, "src");
  VEOMNI_ROUTE(add_, c.device(), dst, src, alpha);
}

void scale_(Tensor& x, float factor) {
  const Call c("scale_", x);
  c.floats(x, "x", x.shape());
  VEOMNI_ROUTE(scale_, c.device(), x, factor);
}

void fill_(Tensor& x, float value) {
  const Call c("fill_", x);
  c.floats(x, "x", x.shape());
  VEOMNI_ROUTE(fill_, c.device(), x, value);
}

void cast(const Tensor& src, Tensor& dst) {
  const Call c("cast", src);
  c.rank(src, "src", src.ndim());
  c.rank(dst, "dst", dst.ndim());
  for (const Tensor* t : std::initializer_list<const Tensor*>{&src, &dst})
    if (!(t->dtype() == DType::F32 || t->dtype() == DType::BF16 || t->dtype() == DType::F16))
      c.fail(fmt::format("cast handles f32, bf16 and f16, not {}", t->describe()));
  if (src.numel() != dst.numel())
    c.fail(fmt::format("src {} and dst {} differ in size", src.describe(), dst.describe()));
  c.disjoint(dst, "dst", src, "src");
  VEOMNI_ROUTE(cast, c.device(), src, dst);
}

namespace {

constexpr size_t kMaxBlocks = 8;

// The blocks [rows[i], rows[i] + shapes[i][0]) x [columns[i], columns[i] + shapes[i][1]) inside a [R, C] matrix.
void check_blocks(const Call& c, const std::vector<Shape>& shapes, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& columns, const Tensor& matrix, const char* name) {
  c.require(shapes.size() == rows.size() && shapes.size() == columns.size(),
            "{} blocks with {} row and {} column offsets", shapes.size(), rows.size(), columns.size());
  c.require(shapes.size() <= kMaxBlocks, "{} blocks in one call; at most {}", shapes.size(), kMaxBlocks);
  c.rank(matrix, name, 2);
  for (size_t i = 0; i < shapes.size(); ++i) {
    c.require(shapes[i].size() == 2, "block {} is {}-D", i, shapes[i].size());
    c.require(rows[i] >= 0 && columns[i] >= 0 && rows[i] + shapes[i][0] <= matrix.dim(0) &&
                  columns[i] + shapes[i][1] <= matrix.dim(1),
              "block {} of {} at ({}, {}) leaves {} {}", i, shape_str(shapes[i]), rows[i], columns[i], name,
              matrix.describe());
  }
}

}  // namespace

void place_blocks(const std::vector<Tensor>& parts, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& columns, Tensor& out) {
  const Call c("place_blocks", out);
  std::vector<Shape> shapes;
  for (size_t i = 0; i < parts.size(); ++i) {
    c.rank(parts[i], "part", 2);
    c.floats(parts[i], "part", parts[i].shape());
    c.require(parts[i].dtype() == out.dtype(), "part {} is {} but out {}", i, parts[i].describe(), out.describe());
    c.disjoint(out, "out", parts[i], "part");
    shapes.push_back(parts[i].shape());
  }
  check_blocks(c, shapes, rows, columns, out, "out");
  c.floats(out, "out", out.shape());
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t j = i + 1; j < shapes.size(); ++j)
      c.require(rows[i] + shapes[i][0] <= rows[j] || rows[j] + shapes[j][0] <= rows[i] ||
                    columns[i] + shapes[i][1] <= columns[j] || columns[j] + shapes[j][1] <= columns[i],
                "blocks {} and {} overlap", i, j);
  VEOMNI_ROUTE(place_blocks, c.device(), parts, rows, columns, out);
}

void add_blocks(const Tensor& src, const std::vector<int64_t>& rows, const std::vector<int64_t>& columns,
                const std::vector<Tensor*>& dsts) {
  const Call c("add_blocks", src);
  std::vector<Shape> shapes;
  for (const Tensor* dst : dsts) {
    c.rank(*dst, "dst", 2);
    c.f32(*dst, "dst", dst->shape());
    c.disjoint(*dst, "dst", src, "src");
    shapes.push_back(dst->shape());
  }
  check_blocks(c, shapes, rows, columns, src, "src");
  c.f32(src, "src", src.shape());
  VEOMNI_ROUTE(add_blocks, c.device(), src, rows, columns, dsts);
}

void cast_multi(const std::vector<const Tensor*>& src, const std::vector<Tensor*>& dst) {
  VEOMNI_CHECK(src.size() == dst.size(), "ops::cast_multi: {} sources but {} destinations", src.size(), dst.size());
  if (src.empty()) return;
  VEOMNI_CHECK(src.front() != nullptr, "ops::cast_multi: source 0 is null");
  const Call c("cast_multi", *src.front());
  const auto castable = [](DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; };
  for (size_t i = 0; i < src.size(); ++i) {
    VEOMNI_CHECK(src[i] != nullptr && dst[i] != nullptr, "ops::cast_multi: pair {} has a null tensor", i);
    c.rank(*src[i], "src", src[i]->ndim());
    c.rank(*dst[i], "dst", dst[i]->ndim());
    if (!castable(src[i]->dtype()) || !castable(dst[i]->dtype()))
      c.fail(fmt::format("pair {}: cast handles f32, bf16 and f16, not {} -> {}", i, src[i]->describe(),
                         dst[i]->describe()));
    if (src[i]->numel() != dst[i]->numel())
      c.fail(fmt::format("pair {}: src {} and dst {} differ in size", i, src[i]->describe(), dst[i]->describe()));
    c.disjoint(*dst[i], "dst", *src[i], "src");
  }
  VEOMNI_ROUTE(cast_multi, c.device(), src, dst);
}

// ---------------------------------------------------------------- encoder ops

namespace {

using NamedTensor = std::pair<const Tensor*, const char*>;

// No output overlaps an input or another output (the same tensor passed twice included).
template <size_t kOutputs, size_t kInputs>
void check_disjoint_outputs(const Call& c, const NamedTensor (&outputs)[kOutputs],
                            const NamedTensor (&inputs)[kInputs]) {
  for (size_t o = 0; o < kOutputs; ++o) {
    for (const auto& [in, in_name] : inputs) c.disjoint(*outputs[o].first, outputs[o].second, *in, in_name);
    for (size_t o2 = o + 1; o2 < kOutputs; ++o2)
      c.disjoint(*outputs[o].first, outputs[o].second, *outputs[o2].first, outputs[o2].second);
  }
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd) {
  const Call c("layernorm_forward", x);
  c.rank(x, "x", 2);
  const int64_t n = x.dim(0), d = x.dim(1);
  c.require(d >= 1, "x {} has no columns to normalise", x.describe());
  c.floats(x, "x", {n, d});
  c.floats(weight, "weight", {d});
  c.floats(bias, "bias", {d});
  c.floats(y, "y", {n, d});
  c.f32(mean, "mean", {n});
  c.f32(rstd, "rstd", {n});
  c.require(eps >= 0.0f && std::isfinite(eps), "eps {} must be finite and not negative", eps);
  const NamedTensor inputs[] = {{&x, "x"}, {&weight, "weight"}, {&bias, "bias"}};
  const NamedTensor outputs[] = {{&y, "y"}, {&mean, "mean"}, {&rstd, "rstd"}};
  check_disjoint_outputs(c, outputs, inputs);
  VEOMNI_ROUTE(layernorm_forward, c.device(), x, weight, bias, eps, y, mean, rstd);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dweight, Tensor& dbias) {
  const Call c("layernorm_backward", dy);
  c.rank(x, "x", 2);
  const int64_t n = x.dim(0), d = x.dim(1);
  c.require(d >= 1, "x {} has no columns to normalise", x.describe());
  c.floats(dy, "dy", {n, d});
  c.floats(x, "x", {n, d});
  c.floats(weight, "weight", {d});
  c.f32(mean, "mean", {n});
  c.f32(rstd, "rstd", {n});
  c.floats(dx, "dx", {n, d});
  c.floats(dweight, "dweight", {d});
  c.floats(dbias, "dbias", {d});
  const NamedTensor inputs[] = {{&dy, "dy"}, {&x, "x"}, {&weight, "weight"}, {&mean, "mean"}, {&rstd, "rstd"}};
  const NamedTensor outputs[] = {{&dx, "dx"}, {&dweight, "dweight"}, {&dbias, "dbias"}};
  check_disjoint_outputs(c, outputs, inputs);
  VEOMNI_ROUTE(layernorm_backward, c.device(), dy, x, weight, mean, rstd, dx, dweight, dbias);
}

namespace {

void check_gelu_kind(const Call& c, GeluKind kind) {
  c.require(kind == GeluKind::Erf || kind == GeluKind::Tanh, "unknown GeluKind {}", static_cast<int>(kind));
}

// Same element count as `like` (any shape: GELU is elementwise).
void check_same_numel(const Call& c, const Tensor& t, const char* name, const Tensor& like, const char* like_name) {
  c.floats(t, name, t.shape());
  c.require(t.numel() == like.numel(), "{} {} does not match {} {}", name, t.describe(), like_name, like.describe());
}

}  // namespace

void gelu_forward(const Tensor& x, GeluKind kind, Tensor& y) {
  const Call c("gelu_forward", x);
  check_gelu_kind(c, kind);
  c.floats(x, "x", x.shape());
  check_same_numel(c, y, "y", x, "x");
  c.disjoint(y, "y", x, "x");
  VEOMNI_ROUTE(gelu_forward, c.device(), x, kind, y);
}

void gelu_backward(const Tensor& dy, const Tensor& x, GeluKind kind, Tensor& dx) {
  const Call c("gelu_backward", dy);
  check_gelu_kind(c, kind);
  c.floats(x, "x", x.shape());
  check_same_numel(c, dy, "dy", x, "x");
  check_same_numel(c, dx, "dx", x, "x");
  c.disjoint(dx, "dx", dy, "dy");
  c.disjoint(dx, "dx", x, "x");
  VEOMNI_ROUTE(gelu_backward, c.device(), dy, x, kind, dx);
}

void add_bias_(Tensor& y, const Tensor& bias) {
  const Call c("add_bias_", y);
  c.rank(y, "y", 2);
  c.floats(y, "y", y.shape());
  c.floats(bias, "bias", {y.dim(1)});
  c.disjoint(y, "y", bias, "bias");
  VEOMNI_ROUTE(add_bias_, c.device(), y, bias);
}

void bias_grad(const Tensor& dy, Tensor& dbias) {
  const Call c("bias_grad", dy);
  c.rank(dy, "dy", 2);
  c.floats(dy, "dy", dy.shape());
  c.floats(dbias, "dbias", {dy.dim(1)});
  c.disjoint(dbias, "dbias", dy, "dy");
  VEOMNI_ROUTE(bias_grad, c.device(), dy, dbias);
}

namespace {

// Kernel, stride and padding of a 2-D convolution over an input of h x w; returns the output size {Ho, Wo}.
std::pair<int64_t, int64_t> check_conv_geometry(const Call& c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                                                int64_t stride, int64_t pad) {
  c.require(kh >= 1 && kw >= 1, "kernel {}x{} must be at least 1x1", kh, kw);
  c.require(stride >= 1, "stride {} must be positive", stride);
  c.require(pad >= 0, "padding {} is negative", pad);
  c.require(h + 2 * pad >= kh && w + 2 * pad >= kw, "kernel {}x{} is larger than the padded input {}x{}", kh, kw,
            h + 2 * pad, w + 2 * pad);
  return {(h + 2 * pad - kh) / stride + 1, (w + 2 * pad - kw) / stride + 1};
}

}  // namespace

void im2col_2d(const Tensor& x, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& cols) {
  const Call c("im2col_2d", x);
  c.rank(x, "x", 4);
  const int64_t b = x.dim(0), ch = x.dim(1);
  const auto [ho, wo] = check_conv_geometry(c, x.dim(2), x.dim(3), kh, kw, stride, pad);
  c.floats(x, "x", x.shape());
  c.floats(cols, "cols", {b * ho * wo, ch * kh * kw});
  c.disjoint(cols, "cols", x, "x");
  VEOMNI_ROUTE(im2col_2d, c.device(), x, kh, kw, stride, pad, cols);
}

void col2im_2d(const Tensor& dcols, int64_t kh, int64_t kw, int64_t stride, int64_t pad, Tensor& dx) {
  const Call c("col2im_2d", dcols);
  c.rank(dx, "dx", 4);
  const int64_t b = dx.dim(0), ch = dx.dim(1);
  const auto [ho, wo] = check_conv_geometry(c, dx.dim(2), dx.dim(3), kh, kw, stride, pad);
  c.floats(dcols, "dcols", {b * ho * wo, ch * kh * kw});
  c.floats(dx, "dx", dx.shape());
  c.disjoint(dx, "dx", dcols, "dcols");
  VEOMNI_ROUTE(col2im_2d, c.device(), dcols, kh, kw, stride, pad, dx);
}

// ---------------------------------------------------------------- attention over a KV cache (decoding)

namespace {

// Host-side range checks of the cache rows (the CPU path only: on a device they would cost a wait).
void check_cache_rows(const Call& c, const Tensor& cache_rows, int64_t batch, int64_t cache_len) {
  if (!cache_rows.device().is_cpu()) return;
  const int64_t n = cache_rows.dim(1);
  const int32_t* rows = cache_rows.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    c.require(rows[i] >= 0 && rows[i] < batch, "slot of row {} = {} is outside the cache's {} sequences", i, rows[i],
              batch);
    c.require(rows[n + i] >= 1 && rows[n + i] <= cache_len, "kv length of row {} = {} is outside [1, {}]", i,
              rows[n + i], cache_len);
  }
}

// dest i32 [s]: the flat cache rows a step's rows go to, each in [0, cache_rows) when the host can see them (CUDA
// kernels skip a row outside instead: they cannot report it without waiting for the device).
void check_dest_rows(const Call& c, const Tensor& dest, int64_t s, int64_t cache_rows) {
  c.index(dest, "dest", DType::I32, {s});
  if (!dest.device().is_cpu()) return;
  const int32_t* flat = dest.data<int32_t>();
  for (int64_t i = 0; i < s; ++i)
    c.require(flat[i] >= 0 && flat[i] < cache_rows, "dest[{}] = {} is outside the cache's {} rows", i, flat[i],
              cache_rows);
}

}  // namespace

Tensor upload(const Tensor& host, Device device) {
  VEOMNI_CHECK(host.is_cpu(), "ops::upload: {} is not on the CPU", host.describe());
  if (device.is_cpu()) return host.clone();
#ifdef VEOMNI_HAVE_CUDA_OPS
  return cuda::upload(host, device);
#else
  return host.to(device);  // throws: no CUDA backend in this build
#endif
}

// The host-table form: checks the rows on the host, then uploads them without waiting.
void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const std::vector<int32_t>& slots, const std::vector<int32_t>& kv_lens, float scale,
                        Tensor& out) {
  const Call c("attention_kv_cache", q);
  c.rank(q, "q", 3);
  c.rank(k_cache, "k_cache", 4);
  const int64_t n = q.dim(0);
  c.require(static_cast<int64_t>(slots.size()) == n && static_cast<int64_t>(kv_lens.size()) == n,
            "{} slots and {} kv_lens for {} query rows", slots.size(), kv_lens.size(), n);
  std::vector<int32_t> rows(slots);
  rows.insert(rows.end(), kv_lens.begin(), kv_lens.end());
  const Tensor host = Tensor::from_vector(rows, {2, n});
  check_cache_rows(c, host, k_cache.dim(0), k_cache.dim(1));
  attention_kv_cache(q, k_cache, v_cache, upload(host, q.device()), scale, out);
}

void attention_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& cache_rows,
                        float scale, Tensor& out) {
  const Call c("attention_kv_cache", q);
  c.rank(q, "q", 3);
  c.rank(k_cache, "k_cache", 4);
  const int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2);
  const int64_t batch = k_cache.dim(0), cache_len = k_cache.dim(1), hkv = k_cache.dim(2);
  c.floats(q, "q", {n, hq, d});
  c.floats(k_cache, "k_cache", {batch, cache_len, hkv, d});
  c.floats(v_cache, "v_cache", {batch, cache_len, hkv, d});
  c.require(k_cache.dtype() == v_cache.dtype(), "k_cache is {} but v_cache is {}", k_cache.describe(),
            v_cache.describe());
  c.require(hkv > 0 && hq % hkv == 0, "{} query heads are not a multiple of {} kv heads", hq, hkv);
  c.require(std::isfinite(scale), "scale {} is not finite", scale);
  c.index(cache_rows, "cache_rows", DType::I32, {2, n});
  check_cache_rows(c, cache_rows, batch, cache_len);
  c.floats(out, "out", q.shape());
  for (const Tensor* in : {&q, &k_cache, &v_cache})
    c.disjoint(out, "out", *in, in == &q ? "q" : in == &k_cache ? "k_cache" : "v_cache");
  VEOMNI_ROUTE(attention_kv_cache, c.device(), q, k_cache, v_cache, cache_rows, scale, out);
}

void kv_cache_write(const Tensor& rows, const Tensor& dest, Tensor& cache) {
  const Call c("kv_cache_write", cache);
  c.rank(cache, "cache", 4);
  const int64_t batch = cache.dim(0), cache_len = cache.dim(1), hkv = cache.dim(2), d = cache.dim(3);
  c.floats(cache, "cache", cache.shape());
  c.rank(rows, "rows", 3);
  const int64_t s = rows.dim(0);
  c.floats(rows, "rows", {s, hkv, d});
  c.require(rows.dtype() == cache.dtype(), "rows are {} but the cache is {}", rows.describe(), cache.describe());
  check_dest_rows(c, dest, s, batch * cache_len);
  c.disjoint(cache, "cache", rows, "rows");
  VEOMNI_ROUTE(kv_cache_write, c.device(), rows, dest, cache);
}

void qkv_norm_rope_cache_write(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const Tensor& cos, const Tensor& sin, const Tensor& dest, Tensor& q, Tensor& k,
                               Tensor& v, Tensor& k_cache, Tensor& v_cache) {
  const Call c("qkv_norm_rope_cache_write", qkv);
  c.rank(q, "q", 3);
  c.rank(k, "k", 3);
  c.rank(k_cache, "k_cache", 4);
  const int64_t s = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  const int64_t batch = k_cache.dim(0), cache_len = k_cache.dim(1);
  c.floats(qkv, "qkv", {s, (hq + 2 * hkv) * d});
  c.floats(q, "q", {s, hq, d});
  c.floats(k, "k", {s, hkv, d});
  c.floats(v, "v", {s, hkv, d});
  c.floats(q_norm, "q_norm", {d});
  c.floats(k_norm, "k_norm", {d});
  c.floats(k_cache, "k_cache", {batch, cache_len, hkv, d});
  c.floats(v_cache, "v_cache", {batch, cache_len, hkv, d});
  c.require(d % 2 == 0, "head_dim {} is odd", d);
  c.require(k.dtype() == k_cache.dtype() && v.dtype() == v_cache.dtype(), "k is {} and v {}, but the caches are {}",
            k.describe(), v.describe(), k_cache.describe());
  c.require(eps >= 0.0f, "eps {} is negative", eps);
  c.f32(cos, "cos", {s, d});
  c.f32(sin, "sin", {s, d});
  check_dest_rows(c, dest, s, batch * cache_len);
  const std::initializer_list<std::pair<const Tensor*, const char*>> outs = {
      {&q, "q"}, {&k, "k"}, {&v, "v"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"}};
  for (const auto& [out, name] : outs) c.disjoint(*out, name, qkv, "qkv");
  VEOMNI_ROUTE(qkv_norm_rope_cache_write, c.device(), qkv, q_norm, k_norm, eps, cos, sin, dest, q, k, v, k_cache,
               v_cache);
}

void matmul_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& out) {
  const Call c("matmul_swiglu", x);
  c.rank(x, "x", 2);
  c.rank(gate_up, "gate_up", 2);
  const int64_t m = x.dim(0), k = x.dim(1), two_i = gate_up.dim(0);
  c.require(two_i % 2 == 0, "gate_up {} has an odd number of rows", gate_up.describe());
  c.floats(x, "x", {m, k});
  c.floats(gate_up, "gate_up", {two_i, k});
  c.floats(out, "out", {m, two_i / 2});
  c.disjoint(out, "out", x, "x");
  c.disjoint(out, "out", gate_up, "gate_up");
  if (c.device().is_cpu()) {
    Tensor product = Tensor::empty({m, two_i}, x.dtype(), x.device());
    matmul(x, false, gate_up, true, product);
    return swiglu_fused_forward(product, out);
  }
#ifdef VEOMNI_HAVE_CUDA_OPS
  op_profile_timed(
      c.device(), [&]() -> OpKey { return OpKey{.op = "matmul_swiglu"}; },
      [&]() { cuda::matmul_swiglu(x, gate_up, out); });
#else
  no_cuda_backend<void>("matmul_swiglu", c.device());
#endif
}

namespace {

// The checks rmsnorm_matmul and rmsnorm_matmul_swiglu share: x [M, K], gain [K], w [rows, K], out [M, out_columns].
void check_normalised_gemm(const Call& c, const Tensor& x, const Tensor& gain, const Tensor& w, const Tensor& out,
                           int64_t out_columns) {
  const int64_t m = x.dim(0), k = x.dim(1);
  c.floats(x, "x", {m, k});
  c.floats(gain, "gain", {k});
  c.floats(w, "w", {w.dim(0), k});
  c.floats(out, "out", {m, out_columns});
  c.disjoint(out, "out", x, "x");
  c.disjoint(out, "out", w, "w");
}

// The CPU's two-op path: rmsnorm_forward's rows, in x's dtype.
Tensor normalised_rows(const Tensor& x, const Tensor& gain, float eps) {
  Tensor normed = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  rmsnorm_forward(x, gain, eps, normed, rstd);
  return normed;
}

}  // namespace

void rmsnorm_matmul(const Tensor& x, const Tensor& gain, float eps, const Tensor& w, Tensor& out) {
  const Call c("rmsnorm_matmul", x);
  c.rank(x, "x", 2);
  c.rank(w, "w", 2);
  check_normalised_gemm(c, x, gain, w, out, w.dim(0));
  if (c.device().is_cpu()) return matmul(normalised_rows(x, gain, eps), false, w, true, out);
#ifdef VEOMNI_HAVE_CUDA_OPS
  op_profile_timed(
      c.device(), [&]() -> OpKey { return OpKey{.op = "rmsnorm_matmul"}; },
      [&]() { cuda::rmsnorm_matmul(x, gain, eps, w, out); });
#else
  no_cuda_backend<void>("rmsnorm_matmul", c.device());
#endif
}

void rmsnorm_matmul_swiglu(const Tensor& x, const Tensor& gain, float eps, const Tensor& gate_up, Tensor& out) {
  const Call c("rmsnorm_matmul_swiglu", x);
  c.rank(x, "x", 2);
  c.rank(gate_up, "gate_up", 2);
  c.require(gate_up.dim(0) % 2 == 0, "gate_up {} has an odd number of rows", gate_up.describe());
  check_normalised_gemm(c, x, gain, gate_up, out, gate_up.dim(0) / 2);
  if (c.device().is_cpu()) return matmul_swiglu(normalised_rows(x, gain, eps), gate_up, out);
#ifdef VEOMNI_HAVE_CUDA_OPS
  op_profile_timed(
      c.device(), [&]() -> OpKey { return OpKey{.op = "rmsnorm_matmul_swiglu"}; },
      [&]() { cuda::rmsnorm_matmul_swiglu(x, gain, eps, gate_up, out); });
#else
  no_cuda_backend<void>("rmsnorm_matmul_swiglu", c.device());
#endif
}

namespace {

// The layer's shapes agree with h [M, hidden] and the caches [B, L, Hkv, D] (the ops it runs check their operands
// again; the one-kernel path checks only here).
void check_decode_layer(const Call& c, const DenseDecodeLayer& layer, const Tensor& cos, const Tensor& sin,
                        const Tensor& write_rows, const Tensor& cache_rows, const Tensor& k_cache,
                        const Tensor& v_cache, const Tensor& h) {
  c.rank(h, "h", 2);
  c.rank(k_cache, "k_cache", 4);
  const int64_t m = h.dim(0), hidden = h.dim(1), hq = layer.q_heads, hkv = layer.kv_heads, d = layer.head_dim;
  c.require(hq > 0 && hkv > 0 && hq % hkv == 0 && d > 0 && d % 2 == 0,
            "{} query heads over {} kv heads of {} dims: need a multiple and an even head_dim", hq, hkv, d);
  c.rank(layer.gate_up, "gate_up", 2);
  c.require(layer.gate_up.dim(0) % 2 == 0, "gate_up {} has an odd number of rows", layer.gate_up.describe());
  const int64_t intermediate = layer.gate_up.dim(0) / 2, batch = k_cache.dim(0), cache_len = k_cache.dim(1);
  c.floats(h, "h", {m, hidden});
  c.floats(layer.input_norm, "input_norm", {hidden});
  c.floats(layer.qkv, "qkv", {(hq + 2 * hkv) * d, hidden});
  c.floats(layer.q_norm, "q_norm", {d});
  c.floats(layer.k_norm, "k_norm", {d});
  c.floats(layer.o_proj, "o_proj", {hidden, hq * d});
  c.floats(layer.post_attention_norm, "post_attention_norm", {hidden});
  c.floats(layer.gate_up, "gate_up", {2 * intermediate, hidden});
  c.floats(layer.down, "down", {hidden, intermediate});
  c.floats(k_cache, "k_cache", {batch, cache_len, hkv, d});
  c.floats(v_cache, "v_cache", {batch, cache_len, hkv, d});
  c.require(std::isfinite(layer.scale), "scale {} is not finite", layer.scale);
  c.f32(cos, "cos", {m, d});
  c.f32(sin, "sin", {m, d});
  check_dest_rows(c, write_rows, m, batch * cache_len);
  c.index(cache_rows, "cache_rows", DType::I32, {2, m});
  check_cache_rows(c, cache_rows, batch, cache_len);
}

}  // namespace

namespace {

// One layer of dense_decode_layers as its ops in turn.
void dense_decode_layer_ops(const DenseDecodeLayer& layer, const Tensor& cos, const Tensor& sin,
                            const Tensor& write_rows, const Tensor& cache_rows, Tensor& k_cache, Tensor& v_cache,
                            Tensor& h) {
  const int64_t m = h.dim(0), hq = layer.q_heads, hkv = layer.kv_heads, d = layer.head_dim;
  Tensor qkv = Tensor::empty({m, layer.qkv.dim(0)}, h.dtype(), h.device());
  rmsnorm_matmul(h, layer.input_norm, layer.input_norm_eps, layer.qkv, qkv);
  Tensor q = Tensor::empty({m, hq, d}, h.dtype(), h.device());
  Tensor k = Tensor::empty({m, hkv, d}, h.dtype(), h.device());
  Tensor v = Tensor::empty({m, hkv, d}, h.dtype(), h.device());
  qkv_norm_rope_cache_write(qkv, layer.q_norm, layer.k_norm, layer.qk_norm_eps, cos, sin, write_rows, q, k, v,
                            k_cache, v_cache);
  Tensor attention = Tensor::empty({m, hq, d}, h.dtype(), h.device());
  attention_kv_cache(q, k_cache, v_cache, cache_rows, layer.scale, attention);
  matmul(attention.view({m, hq * d}), false, layer.o_proj, true, h, 1.0f, 1.0f);
  Tensor act = Tensor::empty({m, layer.gate_up.dim(0) / 2}, h.dtype(), h.device());
  rmsnorm_matmul_swiglu(h, layer.post_attention_norm, layer.post_attention_norm_eps, layer.gate_up, act);
  matmul(act, false, layer.down, true, h, 1.0f, 1.0f);
}

}  // namespace

void dense_decode_layers(const std::vector<DenseDecodeLayer>& layers, const Tensor& cos, const Tensor& sin,
                         const Tensor& write_rows, const Tensor& cache_rows, std::vector<Tensor>& k_caches,
                         std::vector<Tensor>& v_caches, Tensor& h) {
  const Call c("dense_decode_layers", h);
  c.require(k_caches.size() == layers.size() && v_caches.size() == layers.size(),
            "{} layers with {} key caches and {} value caches: need one of each a layer", layers.size(),
            k_caches.size(), v_caches.size());
  for (size_t i = 0; i < layers.size(); ++i)
    check_decode_layer(c, layers[i], cos, sin, write_rows, cache_rows, k_caches[i], v_caches[i], h);
#ifdef VEOMNI_HAVE_CUDA_OPS
  if (!c.device().is_cpu() && cuda::dense_decode_layers_clustered_enabled() &&
      cuda::dense_decode_layers_clustered_fits(layers, k_caches, v_caches, h)) {
    return op_profile_timed(
        c.device(), [&]() -> OpKey { return OpKey{.op = "dense_decode_layers"}; },
        [&]() {
          cuda::dense_decode_layers_clustered(layers, cos, sin, write_rows, cache_rows, k_caches, v_caches, h);
        });
  }
  if (!c.device().is_cpu() && cuda::dense_decode_layer_kernel_enabled() &&
      cuda::dense_decode_layers_kernel_fits(layers, k_caches, v_caches, h)) {
    return op_profile_timed(
        c.device(), [&]() -> OpKey { return OpKey{.op = "dense_decode_layers"}; },
        [&]() { cuda::dense_decode_layers(layers, cos, sin, write_rows, cache_rows, k_caches, v_caches, h); });
  }
#endif
  for (size_t i = 0; i < layers.size(); ++i)
    dense_decode_layer_ops(layers[i], cos, sin, write_rows, cache_rows, k_caches[i], v_caches[i], h);
}

namespace {

// moe_decode_experts as the ops of MoeBlock::forward in turn (the CPU's path): the expert counts go to the host.
void moe_experts_in_turn(const Tensor& x, const Tensor& topk_idx, const Tensor& topk_weight, const Tensor& gate_up,
                         const Tensor& down, Tensor& out) {
  const int64_t pairs = topk_idx.numel(), hidden = x.dim(1), inter = down.dim(2);
  Tensor permuted = Tensor::empty({pairs, hidden}, x.dtype(), x.device());
  Tensor row_map = Tensor::empty({pairs}, DType::I32, x.device());
  std::vector<int64_t> counts;
  moe_permute(x, topk_idx, gate_up.dim(0), permuted, row_map, counts);
  Tensor product = Tensor::empty({pairs, 2 * inter}, x.dtype(), x.device());
  grouped_matmul(permuted, gate_up, true, counts, product);
  Tensor act = Tensor::empty({pairs, inter}, x.dtype(), x.device());
  swiglu_fused_forward(product, act);
  Tensor y = Tensor::empty({pairs, hidden}, x.dtype(), x.device());
  grouped_matmul(act, down, true, counts, y);
  moe_unpermute(y, row_map, topk_weight, out);
}

}  // namespace

void moe_decode_experts(const Tensor& x, const Tensor& topk_idx, const Tensor& topk_weight, const Tensor& gate_up,
                        const Tensor& down, Tensor& out) {
  const Call c("moe_decode_experts", x);
  c.rank(x, "x", 2);
  c.rank(topk_idx, "topk_idx", 2);
  c.rank(gate_up, "gate_up", 3);
  c.rank(down, "down", 3);
  const int64_t n = x.dim(0), hidden = x.dim(1), k = topk_idx.dim(1), experts = gate_up.dim(0);
  const int64_t inter = down.dim(2);
  c.require(k >= 1, "topk_idx is {}: a row needs at least one expert", topk_idx.describe());
  c.require(n * k <= 65535, "{} (row, expert) pairs: at most 65,535 a decode step", n * k);
  c.floats(x, "x", {n, hidden});
  c.index(topk_idx, "topk_idx", DType::I32, {n, k});
  c.f32(topk_weight, "topk_weight", {n, k});
  c.floats(gate_up, "gate_up", {experts, 2 * inter, hidden});
  c.floats(down, "down", {experts, hidden, inter});
  c.floats(out, "out", {n, hidden});
  for (const auto& [t, name] :
       {std::pair<const Tensor*, const char*>{&gate_up, "gate_up"}, {&down, "down"}, {&out, "out"}})
    c.require(t->dtype() == x.dtype(), "{} is {} but x is {}: one dtype for x, the weights and out", name,
              dtype_name(t->dtype()), dtype_name(x.dtype()));
  c.disjoint(out, "out", x, "x");
  if (c.device().is_cpu()) return moe_experts_in_turn(x, topk_idx, topk_weight, gate_up, down, out);
#ifdef VEOMNI_HAVE_CUDA_OPS
  c.require(experts <= 12288, "{} experts: the CUDA plan holds at most 12,288", experts);
  op_profile_timed(
      c.device(), [&]() -> OpKey { return OpKey{.op = "moe_decode_experts"}; },
      [&]() { cuda::moe_decode_experts(x, topk_idx, topk_weight, gate_up, down, out); });
#else
  no_cuda_backend<void>("moe_decode_experts", c.device());
#endif
}

void argmax_rows(const Tensor& x, Tensor& ids) {
  const Call c("argmax_rows", x);
  c.rank(x, "x", 2);
  c.floats(x, "x", x.shape());
  c.require(x.dim(1) >= 1, "x is {}: a row needs at least one value", x.describe());
  c.index(ids, "ids", DType::I64, {x.dim(0)});
  VEOMNI_ROUTE(argmax_rows, c.device(), x, ids);
}

void advance_decode_tables(const Tensor& chosen, Tensor& tokens, Tensor& rows) {
  const Call c("advance_decode_tables", chosen);
  c.rank(chosen, "chosen", 1);
  const int64_t n = chosen.dim(0);
  c.require(n >= 1, "chosen is {}: a step has at least one row", chosen.describe());
  c.index(chosen, "chosen", DType::I64, {n});
  c.rank(tokens, "tokens", 1);
  const int64_t streams = tokens.dim(0) / n - 1;
  c.require(tokens.dim(0) % n == 0 && (streams == 1 || streams == 3),
            "tokens is {}: it holds {} ids and the positions of 1 or 3 streams", tokens.describe(), n);
  c.index(tokens, "tokens", DType::I64, {n * (1 + streams)});
  c.index(rows, "rows", DType::I32, {3 * n});
  c.disjoint(tokens, "tokens", chosen, "chosen");
  VEOMNI_ROUTE(advance_decode_tables, c.device(), chosen, tokens, rows);
}

}  // namespace veomni::ops
