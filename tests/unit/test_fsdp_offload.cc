// FSDP optimizer offload (train.accelerator.fsdp_config.offload): where the masters, gradients and compute copies
// live, what it costs in host memory, the chunk stream of the optimizer step, and steps with AdamW that give the same
// bits as without offload, in one process and on two MPI ranks (FsdpOffloadTwoRanks: ctest fsdp_offload_2ranks runs
// mpirun -np 2 veomni_unit_tests --gtest_filter='FsdpOffload*'; in a single process those skip). The host AdamW loop
// and the host gradient norm are checked here against the ops they stand in for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "kernels/cpu/gpu_order_sums.h"
#include "kernels/cpu/threads.h"
#include "kernels/ops.h"
#include "optim/adamw.h"
#include "optim/offload_stream.h"
#include "parallel/fsdp.h"
#include "tests/common/fsdp_synthetic_store.h"
#include "test_ckpt_util.h"

namespace veomni {
namespace {

using test::first_difference;
using test::host_floats;
using test::one_rank_mesh;
using testing::synthetic_store;

std::shared_ptr<Communicator> two_rank_world() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size || std::string(size) != "2") return nullptr;
  static const bool ready = [] {
    mpi_initialize(nullptr, nullptr);
    std::atexit(mpi_finalize);
    return true;
  }();
  static_cast<void>(ready);
  return mpi_world();
}

// The trainer's use of Fsdp and AdamW: zero, micro-batches through the hooks, wait, a clipped AdamW step over the
// shards (offloaded: through the chunk stream, which refreshes the compute copies). Records every value a request
// handed out and every trainable shard's gradient, master and moments. chunk_elements: the offload stream's chunk
// (0: default). frozen: parameters held as a LoRA base is (no optimizer slot; backward adds them no gradient).
class OptimizerRun {
 public:
  OptimizerRun(const DeviceMesh& mesh, DType compute, bool offload, int64_t chunk_elements = 0,
               const std::vector<std::string>& frozen = {}, DType moments = DType::F32)
      : store_(synthetic_store(mesh, Device::cpu(), frozen)),
        fsdp_(*store_, mesh, compute, DType::F32, true, offload),
        adamw_(AdamWOptions{1e-2, 0.9, 0.95, 1e-8, 0.1, {}, moments}),
        world_(mesh.world),
        rank_(mesh.rank) {
    if (chunk_elements > 0) fsdp_.set_offload_chunk_elements(chunk_elements);
    for (ParamShard& s : fsdp_.shards())
      if (!s.frozen()) adamw_.add_slot(s.param->name, s.master, &s.grad, fsdp_.optimizer_target(s));
  }

  Fsdp& fsdp() { return fsdp_; }
  AdamW& adamw() { return adamw_; }
  ParamStore& store() { return *store_; }
  const std::vector<std::vector<float>>& record() const { return record_; }

  void step(int step, int micro_batch_count) {
    fsdp_.zero_grads();
    std::vector<ParamGroup>& groups = store_->groups();
    for (int m = 0; m < micro_batch_count; ++m) {
      for (ParamGroup& g : groups) {
        fsdp_.before_forward(g);
        read_values(g);
        fsdp_.after_forward(g);
      }
      for (size_t i = groups.size(); i-- > 0;) {
        fsdp_.before_backward(groups[i]);
        read_values(groups[i]);
        add_gradients(groups[i], step, m);
        fsdp_.after_backward(groups[i]);
      }
    }
    fsdp_.wait_for_gradients();
    std::vector<const Tensor*> grads;
    for (const ParamShard& s : fsdp_.shards())
      if (!s.frozen()) grads.push_back(&s.grad);
    std::vector<double> total{ops::sum_squares_multi(grads)};
    world_->allreduce_sum(total);
    adamw_.step(1e-2, static_cast<float>(std::min(1.0, 0.05 / (std::sqrt(total[0]) + 1e-6))));
    record_.push_back({static_cast<float>(total[0])});
    size_t slot = 0;
    for (const ParamShard& s : fsdp_.shards()) {
      if (s.frozen()) {
        record_.push_back(host_floats(s.frozen_values));
        continue;
      }
      record_.push_back(host_floats(s.grad));
      record_.push_back(host_floats(s.master));
      record_.push_back(host_floats(adamw_.slots()[slot].exp_avg));
      record_.push_back(host_floats(adamw_.slots()[slot].exp_avg_sq));
      ++slot;
    }
  }

