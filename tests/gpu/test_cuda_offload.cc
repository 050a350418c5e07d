// GPU tests of what optimizer offload relies on: the host AdamW and the host gradient norm give the CUDA kernels'
// bits, the host cast to bf16 gives the device cast's, and Fsdp with offload keeps its state in host memory.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "dist/device_mesh.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
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

// One rank: the masters and gradients are host tensors, the gathered values are views of the compute copies on the
// GPU, and a change of the masters reaches the next gather only through masters_updated().
TEST_F(CudaOffload, FsdpKeepsItsStateInHostMemory) {
  ParamStore store;
  store.begin_group("layer");
  Parameter* w = store.add("w", {300, 7});
  w->value = Tensor::full<float>({300, 7}, 0.25f).to(gpu());
  const DeviceMesh mesh = one_rank_mesh();
  Fsdp fsdp(store, mesh, DType::BF16, DType::F32, true, true);
  const ParamShard& s = fsdp.shards().front();
  EXPECT_TRUE(s.master.device().is_cpu());
  EXPECT_TRUE(s.grad.device().is_cpu());
  EXPECT_TRUE(s.compute.device().is_cuda());
  EXPECT_EQ(s.compute.dtype(), DType::BF16);
  ParamGroup& group = store.groups().front();
  fsdp.before_forward(group);
  EXPECT_TRUE(w->value.device().is_cuda());
  EXPECT_EQ(w->value.raw_data(), s.compute.raw_data());
  fsdp.after_forward(group);
  fsdp.before_backward(group);
  EXPECT_TRUE(w->grad.device().is_cuda()) << "backward accumulates on the GPU";
  ops::fill_(w->grad, 2.0f);
  fsdp.after_backward(group);
  fsdp.wait_for_gradients();
  EXPECT_EQ(ops::sum(s.grad), 2.0 * 2100);
  ops::fill_(fsdp.shards().front().master, 1.5f);
  fsdp.masters_updated();
  EXPECT_EQ(ops::sum(to_host(s.compute).to_dtype(DType::F32)), 1.5 * 2100);
}

}  // namespace
