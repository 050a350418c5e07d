// SharedInputLinears: projections of one input with their LoRA down-projections stacked into one GEMM give the
// outputs, dx and adapter gradients of the projections run one by one; one adapter or adapters off run one by one.
// PackedLinears (one GEMM over frozen weights that are consecutive rows of one buffer, the adapters through a
// block-diagonal B) gives them too, packed side by side. And one adapted Linear against its formula (the adapter's
// product is written first and the base GEMM adds onto it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/ops.h"
#include "model/layers/lora_adapter.h"
#include "model/layers/packed_linears.h"
#include "model/layers/shared_input_linears.h"
#include "model/param.h"

namespace veomni {
namespace {

Tensor random_linear_tensor(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.uniform() - 0.5);
  return t;
}

// q/k/v-like projections of widths 8, 4, 4 over an input of 12 (rank 3, scale 2), base frozen as under LoRA, every
// value random (B too, so the adapters carry a gradient everywhere).
struct Projections {
  ParamStore store;
  std::vector<Linear> linears;
  explicit Projections(std::vector<std::string> lora_modules) {
    LoraConfig config;
    config.rank = 3;
    config.alpha = 6;
    config.lora_modules = std::move(lora_modules);
    store.set_lora(std::make_shared<LoraRegistry>(config));
    store.begin_group("layers.0");
    for (const auto& [name, out] : {std::pair<std::string, int64_t>{"q_proj", 8}, {"k_proj", 4}, {"v_proj", 4}})
      linears.emplace_back(store, "layers.0." + name + ".weight", Shape{out, 12});
    Rng rng(3);
    for (const auto& p : store.all()) {
      p->value = random_linear_tensor(p->shape, rng);
      p->trainable = is_lora_param_name(p->name);
    }
  }
  SharedInputLinears shared() const { return {&linears[0], &linears[1], &linears[2]}; }
  // Moves the three base weights into consecutive rows of one [16, 12] buffer (same values).
  void join_bases() {
    Tensor buffer = Tensor::empty({16, 12}, DType::F32);
    int64_t row = 0;
    for (Linear& l : linears) {
      Tensor& w = l.weight().value;
      Tensor rows = buffer.slice(row, row + w.dim(0));
      rows.copy_from(w);
      row += w.dim(0);
      w = rows;
    }
  }
  Tensor joined(const Tensor& x) const {
    return PackedLinears::joined_weight({&linears[0], &linears[1], &linears[2]}, x);
  }
};

struct Result {
  std::vector<Tensor> ys;
  Tensor dx;
  std::vector<std::vector<float>> grads;  // every parameter's, empty where none
  bool stacked = false;
};

std::vector<Tensor> output_grads(int64_t rows) {
  Rng rng(5);
  return {random_linear_tensor({rows, 8}, rng), random_linear_tensor({rows, 4}, rng),
          random_linear_tensor({rows, 4}, rng)};
}

std::vector<std::vector<float>> take_grads(ParamStore& store) {
  std::vector<std::vector<float>> out;
  for (const auto& p : store.all()) {
    out.push_back(p->grad.defined() ? p->grad.to_float_vector() : std::vector<float>());
    p->grad = Tensor();
  }
  return out;
}

Result run_shared(Projections& m, const Tensor& x) {
  SharedInputLinears::Output out = m.shared().forward(x, true);
  Result r{out.out, {}, {}, out.saved.lora_ht.defined()};
  r.dx = m.shared().backward(std::move(out.saved), output_grads(x.dim(0)));
  r.grads = take_grads(m.store);
  return r;
}

Result run_one_by_one(Projections& m, const Tensor& x) {
  Result r;
  std::vector<Linear::Saved> saved;
  for (const Linear& l : m.linears) {
    Linear::Output out = l.forward(x, true);
    r.ys.push_back(out.out);
    saved.push_back(std::move(out.saved));
  }
  const std::vector<Tensor> dys = output_grads(x.dim(0));
  r.dx = m.linears[0].backward(std::move(saved[0]), dys[0]);
  for (size_t i = 1; i < m.linears.size(); ++i) m.linears[i].backward_accumulate(std::move(saved[i]), dys[i], r.dx);
  r.grads = take_grads(m.store);
  return r;
}

// Equal (exactly) or within 1e-5 of the largest reference value; `what` and `index` name the compared tensor.
void expect_equal(const std::vector<float>& got, const std::vector<float>& want, bool exactly, const char* what,
                  size_t index) {
  ASSERT_EQ(got.size(), want.size()) << what << index;
  if (exactly) {
    EXPECT_EQ(got, want) << what << index;
    return;
  }
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  EXPECT_LE(worst, 1e-5 * scale) << what << index << " (largest " << scale << ")";
}

void expect_same(const Result& got, const Result& want, bool exactly) {
  for (size_t i = 0; i < want.ys.size(); ++i)
    expect_equal(got.ys[i].to_float_vector(), want.ys[i].to_float_vector(), exactly, "y", i);
  expect_equal(got.dx.to_float_vector(), want.dx.to_float_vector(), exactly, "dx", 0);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) expect_equal(got.grads[i], want.grads[i], exactly, "gradient ", i);
}