 private:
  void read_values(const ParamGroup& g) {
    for (const Parameter* p : g.params) record_.push_back(host_floats(p->value));
  }

  // Rank- and value-dependent gradients accumulated as backward does (into whatever gradient the hooks attached).
  void add_gradients(const ParamGroup& g, int step, int micro_batch) {
    for (Parameter* p : g.params) {
      if (!p->trainable) continue;  // backward skips a frozen weight's gradient
      if (!p->grad.defined()) p->grad = Tensor::zeros(p->local_shape(), DType::F32, p->value.device());
      const std::vector<float> value = host_floats(p->value);
      std::vector<float> d(value.size());
      for (size_t k = 0; k < d.size(); ++k)
        d[k] = 0.3f * value[k] + 0.01f * std::cos(0.91f * static_cast<float>(k) + 1.7f * static_cast<float>(micro_batch) +
                                                  2.3f * static_cast<float>(rank_) + 0.3f * static_cast<float>(step));
      ops::add_(p->grad, Tensor::from_vector(d, p->local_shape()).to(p->grad.device()));
    }
  }

  std::unique_ptr<ParamStore> store_;
  Fsdp fsdp_;
  AdamW adamw_;
  std::shared_ptr<Communicator> world_;
  int64_t rank_;
  std::vector<std::vector<float>> record_;
};

TEST(FsdpOffload, MastersOnTheHostGradientsAndComputeCopiesOnTheComputeDevice) {
  const DeviceMesh mesh = one_rank_mesh();
  for (DType compute : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(compute));
    OptimizerRun off(mesh, compute, false), on(mesh, compute, true);
    EXPECT_FALSE(off.fsdp().offload());
    EXPECT_TRUE(on.fsdp().offload());
    EXPECT_TRUE(on.fsdp().state_device().is_cpu());
    EXPECT_TRUE(on.adamw().offloaded());
    EXPECT_FALSE(off.adamw().offloaded());
    for (size_t i = 0; i < on.fsdp().shards().size(); ++i) {
      const ParamShard& s = on.fsdp().shards()[i];
      SCOPED_TRACE(s.param->name);
      // An f32 run of one rank aliases value and grad to master and grad without offload, never with it: the GPU
      // must not compute on host memory.
      EXPECT_EQ(off.fsdp().shards()[i].aliased, compute == DType::F32);
      EXPECT_FALSE(s.aliased);
      EXPECT_TRUE(s.master.device().is_cpu());
      EXPECT_EQ(s.grad.device(), on.fsdp().compute_device());
      ASSERT_TRUE(s.compute.defined());
      EXPECT_EQ(s.compute.dtype(), compute);
      EXPECT_EQ(s.compute.numel(), s.shard_numel);
      EXPECT_EQ(host_floats(s.compute), host_floats(s.master.to_dtype(compute)));
      // Without offload a 16-bit compute dtype keeps compute copies too (written by the optimizer's step); f32
      // computes from the masters.
      EXPECT_EQ(off.fsdp().shards()[i].compute.defined(), compute != DType::F32);
      EXPECT_EQ(on.adamw().slots()[i].compute.raw_data(), s.compute.raw_data());
      if (compute != DType::F32) {
        EXPECT_EQ(off.adamw().slots()[i].compute.raw_data(), off.fsdp().shards()[i].compute.raw_data());
      } else {
        EXPECT_FALSE(off.adamw().slots()[i].compute.defined());
      }
    }
  }
  // The hooks hand out views of the compute copies, and backward of a group of one accumulates straight into the
  // shard's gradient on the compute device, as without offload.
  OptimizerRun on(mesh, DType::BF16, true);
  ParamGroup& layer = on.store().groups()[1];
  const ParamShard& w = on.fsdp().shards()[1];
  ASSERT_EQ(w.param->name, "layers.0.w");
  on.fsdp().zero_grads();
  for (const ParamShard& s : on.fsdp().shards())
    EXPECT_FALSE(s.grad.defined()) << s.param->name << ": no gradient is kept between steps";
  on.fsdp().before_backward(layer);
  EXPECT_EQ(w.param->value.raw_data(), w.compute.raw_data());
  ASSERT_TRUE(w.grad.defined());
  EXPECT_EQ(w.param->grad.raw_data(), w.grad.raw_data());
  ops::fill_(w.param->grad, 0.5f);
  on.fsdp().after_backward(layer);
  on.fsdp().wait_for_gradients();
  EXPECT_EQ(ops::sum(w.grad), 0.5 * 35);
  // Unwritten gradients read as zeros.
  on.fsdp().zero_grads();
  on.fsdp().wait_for_gradients();
  EXPECT_EQ(ops::sum_squares(w.grad), 0.0);
}

