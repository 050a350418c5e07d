// GPU tests of optimizer offload: the host AdamW and the host gradient norm give the CUDA kernels' bits, the host
// cast to bf16 gives the device cast's, Fsdp with offload keeps its masters in host memory, the streamed step gives
// the device step's bits, and what offload holds on the GPU is the compute copies and the f32 gradients (6 bytes a
// parameter in bf16) against 16 without it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "dist/device_mesh.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "optim/adamw.h"
#include "parallel/fsdp.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaOffload : public CudaTest {};

// A group of one process: every collective is the identity.
class OneRank final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "one rank"; }
  void allreduce_sum(Tensor&) override {}
  void allreduce_sum(std::vector<double>&) override {}
  void allreduce_sum(std::vector<int64_t>&) override {}
  void allreduce_max(std::vector<double>&) override {}
  void allgather(const Tensor& local, Tensor& out) override { out.copy_from(local); }
  void allgather(const std::vector<int64_t>& local, std::vector<int64_t>& out) override { out = local; }
  void reduce_scatter_sum(const Tensor& in, Tensor& out) override { out.copy_from(in); }
  void all_to_all_rows(const Tensor& send, const std::vector<int64_t>&, Tensor& recv,
                       const std::vector<int64_t>&) override {
    recv.copy_from(send);
  }
  void broadcast(Tensor&, int) override {}
  void broadcast(std::string&, int) override {}
  void barrier() override {}
};

DeviceMesh one_rank_mesh() {
  DeviceMesh mesh;
  mesh.shape = MeshShape{1, 1, 1};
  mesh.rank = 0;
  mesh.world = mesh.sp = mesh.ep = mesh.ep_fsdp = std::make_shared<OneRank>();
  return mesh;
}

// Sizes around the 16Ki-element chunk of the multi-tensor kernels, and tiny ones.
const std::vector<int64_t> kSlotSizes = {1, 5, 16383, 16384, 16385, 40000, 100003};

TEST_F(CudaOffload, HostAdamWEqualsTheCudaKernelBitForBit) {
  std::mt19937 rng(7);
  std::vector<Tensor> host[4], device[4];  // param, grad, exp_avg, exp_avg_sq
  for (int64_t n : kSlotSizes)
    for (int k = 0; k < 4; ++k) {
      Tensor t = random_f32({n}, rng, k == 3 ? 0.0f : -1.0f, 1.0f);
      host[k].push_back(t);
      device[k].push_back(to_gpu(t));
    }
  for (int step = 1; step <= 3; ++step) {
    std::vector<ops::AdamWTensors> on_host, on_device;
    for (size_t i = 0; i < kSlotSizes.size(); ++i) {
      const double decay = i % 2 ? 0.0 : 0.1;
      on_host.push_back({&host[0][i], &host[1][i], &host[2][i], &host[3][i], decay});
      on_device.push_back({&device[0][i], &device[1][i], &device[2][i], &device[3][i], decay});
    }
    // A clipping scale below one, as after a large gradient.
    ops::adamw_step_multi(on_host, 3e-4, 0.9, 0.95, 1e-8, step, 0.37f);
    ops::adamw_step_multi(on_device, 3e-4, 0.9, 0.95, 1e-8, step, 0.37f);
  }
  for (size_t i = 0; i < kSlotSizes.size(); ++i)
    for (int k : {0, 2, 3}) EXPECT_TRUE(bitwise_equal(device[k][i], host[k][i])) << "slot " << i << " tensor " << k;
}

TEST_F(CudaOffload, HostGradientNormEqualsTheCudaKernelBitForBit) {
  std::mt19937 rng(8);
  std::vector<Tensor> host, device;
  for (int64_t n : kSlotSizes) {
    host.push_back(random_f32({n}, rng, -3.0f, 3.0f));
    device.push_back(to_gpu(host.back()));
  }
  // Many chunks, so that the partials' block sums more than one value per thread.
  host.push_back(random_f32({int64_t{1} << 25}, rng, -1.0f, 1.0f));
  device.push_back(to_gpu(host.back()));
  std::vector<const Tensor*> h, d;
  for (size_t i = 0; i < host.size(); ++i) {
    h.push_back(&host[i]);
    d.push_back(&device[i]);
  }
  const double on_device = ops::sum_squares_multi(d);
  EXPECT_EQ(ops::sum_squares_multi_as_on(h, gpu()), on_device);
  EXPECT_EQ(ops::sum_squares_multi_as_on(d, gpu()), on_device);  // device tensors: the kernel itself
}

