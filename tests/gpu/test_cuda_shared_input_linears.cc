// GPU tests of SharedInputLinears (LoRA down-projections of q/k/v stacked into one GEMM, h^T in [R, N]): outputs, dx
// and the adapters' gradients on the GPU, f32 and bf16, against the CPU f32 projections run one by one.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "model/layers/lora_adapter.h"
#include "model/layers/shared_input_linears.h"
#include "model/param.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaSharedInputLinears : public CudaTest {};

constexpr int64_t kRows = 300, kIn = 256;

// q/k/v of widths 256, 64, 64, rank 16, scale 2, base frozen; values representable in `dtype`.
struct Qkv {
  ParamStore store;
  std::vector<Linear> linears;
  Qkv(DType dtype, std::mt19937& rng) {
    LoraConfig config;
    config.rank = 16;
    config.alpha = 32;
    store.set_lora(std::make_shared<LoraRegistry>(config));
    store.begin_group("layers.0");
    for (const auto& [name, out] : {std::pair<std::string, int64_t>{"q_proj", 256}, {"k_proj", 64}, {"v_proj", 64}})
      linears.emplace_back(store, "layers.0." + name + ".weight", Shape{out, kIn});
    for (const auto& p : store.all()) {
      p->value = representable(random_f32(p->shape, rng, -0.1f, 0.1f), dtype);
      p->trainable = is_lora_param_name(p->name);
    }
  }
};

struct Results {
  std::vector<Tensor> ys;
  Tensor dx;
  std::vector<Tensor> grads;  // the adapters', in registration order
};

std::vector<Tensor> adapter_grads(ParamStore& store) {
  std::vector<Tensor> out;
  for (const auto& p : store.all())
    if (p->trainable) out.push_back(p->grad);
  return out;
}

TEST_F(CudaSharedInputLinears, StackedOnTheGpuMatchesOneByOneOnTheCpu) {
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    std::mt19937 rng(31);
    Qkv cpu(dtype, rng);
    const Tensor x = representable(random_f32({kRows, kIn}, rng), dtype);
    std::vector<Tensor> dys;
    for (const Linear& l : cpu.linears)
      dys.push_back(representable(random_f32({kRows, l.weight().shape[0]}, rng), dtype));

    Results want;
    std::vector<Linear::Saved> saved;
    for (const Linear& l : cpu.linears) {
      Linear::Output out = l.forward(x, true);
      want.ys.push_back(out.out);
      saved.push_back(std::move(out.saved));
    }
    want.dx = cpu.linears[0].backward(std::move(saved[0]), dys[0]);
    for (size_t i = 1; i < 3; ++i) cpu.linears[i].backward_accumulate(std::move(saved[i]), dys[i], want.dx);
    want.grads = adapter_grads(cpu.store);

    for (const auto& p : cpu.store.all()) {
      p->value = to_gpu(p->value, dtype);
      p->grad = Tensor();
    }
    const SharedInputLinears qkv{&cpu.linears[0], &cpu.linears[1], &cpu.linears[2]};
    SharedInputLinears::Output out = qkv.forward(to_gpu(x, dtype), true);
    ASSERT_TRUE(out.saved.lora_ht.defined());
    std::vector<Tensor> gdys;
    for (const Tensor& dy : dys) gdys.push_back(to_gpu(dy, dtype));
    Results got{out.out, qkv.backward(std::move(out.saved), gdys), adapter_grads(cpu.store)};

    const double rtol = rtol_for(dtype);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(close_to(got.ys[i], want.ys[i], rtol)) << "y" << i;
    EXPECT_TRUE(close_to(got.dx, want.dx, rtol));
    ASSERT_EQ(got.grads.size(), 6u);
    for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(close_to(got.grads[i], want.grads[i], rtol)) << "adapter gradient " << i;
  }
}

}  // namespace