// A store of one group with `scale` times the elements of a base shape (odd sizes: padded shards).
std::unique_ptr<ParamStore> scaled_store(int64_t scale) {
  auto store = std::make_unique<ParamStore>();
  store->begin_group("layer");
  for (const Shape& shape : {Shape{13 * scale, 7}, Shape{5 * scale}, Shape{3, 11 * scale}}) {
    Parameter* p = store->add(fmt::format("p{}", store->all().size()), shape);
    p->value = Tensor::full<float>(shape, 0.5f);
  }
  return store;
}

// Offload holds 12 bytes a parameter in host memory (f32 master, two f32 moments) and a ring of transfer buffers of
// at most a fixed size (smaller for a model smaller than one chunk); the gradients are on the compute device and
// released between steps (no host buffer of the model's size beyond the masters and moments).
TEST(FsdpOffload, HostBytesAreTwelveAParameterPlusABoundedRing) {
  const DeviceMesh mesh = one_rank_mesh();
  // Two f32 gradient chunks and two bf16 chunks of the default size.
  const int64_t bound = 2 * OffloadStream::kDefaultChunkElements * (4 + 2);
  EXPECT_EQ(Fsdp(*scaled_store(1), mesh, DType::BF16, DType::F32, true, false).offload_host_bytes(), 0);
  // 129 elements a unit of scale: the last model is larger than one chunk.
  for (int64_t scale : {int64_t{1}, int64_t{40}, int64_t{900}, int64_t{70000}}) {
    SCOPED_TRACE(fmt::format("scale {}", scale));
    const std::unique_ptr<ParamStore> store = scaled_store(scale);
    Fsdp fsdp(*store, mesh, DType::BF16, DType::F32, true, true);
    AdamW adamw(AdamWOptions{});
    int64_t elements = 0;
    for (ParamShard& s : fsdp.shards()) {
      adamw.add_slot(s.param->name, s.master, &s.grad, fsdp.optimizer_target(s));
      elements += s.shard_numel;
    }
    const int64_t host = fsdp.offload_host_bytes() + adamw.moment_bytes();
    EXPECT_EQ(host - 12 * elements, fsdp.offload_buffer_bytes()) << "beyond 12 bytes a parameter: the ring only";
    EXPECT_GT(fsdp.offload_buffer_bytes(), 0);
    EXPECT_LE(fsdp.offload_buffer_bytes(), bound);
    if (elements > OffloadStream::kDefaultChunkElements) {
      EXPECT_EQ(fsdp.offload_buffer_bytes(), bound);
    }
    fsdp.zero_grads();
    for (const ParamShard& s : fsdp.shards()) {
      EXPECT_TRUE(s.master.is_cpu());
      EXPECT_FALSE(s.grad.defined()) << s.param->name;
    }
  }
}

// The stream covers every element of every item once, in order, in chunks no larger than its buffers: large items
// span chunks, small ones share one. The host sees each piece's gradient, and the compute copies end up the cast of
// the masters as the host left them.
TEST(FsdpOffload, StreamCoversEveryElementInChunks) {
  for (DType compute : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(compute));
    OffloadStream stream(Device::cpu(), compute, 100);  // rounded up to 128
    EXPECT_EQ(stream.chunk_elements(), 128);
    const std::vector<int64_t> sizes = {1, 300, 0, 127, 128, 5, 64, 129};
    std::vector<Tensor> masters, grads;
    std::vector<OffloadStream::Item> items;
    for (size_t i = 0; i < sizes.size(); ++i) {
      masters.push_back(test::random_tensor({sizes[i]}, 10 + i));
      grads.push_back(test::random_tensor({sizes[i]}, 50 + i));
    }
    for (size_t i = 0; i < sizes.size(); ++i)
      items.push_back({masters[i], Tensor::zeros({sizes[i]}, compute), i % 3 == 1 ? nullptr : &grads[i]});
    std::vector<std::vector<int>> seen(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) seen[i].assign(static_cast<size_t>(sizes[i]), 0);
    int chunks = 0;
    size_t last_item = 0;
    int64_t last_end = 0;
    stream.run(items, [&](const std::vector<OffloadStream::Piece>& pieces) {
      ++chunks;
      int64_t in_chunk = 0;
      for (const OffloadStream::Piece& piece : pieces) {
        ASSERT_GT(piece.length, 0);
        EXPECT_TRUE(piece.item > last_item || (piece.item == last_item && piece.begin == last_end)) << "in order";
        last_item = piece.item;
        last_end = piece.begin + piece.length;
        in_chunk += piece.length;
        EXPECT_EQ(piece.grad == nullptr, items[piece.item].grad == nullptr);
        float* master = masters[piece.item].data<float>();
        for (int64_t k = 0; k < piece.length; ++k) {
          ++seen[piece.item][static_cast<size_t>(piece.begin + k)];
          if (piece.grad) {
            EXPECT_EQ(piece.grad[k], grads[piece.item].data<float>()[piece.begin + k]);
          }
          master[piece.begin + k] += 1.0f;  // the host's work
        }
      }
      EXPECT_LE(in_chunk, stream.chunk_elements());
    });
    EXPECT_GE(chunks, 7);  // 1054 elements in chunks of 128
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(seen[i], std::vector<int>(static_cast<size_t>(sizes[i]), 1)) << "item " << i;
      EXPECT_EQ(host_floats(items[i].compute), host_floats(masters[i].to_dtype(compute))) << "item " << i;
    }
    EXPECT_EQ(stream.host_bytes(), 2 * 128 * (4 + static_cast<int64_t>(dtype_size(compute))));
  }
}