TEST_F(CudaOffload, HostCastToBf16EqualsTheDeviceCast) {
  std::mt19937 rng(9);
  const Tensor x = random_f32({100003}, rng, -50.0f, 50.0f);
  Tensor on_host = Tensor::empty({x.numel()}, DType::BF16);
  ops::cast(x, on_host);
  const Tensor gx = to_gpu(x);
  Tensor on_device = Tensor::empty({x.numel()}, DType::BF16, gpu());
  ops::cast(gx, on_device);
  EXPECT_TRUE(bitwise_equal(on_device, on_host));
}

// One rank: the masters are host tensors, the gradients and the gathered values (views of the compute copies) are on
// the GPU, and a change of the masters reaches the next gather only through masters_updated().
TEST_F(CudaOffload, FsdpKeepsItsMastersInHostMemory) {
  ParamStore store;
  store.begin_group("layer");
  Parameter* w = store.add("w", {300, 7});
  w->value = Tensor::full<float>({300, 7}, 0.25f).to(gpu());
  const DeviceMesh mesh = one_rank_mesh();
  Fsdp fsdp(store, mesh, DType::BF16, DType::F32, true, true);
  const ParamShard& s = fsdp.shards().front();
  EXPECT_TRUE(s.master.device().is_cpu());
  EXPECT_TRUE(s.grad.device().is_cuda());
  EXPECT_TRUE(s.compute.device().is_cuda());
  EXPECT_EQ(s.compute.dtype(), DType::BF16);
  ParamGroup& group = store.groups().front();
  fsdp.zero_grads();
  fsdp.before_forward(group);
  EXPECT_TRUE(w->value.device().is_cuda());
  EXPECT_EQ(w->value.raw_data(), s.compute.raw_data());
  fsdp.after_forward(group);
  fsdp.before_backward(group);
  EXPECT_TRUE(w->grad.device().is_cuda()) << "backward accumulates on the GPU";
  ops::fill_(w->grad, 2.0f);
  fsdp.after_backward(group);
  fsdp.wait_for_gradients();
  EXPECT_TRUE(s.grad.device().is_cuda());
  EXPECT_EQ(ops::sum(s.grad), 2.0 * 2100);
  ops::fill_(fsdp.shards().front().master, 1.5f);
  fsdp.masters_updated();
  EXPECT_EQ(ops::sum(to_host(s.compute)), 1.5 * 2100);
}

// A one-group store on the GPU: tensors of 2^23 and 2^22 elements (whole allocator bins: the memory figures below are
// exact) and small odd ones; `elements` counts them all.
std::unique_ptr<ParamStore> gpu_store(std::mt19937& rng, int64_t& elements) {
  auto store = std::make_unique<ParamStore>();
  store->begin_group("layer");
  elements = 0;
  for (const Shape& shape : {Shape{2048, 4096}, Shape{1024, 4096}, Shape{1024, 4096}, Shape{4096}, Shape{7, 3}}) {
    Parameter* p = store->add(fmt::format("p{}", store->all().size()), shape);
    p->value = to_gpu(random_f32(shape, rng));
    elements += shape_numel(shape);
  }
  return store;
}

// One training step the trainer's way: zero, backward of the group adding `seed`-dependent gradients (a slice at a
// time: the temporaries stay small), the gradient norm on the GPU, a clipped AdamW step (offloaded: streamed, and the
// compute copies refreshed by it).
void train_step(Fsdp& fsdp, AdamW& adamw, ParamStore& store, int seed) {
  fsdp.zero_grads();
  ParamGroup& group = store.groups().front();
  fsdp.before_forward(group);
  fsdp.after_forward(group);
  fsdp.before_backward(group);
  std::mt19937 rng(static_cast<unsigned>(seed));
  constexpr int64_t kSlice = int64_t{1} << 18;
  for (Parameter* p : group.params) {
    const Tensor flat = p->grad.view({p->grad.numel()});
    for (int64_t begin = 0; begin < flat.numel(); begin += kSlice) {
      Tensor part = flat.slice(begin, std::min(flat.numel(), begin + kSlice));
      ops::add_(part, to_gpu(random_f32({part.numel()}, rng, -0.5f, 0.5f)));
    }
  }
  fsdp.after_backward(group);
  fsdp.wait_for_gradients();
  std::vector<const Tensor*> grads;
  for (const ParamShard& s : fsdp.shards()) grads.push_back(&s.grad);
  const double norm = std::sqrt(ops::sum_squares_multi(grads));
  adamw.step(3e-4, static_cast<float>(std::min(1.0, 100.0 / (norm + 1e-6))));
}