Tensor input() {
  Rng rng(4);
  return random_linear_tensor({7, 12}, rng);
}

// y = x W^T + scale (x A^T) B^T and dx = dy W + scale (dy B) A, from plain GEMMs; dA and dB as the chain rule gives.
TEST(LinearWithAdapter, IsTheBasePlusTheScaledLowRankProduct) {
  Projections m({"q_proj"});
  const Linear& q = m.linears[0];
  const Tensor x = input();
  const Tensor& w = q.weight().value;
  const Tensor& a = m.store.find("layers.0.q_proj.lora_A.weight")->value;
  const Tensor& b = m.store.find("layers.0.q_proj.lora_B.weight")->value;
  const float scale = q.adapter().scale();
  ASSERT_EQ(scale, 2.0f);
  Tensor xa = Tensor::empty({x.dim(0), 3}, DType::F32), want_y = Tensor::empty({x.dim(0), 8}, DType::F32);
  ops::matmul(x, false, a, true, xa);
  ops::matmul(x, false, w, true, want_y);
  ops::matmul(xa, false, b, true, want_y, scale, 1.0f);
  const Tensor dy = output_grads(x.dim(0))[0];
  Tensor dyb = Tensor::empty({x.dim(0), 3}, DType::F32), want_dx = Tensor::empty(x.shape(), DType::F32);
  ops::matmul(dy, false, b, false, dyb);
  ops::matmul(dy, false, w, false, want_dx);
  ops::matmul(dyb, false, a, false, want_dx, scale, 1.0f);
  Tensor want_da = Tensor::zeros(a.shape(), DType::F32), want_db = Tensor::zeros(b.shape(), DType::F32);
  ops::matmul(dyb, true, x, false, want_da, scale);
  ops::matmul(dy, true, xa, false, want_db, scale);

  Linear::Output out = q.forward(x, true);
  expect_equal(out.out.to_float_vector(), want_y.to_float_vector(), false, "y", 0);
  const Tensor dx = q.backward(std::move(out.saved), dy);
  expect_equal(dx.to_float_vector(), want_dx.to_float_vector(), false, "dx", 0);
  expect_equal(m.store.find("layers.0.q_proj.lora_A.weight")->grad.to_float_vector(), want_da.to_float_vector(),
               false, "dA", 0);
  expect_equal(m.store.find("layers.0.q_proj.lora_B.weight")->grad.to_float_vector(), want_db.to_float_vector(),
               false, "dB", 0);
}

// A residual rides on the first GEMM that writes y: the adapter's up-projection (k_proj, without an adapter, and q_proj
// with its adapter off: the base GEMM). y is the output without it plus the residual; the saved input and the
// backward are the ones without it.
TEST(LinearWithAdapter, AddsAResidualInTheGemmThatWritesTheOutput) {
  Projections m({"q_proj"});
  const Tensor x = input();
  Rng rng(5);
  for (bool adapters_on : {true, false}) {
    m.store.lora()->set_applied(adapters_on);
    for (const Linear* linear : {&m.linears[0], &m.linears[1]}) {
      SCOPED_TRACE(linear->weight().name + (adapters_on ? ", adapters on" : ", adapters off"));
      const Tensor residual = random_linear_tensor({x.dim(0), linear->weight().value.dim(0)}, rng);
      Tensor want = linear->forward(x, false).out;
      ops::add_(want, residual);
      Linear::Output got = linear->forward(x, true, residual);
      expect_equal(got.out.to_float_vector(), want.to_float_vector(), false, "y", 0);
      EXPECT_TRUE(got.saved.x.defined());
      EXPECT_EQ(got.saved.lora_xa.defined(), adapters_on && linear == &m.linears[0]);
    }
  }
  m.store.lora()->set_applied(true);
}