TEST(FsdpOffload, MastersReachTheGathersThroughMastersUpdated) {
  const DeviceMesh mesh = one_rank_mesh();
  OptimizerRun run(mesh, DType::BF16, true);
  ParamShard& s = run.fsdp().shards()[1];
  ParamGroup& layer = run.store().groups()[1];
  ops::fill_(s.master, 3.0f);
  run.fsdp().before_forward(layer);
  EXPECT_NE(host_floats(s.param->value)[0], 3.0f) << "the copy is refreshed only when told";
  run.fsdp().after_forward(layer);
  run.fsdp().masters_updated();
  run.fsdp().before_forward(layer);
  EXPECT_EQ(host_floats(s.param->value), std::vector<float>(35, 3.0f));
  run.fsdp().after_forward(layer);
}

// Without offload, a bf16 run keeps compute copies on the compute device: the optimizer's step writes them (the bits
// of a cast of the updated masters), the hooks hand out views of them (no cast per request), and masters_updated()
// refreshes them after another change of the masters.
TEST(FsdpComputeCopies, StepWritesTheCastOfTheUpdatedMasters) {
  const DeviceMesh mesh = one_rank_mesh();
  OptimizerRun run(mesh, DType::BF16, false);
  EXPECT_TRUE(run.fsdp().has_compute_copies());
  int64_t elements = 0;
  for (const ParamShard& s : run.fsdp().shards()) elements += s.shard_numel;
  EXPECT_GE(run.fsdp().compute_copy_bytes(), 2 * elements);
  for (int step = 0; step < 3; ++step) {
    run.step(step, 2);
    for (const ParamShard& s : run.fsdp().shards()) {
      SCOPED_TRACE(fmt::format("step {} {}", step, s.param->name));
      const Tensor cast = s.master.to_dtype(DType::BF16);
      EXPECT_EQ(std::memcmp(s.compute.raw_data(), cast.raw_data(), cast.nbytes()), 0);
    }
  }
  ParamShard& s = run.fsdp().shards()[1];
  ParamGroup& layer = run.store().groups()[1];
  run.fsdp().before_forward(layer);
  EXPECT_EQ(s.param->value.raw_data(), s.compute.raw_data()) << "a group of one computes from the copy itself";
  run.fsdp().after_forward(layer);
  ops::fill_(s.master, 3.0f);
  run.fsdp().masters_updated();
  run.fsdp().before_forward(layer);
  EXPECT_EQ(host_floats(s.param->value), std::vector<float>(35, 3.0f));
  run.fsdp().after_forward(layer);
  EXPECT_FALSE(OptimizerRun(mesh, DType::F32, false).fsdp().has_compute_copies());
}

// Chunks of 64 elements: shards cross chunk boundaries and small ones share a chunk.
TEST(FsdpOffload, StepsMatchWithoutOffloadBitForBit) {
  const DeviceMesh mesh = one_rank_mesh();
  for (int64_t chunk : {int64_t{0}, int64_t{64}}) {
    for (DType compute : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(fmt::format("{} chunk {}", dtype_name(compute), chunk));
      OptimizerRun off(mesh, compute, false), on(mesh, compute, true, chunk);
      for (int step = 0; step < 3; ++step) {
        off.step(step, 2);
        on.step(step, 2);
      }
      EXPECT_EQ(first_difference(on.record(), off.record()), "");
    }
  }
}