// The streamed host step against the GPU step, in chunks of the default size and in small ones (shards across chunk
// boundaries, several shards in one chunk): masters, moments and the compute copies the gathers send, bit for bit.
TEST_F(CudaOffload, StreamedStepEqualsTheDeviceStepBitForBit) {
  for (int64_t chunk : {int64_t{0}, int64_t{1} << 20}) {
    SCOPED_TRACE(fmt::format("chunk {}", chunk));
    std::mt19937 rng_off(11), rng_on(11);
    int64_t elements = 0;
    const std::unique_ptr<ParamStore> store_off = gpu_store(rng_off, elements);
    const std::unique_ptr<ParamStore> store_on = gpu_store(rng_on, elements);
    const DeviceMesh mesh = one_rank_mesh();
    Fsdp off(*store_off, mesh, DType::BF16, DType::F32, true, false);
    Fsdp on(*store_on, mesh, DType::BF16, DType::F32, true, true);
    if (chunk > 0) on.set_offload_chunk_elements(chunk);
    const AdamWOptions options{3e-4, 0.9, 0.95, 1e-8, 0.1};
    AdamW adam_off(options), adam_on(options);
    for (size_t i = 0; i < off.shards().size(); ++i) {
      adam_off.add_slot(off.shards()[i].param->name, off.shards()[i].master, &off.shards()[i].grad,
                        off.optimizer_target(off.shards()[i]));
      adam_on.add_slot(on.shards()[i].param->name, on.shards()[i].master, &on.shards()[i].grad,
                       on.optimizer_target(on.shards()[i]));
    }
    for (int step = 0; step < 3; ++step) {
      train_step(off, adam_off, *store_off, step);
      train_step(on, adam_on, *store_on, step);
    }
    for (size_t i = 0; i < off.shards().size(); ++i) {
      SCOPED_TRACE(off.shards()[i].param->name);
      EXPECT_TRUE(bitwise_equal(on.shards()[i].master, off.shards()[i].master));
      EXPECT_TRUE(bitwise_equal(adam_on.slots()[i].exp_avg, adam_off.slots()[i].exp_avg));
      EXPECT_TRUE(bitwise_equal(adam_on.slots()[i].exp_avg_sq, adam_off.slots()[i].exp_avg_sq));
      Tensor cast = Tensor::empty({off.shards()[i].shard_numel}, DType::BF16, gpu());
      ops::cast(off.shards()[i].master, cast);
      EXPECT_TRUE(bitwise_equal(on.shards()[i].compute, cast)) << "the copy the next gathers send";
    }
  }
}

// What each design holds on the GPU through a step (the caching allocator's peak over the step, from before the
// parameters exist): offload the bf16 compute copies (2 bytes a parameter) and the f32 gradients (4), nothing of the
// model's size for the streamed step; without offload the f32 masters, gradients and moments (16) and the bf16
// compute copies the step writes (2).
TEST_F(CudaOffload, GpuMemoryIsComputeCopiesAndGradients) {
  for (bool offload : {true, false}) {
    SCOPED_TRACE(offload ? "offload" : "no offload");
    backend::synchronize();
    const size_t base = backend::gpu_memory().allocated;
    std::mt19937 rng(12);
    int64_t elements = 0;
    size_t peak = 0, held = 0;
    {
      const std::unique_ptr<ParamStore> store = gpu_store(rng, elements);
      Fsdp fsdp(*store, one_rank_mesh(), DType::BF16, DType::F32, true, offload);
      AdamW adamw(AdamWOptions{});
      for (ParamShard& s : fsdp.shards()) adamw.add_slot(s.param->name, s.master, &s.grad, fsdp.optimizer_target(s));
      fsdp.zero_grads();
      backend::synchronize();
      held = backend::gpu_memory().allocated - base;  // between steps
      backend::reset_gpu_peak_memory();
      train_step(fsdp, adamw, *store, 1);
      backend::synchronize();
      peak = backend::gpu_memory().peak_allocated - base;
    }
    const auto per_parameter = [&](size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(elements); };
    std::printf("[ memory   ] %s: %.3f bytes a parameter on the GPU between steps, %.3f at the step's peak "
                "(%lld parameters)\n", offload ? "offload" : "no offload", per_parameter(held), per_parameter(peak),
                static_cast<long long>(elements));
    // The small tensors' padding and the gradients' temporaries (1 MiB) stay well under 0.1 byte a parameter.
    if (offload) {
      EXPECT_GE(per_parameter(held), 2.0);
      EXPECT_LT(per_parameter(held), 2.1) << "between steps: the bf16 compute copies only";
      EXPECT_GE(per_parameter(peak), 6.0);
      EXPECT_LT(per_parameter(peak), 6.1) << "at the step: the compute copies and the f32 gradients";
    } else {
      EXPECT_GE(per_parameter(held), 14.0) << "masters, moments and compute copies";
      EXPECT_GE(per_parameter(peak), 18.0) << "masters, gradients, moments and compute copies";
    }
  }
}

}  // namespace