TEST(SharedInputLinears, StackedAdaptersEqualThemOneByOne) {
  Projections m({"q_proj", "k_proj", "v_proj"});
  const Result want = run_one_by_one(m, input());
  const Result got = run_shared(m, input());
  EXPECT_TRUE(got.stacked);
  expect_same(got, want, false);
  size_t adapter_grads = 0;
  for (size_t i = 0; i < want.grads.size(); ++i) {
    const bool adapter = is_lora_param_name(m.store.all()[i]->name);
    EXPECT_EQ(want.grads[i].empty(), !adapter) << m.store.all()[i]->name;
    if (adapter && std::ranges::any_of(want.grads[i], [](float v) { return v != 0.0f; })) ++adapter_grads;
  }
  EXPECT_EQ(adapter_grads, 6u);  // A and B of each projection: a zero gradient would prove nothing
}

// Two of three projections adapted: the stack holds those two, the third runs its base alone.
TEST(SharedInputLinears, StacksOnlyTheAdaptedProjections) {
  Projections m({"q_proj", "v_proj"});
  const Result want = run_one_by_one(m, input());
  const Result got = run_shared(m, input());
  EXPECT_TRUE(got.stacked);
  expect_same(got, want, false);
}

TEST(SharedInputLinears, OneAdapterOrAdaptersOffRunOneByOne) {
  Projections single({"k_proj"});
  const Result want = run_one_by_one(single, input());
  const Result got = run_shared(single, input());
  EXPECT_FALSE(got.stacked);
  expect_same(got, want, true);

  Projections off({"q_proj", "k_proj", "v_proj"});
  off.store.lora()->set_applied(false);
  const Result base = run_shared(off, input());
  EXPECT_FALSE(base.stacked);
  expect_same(base, run_one_by_one(off, input()), true);
}

// The packed output's column blocks, dx and every gradient of PackedLinears against the projections one by one:
// adapters on all three, on two, on one, and off.
TEST(PackedLinears, EqualTheProjectionsOneByOne) {
  const std::vector<std::vector<std::string>> targets = {
      {"q_proj", "k_proj", "v_proj"}, {"q_proj", "v_proj"}, {"k_proj"}};
  for (size_t t = 0; t <= targets.size(); ++t) {
    Projections m(targets[std::min(t, targets.size() - 1)]);
    if (t == targets.size()) m.store.lora()->set_applied(false);
    SCOPED_TRACE(t);
    const Result want = run_one_by_one(m, input());
    m.join_bases();
    const Tensor x = input();
    const Tensor weight = m.joined(x);
    ASSERT_TRUE(weight.defined());
    ASSERT_EQ(weight.shape(), (Shape{16, 12}));
    const PackedLinears packed(weight, {&m.linears[0], &m.linears[1], &m.linears[2]});
    PackedLinears::Output out = packed.forward(x, true);
    EXPECT_EQ(out.saved.ht.defined(), t < targets.size());
    // The packed gradient: each projection's dy in its columns.
    const std::vector<Tensor> dys = output_grads(x.dim(0));
    Tensor dy = Tensor::empty({x.dim(0), 16}, DType::F32);
    Result got;
    for (const Tensor& d : dys) got.ys.push_back(Tensor::empty(d.shape(), DType::F32));
    for (int64_t r = 0; r < x.dim(0); ++r) {
      int64_t column = 0;
      for (size_t i = 0; i < dys.size(); ++i) {
        const int64_t width = dys[i].dim(1);
        std::copy_n(dys[i].data<float>() + r * width, width, dy.data<float>() + r * 16 + column);
        std::copy_n(out.out.data<float>() + r * 16 + column, width, got.ys[i].data<float>() + r * width);
        column += width;
      }
    }
    got.dx = packed.backward(std::move(out.saved), dy);
    got.grads = take_grads(m.store);
    expect_same(got, want, false);
  }
}

// Only frozen weights in consecutive rows of one buffer, in the input's dtype, join.
TEST(PackedLinears, JoinOnlyConsecutiveFrozenWeights) {
  Projections m({"q_proj", "k_proj", "v_proj"});
  const Tensor x = input();
  EXPECT_FALSE(m.joined(x).defined());  // three allocations
  m.join_bases();
  EXPECT_TRUE(m.joined(x).defined());
  m.linears[1].weight().trainable = true;
  EXPECT_FALSE(m.joined(x).defined());
}

}  // namespace
}  // namespace veomni