// LoRA: the adapters' masters and moments are offloaded, the frozen base stays in the compute dtype on the compute
// device, untouched by the step; the same bits as without offload. The frozen parameters include the tied embedding
// and an expert tensor.
const std::vector<std::string> kFrozenBase = {"embed", "layers.0.w", "layers.1.experts", "norm"};

void expect_lora_offload_matches(const DeviceMesh& mesh) {
  for (DType compute : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(compute));
    OptimizerRun off(mesh, compute, false, 0, kFrozenBase), on(mesh, compute, true, 64, kFrozenBase);
    int64_t trainable = 0;
    for (const ParamShard& s : on.fsdp().shards()) {
      SCOPED_TRACE(s.param->name);
      if (s.frozen()) {
        EXPECT_EQ(s.frozen_values.device(), on.fsdp().compute_device());
        EXPECT_EQ(s.frozen_values.dtype(), compute);
        EXPECT_FALSE(s.master.defined());
        EXPECT_FALSE(s.compute.defined()) << "a frozen shard has no compute copy: its slice is the gathers' source";
        EXPECT_FALSE(on.fsdp().optimizer_target(s).enabled());
        continue;
      }
      ++trainable;
      EXPECT_TRUE(s.master.is_cpu());
      EXPECT_TRUE(s.compute.defined());
    }
    EXPECT_EQ(static_cast<int64_t>(on.adamw().slots().size()), trainable);
    EXPECT_TRUE(on.adamw().offloaded());
    const std::vector<float> frozen_before = host_floats(on.fsdp().shards()[0].frozen_values);
    for (int step = 0; step < 3; ++step) {
      off.step(step, 2);
      on.step(step, 2);
    }
    EXPECT_EQ(first_difference(on.record(), off.record()), "");
    EXPECT_EQ(host_floats(on.fsdp().shards()[0].frozen_values), frozen_before) << "the frozen base is not stepped";
    int64_t elements = 0;
    for (const ParamShard& s : on.fsdp().shards())
      if (!s.frozen()) elements += s.shard_numel;
    EXPECT_EQ(on.fsdp().offload_host_bytes() + on.adamw().moment_bytes() - on.fsdp().offload_buffer_bytes(),
              12 * elements)
        << "12 bytes a trainable parameter in host memory, nothing for the frozen base";
  }
}

TEST(FsdpOffload, LoraStepsMatchWithoutOffloadBitForBit) { expect_lora_offload_matches(one_rank_mesh()); }

TEST(FsdpOffloadTwoRanks, LoraStepsMatchWithoutOffloadBitForBit) {
  const std::shared_ptr<Communicator> world = two_rank_world();
  if (!world) GTEST_SKIP() << "runs on two MPI ranks: ctest -R fsdp_offload_2ranks";
  for (int64_t ep : {1, 2}) {
    SCOPED_TRACE(fmt::format("ep {}", ep));
    expect_lora_offload_matches(build_device_mesh(world, 1, ep));
  }
}

// anyprecision_adamw's bf16 moments: 8 bytes a parameter in host memory instead of 12, and the streamed host step
// gives the device step's bits.
TEST(FsdpOffload, Bf16MomentsStepMatchWithoutOffloadBitForBit) {
  const DeviceMesh mesh = one_rank_mesh();
  for (DType compute : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(compute));
    OptimizerRun off(mesh, compute, false, 0, {}, DType::BF16), on(mesh, compute, true, 64, {}, DType::BF16);
    int64_t elements = 0;
    for (const ParamShard& s : on.fsdp().shards()) elements += s.shard_numel;
    EXPECT_EQ(on.adamw().moment_bytes(), 4 * elements);
    EXPECT_EQ(on.fsdp().offload_host_bytes() + on.adamw().moment_bytes() - on.fsdp().offload_buffer_bytes(),
              8 * elements);
    EXPECT_EQ(on.adamw().slots()[0].exp_avg.dtype(), DType::BF16);
    for (int step = 0; step < 3; ++step) {
      off.step(step, 2);
      on.step(step, 2);
    }
    EXPECT_EQ(first_difference(on.record(), off.record()), "");
  }
}

TEST(FsdpOffloadTwoRanks, StepsMatchWithoutOffloadBitForBit) {
  const std::shared_ptr<Communicator> world = two_rank_world();
  if (!world) GTEST_SKIP() << "runs on two MPI ranks: ctest -R fsdp_offload_2ranks";
  for (int64_t ep : {1, 2}) {
    for (DType compute : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(fmt::format("ep {} {}", ep, dtype_name(compute)));
      const DeviceMesh mesh = build_device_mesh(world, 1, ep);
      OptimizerRun off(mesh, compute, false), on(mesh, compute, true, 64);
      for (int step = 0; step < 3; ++step) {
        off.step(step, 2);
        on.step(step, 2);
      }
      EXPECT_EQ(first_difference(on.record(), off.record()), "");
      EXPECT_GT(on.fsdp().overlap_stats().deferred_reductions, 0) << "reductions are summed one group later";
    }
  }
}

// The host loop steps every chunk of every slot in one parallel pass: whatever the thread count, the bits are those
// of scaling each gradient and stepping each slot alone.
TEST(OpsAdamw, MultiAcrossSlotsAndThreadsEqualsOneSlotAtATime) {
  const std::vector<int64_t> sizes = {1, 3, 16383, 16384, 16385, 50001, 7};
  for (int threads : {1, 2}) {
    SCOPED_TRACE(fmt::format("{} threads", threads));
    ops::cpu::set_num_threads(threads);
    std::vector<Tensor> multi[4], single[4];
    for (size_t i = 0; i < sizes.size(); ++i)
      for (int k = 0; k < 4; ++k) {
        Tensor t = test::random_tensor({sizes[i]}, 100 * i + static_cast<uint64_t>(k));
        if (k == 3) ops::scale_(t, 0.0f);  // exp_avg_sq starts at zero, as AdamW's does
        multi[k].push_back(t);
        single[k].push_back(t.to(Device::cpu()));
      }
    for (int step = 1; step <= 2; ++step) {
      std::vector<ops::AdamWTensors> slots;
      for (size_t i = 0; i < sizes.size(); ++i)
        slots.push_back({&multi[0][i], &multi[1][i], &multi[2][i], &multi[3][i], i % 2 ? 0.0 : 0.1});
      ops::adamw_step_multi(slots, 1e-3, 0.9, 0.999, 1e-8, step, 0.25f);
      for (size_t i = 0; i < sizes.size(); ++i) {
        Tensor scaled = single[1][i].to(Device::cpu());
        ops::scale_(scaled, 0.25f);
        ops::adamw_step(single[0][i], scaled, single[2][i], single[3][i], 1e-3, 0.9, 0.999, 1e-8, i % 2 ? 0.0 : 0.1,
                        step);
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i)
      for (int k : {0, 2, 3})
        EXPECT_EQ(std::memcmp(multi[k][i].raw_data(), single[k][i].raw_data(), multi[k][i].nbytes()), 0)
            << "slot " << i << " tensor " << k;
  }
  ops::cpu::set_num_threads(1);
}

TEST(OpsMultiTensor, SumSquaresInGpuOrderIsTheSumOfSquares) {
  // Small integers: every partial sum is exact, so any order gives the same double.
  std::vector<Tensor> ints;
  double expected = 0.0;
  for (int64_t n : {int64_t{5}, int64_t{16384}, int64_t{40000}, int64_t{1} << 21}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t k = 0; k < v.size(); ++k) {
      v[k] = static_cast<float>(static_cast<int64_t>(k % 7) - 3);
      expected += static_cast<double>(v[k]) * v[k];
    }
    ints.push_back(Tensor::from_vector(v, {n}));
  }
  std::vector<const Tensor*> xs;
  for (const Tensor& t : ints) xs.push_back(&t);
  EXPECT_EQ(ops::cpu::sum_squares_multi_gpu_order(xs), expected);
  EXPECT_EQ(ops::cpu::sum_squares_multi_gpu_order({}), 0.0);
  // Random values: the f64 sum up to rounding; a CPU order keeps the CPU's own sum.
  const Tensor r = test::random_tensor({100003}, 5);
  EXPECT_NEAR(ops::cpu::sum_squares_multi_gpu_order({&r}), ops::sum_squares(r), 1e-9);
  EXPECT_EQ(ops::sum_squares_multi_as_on({&r}, Device::cpu()), ops::sum_squares_multi({&r}));
  EXPECT_EQ(ops::sum_squares_multi_as_on({&r}, Device::cuda(0)), ops::cpu::sum_squares_multi_gpu_order({&r}));
}

}  // namespace
}  // namespace veomni
