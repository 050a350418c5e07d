// FSDP communication overlap on two MPI ranks: prefetched gathers are issued and used, and neither wrong predictions
// nor deferred reductions change a bit against the blocking path. ctest runs these as fsdp_overlap_2ranks
// (tests/integration/fsdp_overlap.sh: mpirun -np 2 veomni_unit_tests --gtest_filter='FsdpOverlap*'; with
// VEOMNI_FSDP_TEST_DEVICE=cuda on one GPU per rank over NCCL); in a single process every test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "dist/nccl_communicator.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "test_ckpt_util.h"
#include "model/causal_lm.h"
#include "parallel/fsdp.h"
#include "tests/common/fsdp_synthetic_store.h"
#include "test_model_util.h"

namespace veomni {
namespace {

using test::first_difference;
using test::host_floats;
using test::one_rank_mesh;
using testing::synthetic_store;

// The device the tests run on: the CPU (MPI), or with VEOMNI_FSDP_TEST_DEVICE=cuda this rank's GPU (NCCL).
bool on_cuda() {
  const char* device = std::getenv("VEOMNI_FSDP_TEST_DEVICE");
  return device && std::string(device) == "cuda";
}

// This rank's GPU under VEOMNI_FSDP_TEST_DEVICE=cuda (the node-local rank, as veomni-train picks it).
int g_gpu = 0;

// The MPI world when this process is one of the two ranks of mpirun -np 2; null otherwise.
std::shared_ptr<Communicator> two_rank_gpu_world() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size || std::string(size) != "2") return nullptr;
  static const bool ready = [] {
    mpi_initialize(nullptr, nullptr);
    std::atexit(mpi_finalize);
    if (on_cuda() && backend::cuda_device_count() > 0) {
      g_gpu = mpi_local_rank();
      backend::use_cuda_device(g_gpu);
    }
    return true;
  }();
  static_cast<void>(ready);
  return mpi_world();
}

#define REQUIRE_TWO_RANKS(world)                                                                           \
  const std::shared_ptr<Communicator> world = two_rank_gpu_world();                                            \
  if (!world) GTEST_SKIP() << "runs on two MPI ranks: ctest -R fsdp_overlap_2ranks";                       \
  if (on_cuda() && backend::cuda_device_count() < 1) GTEST_SKIP() << "VEOMNI_FSDP_TEST_DEVICE=cuda without a GPU"

DeviceMesh overlap_test_mesh(const std::shared_ptr<Communicator>& world, int64_t ep) {
  DeviceMesh mesh = build_device_mesh(world, 1, ep);
  return on_cuda() ? with_nccl_groups(mesh) : mesh;
}

Device test_device() { return on_cuda() ? Device::cuda(g_gpu) : Device::cpu(); }

std::vector<int64_t> stats_vector(const FsdpOverlapStats& s) {
  return {s.requests, s.prefetch_hits, s.prefetch_misses, s.kept, s.on_demand, s.deferred_reductions};
}

FsdpOverlapStats operator-(const FsdpOverlapStats& a, const FsdpOverlapStats& b) {
  return {a.requests - b.requests,   a.prefetch_hits - b.prefetch_hits, a.prefetch_misses - b.prefetch_misses,
          a.kept - b.kept,           a.on_demand - b.on_demand,         a.deferred_reductions - b.deferred_reductions};
}

// Every rank must have decided the same: the stats are equal on both ranks.
void expect_same_on_every_rank(Communicator& world, const FsdpOverlapStats& stats) {
  const std::vector<int64_t> mine = stats_vector(stats);
  std::vector<int64_t> all;
  world.allgather(mine, all);
  ASSERT_EQ(all.size(), 2 * mine.size());
  EXPECT_EQ(std::vector<int64_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(mine.size())),
            std::vector<int64_t>(all.begin() + static_cast<std::ptrdiff_t>(mine.size()), all.end()));
}

// Drives Fsdp's hooks as a model does (forward embed, layers, head; backward head, layers, embed) and records every
// value a request handed out, and the shard gradients and masters of every step.
class SyntheticRun {
 public:
  // frozen: names of parameters marked trainable = false before FSDP takes them over.
  SyntheticRun(const DeviceMesh& mesh, DType compute, DType reduce, bool overlap,
               const std::vector<std::string>& frozen = {})
      : store_(synthetic_store(mesh, test_device(), frozen)),
        fsdp_(*store_, mesh, compute, reduce, overlap),
        rank_(mesh.rank) {}

  Fsdp& fsdp() { return fsdp_; }
  const std::vector<std::vector<float>>& record() const { return record_; }
  // Every value a request handed out, with its parameter's name.
  const std::vector<std::pair<std::string, std::vector<float>>>& handed_out() const { return handed_out_; }
  // What record_shards() recorded (each gradient, then master), with the parameter's name.
  const std::vector<std::pair<std::string, std::vector<float>>>& shard_records() const { return shard_records_; }

  void micro_batches(int step, int count) {
    std::vector<ParamGroup>& groups = store_->groups();
    for (int m = 0; m < count; ++m) {
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
  }

  // The trainer's step: zero, micro-batches, wait, then an update of the masters (so a value that outlived its step
  // would be caught by the next one).
  void step(int step, int micro_batch_count) {
    fsdp_.zero_grads();
    micro_batches(step, micro_batch_count);
    fsdp_.wait_for_gradients();
    record_shards();
    for (ParamShard& s : fsdp_.shards())
      if (!s.frozen()) ops::add_(s.master, s.grad, -0.5f);
    fsdp_.masters_updated();  // not an optimizer step: the compute copies follow by hand
  }

  // The trainable shards' gradients and masters (a frozen shard has neither).
  void record_shards() {
    for (const ParamShard& s : fsdp_.shards()) {
      if (s.frozen()) continue;
      record_.push_back(host_floats(s.grad));
      record_.push_back(host_floats(s.master));
      shard_records_.emplace_back(s.param->name, record_[record_.size() - 2]);
      shard_records_.emplace_back(s.param->name, record_.back());
    }
  }

 private:
  void read_values(const ParamGroup& g) {
    for (const Parameter* p : g.params) {
      record_.push_back(host_floats(p->value));
      handed_out_.emplace_back(p->name, record_.back());
    }
  }

  // Rank-dependent gradients, so that the reduction's sum matters; accumulated as backward does.
  void add_gradients(const ParamGroup& g, int step, int micro_batch) {
    for (Parameter* p : g.params) {
      if (!p->grad.defined()) p->grad = Tensor::zeros(p->local_shape(), DType::F32, test_device());
      std::vector<float> d(static_cast<size_t>(p->grad.numel()));
      for (size_t k = 0; k < d.size(); ++k)
        d[k] = 0.01f * std::cos(0.91f * static_cast<float>(k) + 1.7f * static_cast<float>(micro_batch) +
                                2.3f * static_cast<float>(rank_) + 0.3f * static_cast<float>(step) +
                                static_cast<float>(p->name.size()));
      ops::add_(p->grad, Tensor::from_vector(d, p->local_shape()).to(test_device()));
    }
  }

  std::unique_ptr<ParamStore> store_;
  Fsdp fsdp_;
  int64_t rank_;
  std::vector<std::vector<float>> record_;
  std::vector<std::pair<std::string, std::vector<float>>> handed_out_;
  std::vector<std::pair<std::string, std::vector<float>>> shard_records_;
};

struct Precision {
  DType compute;
  DType reduce;
  int64_t ep;
};

void PrintTo(const Precision& p, std::ostream* out) {
  *out << dtype_name(p.compute) << " compute, " << dtype_name(p.reduce) << " reduce, ep " << p.ep;
}

class FsdpOverlapSynthetic : public ::testing::TestWithParam<Precision> {};

TEST_P(FsdpOverlapSynthetic, PrefetchIsUsedAndEveryBitMatchesTheBlockingPath) {
  REQUIRE_TWO_RANKS(world);
  const Precision precision = GetParam();
  if (precision.reduce != DType::F32 && !on_cuda()) GTEST_SKIP() << "MPI reduces float32 only";
  const DeviceMesh mesh = overlap_test_mesh(world, precision.ep);
  SyntheticRun blocking(mesh, precision.compute, precision.reduce, false);
  SyntheticRun overlapped(mesh, precision.compute, precision.reduce, true);
  FsdpOverlapStats after_first;
  for (int step = 0; step < 3; ++step) {
    blocking.step(step, 2);
    overlapped.step(step, 2);
    if (step == 0) after_first = overlapped.fsdp().overlap_stats();
  }
  EXPECT_EQ(first_difference(overlapped.record(), blocking.record()), "");
  const FsdpOverlapStats first = after_first, steady = overlapped.fsdp().overlap_stats() - after_first;
  EXPECT_EQ(first.prefetch_hits, 0) << "the first step has no prediction yet";
  EXPECT_GT(first.on_demand, 2);
  EXPECT_GT(steady.prefetch_hits, 0);
  EXPECT_EQ(steady.prefetch_misses, 0);
  EXPECT_EQ(steady.on_demand, 2) << "only the first request of each step gathers on the spot";
  EXPECT_GT(steady.deferred_reductions, 0);
  if (precision.ep == 1) {
    // Per step of two micro-batches (16 requests): 5 hits each (every layer and the head's forward, the layers'
    // backward), kept: the head from forward to backward twice and the embedding into the second micro-batch.
    EXPECT_EQ(steady.requests, 32);
    EXPECT_EQ(steady.prefetch_hits, 20);
    EXPECT_EQ(steady.kept, 6);
    // Reduce-scatters per micro-batch: the head's norm, two layers of three, the embedding.
    EXPECT_EQ(steady.deferred_reductions, 2 * 2 * 8);
  }
  EXPECT_EQ(blocking.fsdp().overlap_stats().prefetch_hits, 0);
  EXPECT_EQ(blocking.fsdp().overlap_stats().deferred_reductions, 0);
  expect_same_on_every_rank(*world, overlapped.fsdp().overlap_stats());
}

INSTANTIATE_TEST_SUITE_P(Precisions, FsdpOverlapSynthetic,
                         ::testing::Values(Precision{DType::F32, DType::F32, 1}, Precision{DType::BF16, DType::F32, 1},
                                           Precision{DType::BF16, DType::BF16, 1}, Precision{DType::F32, DType::F32, 2},
                                           Precision{DType::BF16, DType::F32, 2}),
                         [](const ::testing::TestParamInfo<Precision>& param) {
                           return fmt::format("{}_reduce_{}_ep{}", dtype_name(param.param.compute),
                                              dtype_name(param.param.reduce), param.param.ep);
                         });

TEST(FsdpOverlap, WrongPredictionsChangeNoBit) {
  REQUIRE_TWO_RANKS(world);
  const DeviceMesh mesh = overlap_test_mesh(world, 1);
  SyntheticRun blocking(mesh, DType::BF16, DType::F32, false);
  SyntheticRun overlapped(mesh, DType::BF16, DType::F32, true);
  blocking.step(0, 2);
  overlapped.step(0, 2);
  const std::vector<size_t> learned = overlapped.fsdp().predicted_requests();
  // Per micro-batch: embed, layers.0, layers.1, head forward; head, layers.1, layers.0, embed backward.
  ASSERT_EQ(learned, (std::vector<size_t>{0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0}));
  struct Wrong {
    std::string what;
    std::vector<size_t> order;
    int64_t misses;  // prefetched or kept gathers that must be dropped
  };
  std::vector<Wrong> wrong;
  std::vector<size_t> order(learned.begin() + 1, learned.end());
  order.push_back(0);
  wrong.push_back({"rotated: wrong from the first request, so nothing is prefetched", order, 0});
  order = learned;
  order[2] = 3;
  wrong.push_back({"the head predicted after layers.0 in forward", order, 1});
  order = learned;
  std::swap(order[4], order[5]);
  wrong.push_back({"layers.1 predicted after the head's forward", order, 1});
  order = learned;
  order.insert(order.end(), learned.begin(), learned.begin() + 8);
  wrong.push_back({"a third micro-batch that does not come: the embedding is kept at the end", order, 1});
  wrong.push_back({"stops in the first backward", std::vector<size_t>(learned.begin(), learned.begin() + 5), 0});
  wrong.push_back({"none", {}, 0});
  int step = 1;
  for (const Wrong& w : wrong) {
    const FsdpOverlapStats before = overlapped.fsdp().overlap_stats();
    overlapped.fsdp().set_predicted_requests(w.order);
    blocking.step(step, 2);
    overlapped.step(step, 2);
    EXPECT_EQ((overlapped.fsdp().overlap_stats() - before).prefetch_misses, w.misses) << w.what;
    EXPECT_EQ(first_difference(overlapped.record(), blocking.record()), "") << w.what;
    ++step;
  }
  // Learned again from the last step: right once more.
  const FsdpOverlapStats before = overlapped.fsdp().overlap_stats();
  blocking.step(step, 2);
  overlapped.step(step, 2);
  blocking.step(step + 1, 2);
  overlapped.step(step + 1, 2);
  const FsdpOverlapStats last = overlapped.fsdp().overlap_stats() - before;
  EXPECT_EQ(last.prefetch_misses, 0);
  EXPECT_GT(last.prefetch_hits, 0);
  EXPECT_EQ(first_difference(overlapped.record(), blocking.record()), "");
  expect_same_on_every_rank(*world, overlapped.fsdp().overlap_stats());
}

TEST(FsdpOverlap, GradientsAreCompleteOnlyAfterWaitForGradients) {
  REQUIRE_TWO_RANKS(world);
  const DeviceMesh mesh = overlap_test_mesh(world, 1);
  SyntheticRun blocking(mesh, DType::F32, DType::F32, false);
  SyntheticRun overlapped(mesh, DType::F32, DType::F32, true);
  blocking.fsdp().zero_grads();
  overlapped.fsdp().zero_grads();
  blocking.micro_batches(0, 1);
  overlapped.micro_batches(0, 1);
  // The embedding is reduced last: its sum is still pending with overlap (no gradient yet: zero_grads released it),
  // already in the gradient without.
  const std::vector<float> expected = host_floats(blocking.fsdp().shards().front().grad);
  ASSERT_EQ(blocking.fsdp().shards().front().param->name, "embed");
  EXPECT_FALSE(overlapped.fsdp().shards().front().grad.defined());
  EXPECT_TRUE(std::any_of(expected.begin(), expected.end(), [](float v) { return v != 0.0f; }));
  overlapped.fsdp().wait_for_gradients();
  blocking.fsdp().wait_for_gradients();
  blocking.record_shards();
  overlapped.record_shards();
  EXPECT_EQ(first_difference(overlapped.record(), blocking.record()), "");
}

// The toy Qwen3 model (tied embeddings, two layers, recomputation on and off) trained three steps of two
// micro-batches per rank: loss sums and gradients are the same bits with overlap, whose steady steps prefetch.
TEST(FsdpOverlap, ToyModelStepsMatchTheBlockingPath) {
  REQUIRE_TWO_RANKS(world);
  if (on_cuda()) GTEST_SKIP() << "GPU kernels with float atomics are not bitwise reproducible";
  const DeviceMesh mesh = overlap_test_mesh(world, 1);
  const ModelConfig config = test::tiny_dense_config(true);
  for (const bool recompute : {false, true}) {
    ModelOptions options;
    options.recompute = recompute;
    std::vector<std::unique_ptr<CausalLM>> models;
    std::vector<std::unique_ptr<Fsdp>> fsdps;
    for (const bool overlap : {false, true}) {
      models.push_back(std::make_unique<CausalLM>(config, options));
      models.back()->init_weights(5);
      fsdps.push_back(std::make_unique<Fsdp>(models.back()->params(), mesh, DType::F32, DType::F32, overlap));
      models.back()->set_param_hooks(fsdps.back().get());
    }
    std::vector<std::vector<float>> records[2];
    std::vector<double> ce_sums[2];
    FsdpOverlapStats after_first;
    for (int step = 0; step < 3; ++step) {
      for (size_t r = 0; r < 2; ++r) {
        fsdps[r]->zero_grads();
        for (int m = 0; m < 2; ++m) {
          const Batch batch = test::packed_batch({7, 5}, config.vocab_size,
                                                 static_cast<uint64_t>(1000 * step + 10 * m + mesh.rank));
          SftPass pass = models[r]->forward(batch, true);
          ce_sums[r].push_back(pass.stats.ce_sum);
          models[r]->backward(std::move(pass), 1.0f / 20.0f, 0.0f);
        }
        fsdps[r]->wait_for_gradients();
        for (ParamShard& s : fsdps[r]->shards()) {
          records[r].push_back(host_floats(s.grad));
          ops::add_(s.master, s.grad, -0.5f);
        }
        fsdps[r]->masters_updated();
      }
      if (step == 0) after_first = fsdps[1]->overlap_stats();
    }
    EXPECT_EQ(ce_sums[1], ce_sums[0]) << "recompute " << recompute;
    EXPECT_EQ(first_difference(records[1], records[0]), "") << "recompute " << recompute;
    const FsdpOverlapStats steady = fsdps[1]->overlap_stats() - after_first;
    EXPECT_EQ(steady.requests, 32) << "recompute " << recompute;
    EXPECT_EQ(steady.prefetch_hits, 20) << "recompute " << recompute;
    EXPECT_EQ(steady.prefetch_misses, 0) << "recompute " << recompute;
    EXPECT_EQ(steady.kept, 6) << "recompute " << recompute;
    EXPECT_EQ(steady.on_demand, 2) << "recompute " << recompute;
    expect_same_on_every_rank(*world, fsdps[1]->overlap_stats());
  }
}

// One rank (one GPU, or a parameter nobody shares): there is nothing to gather, so nothing is prefetched; casting the
// next group early would only hold its compute-dtype copy one layer longer. Same bits as the blocking path.
TEST(FsdpOverlap, OneRankPrefetchesNothing) {
  const DeviceMesh mesh = one_rank_mesh();
  SyntheticRun blocking(mesh, DType::BF16, DType::F32, false);
  SyntheticRun overlapped(mesh, DType::BF16, DType::F32, true);
  for (int step = 0; step < 3; ++step) {
    blocking.step(step, 2);
    overlapped.step(step, 2);
  }
  EXPECT_EQ(first_difference(overlapped.record(), blocking.record()), "");
  const FsdpOverlapStats& stats = overlapped.fsdp().overlap_stats();
  EXPECT_GT(stats.requests, 0);
  EXPECT_EQ(stats.prefetch_hits, 0);
  EXPECT_EQ(stats.prefetch_misses, 0);
}

// zero_grads releases the shard gradients (torch's set_to_none: no f32 gradient memory during forward); backward
// allocates each as it first adds to it, and wait_for_gradients gives every one a value (zeros where nothing was
// added). Aliased shards (f32 compute, a group of one) keep theirs, zeroed, since the parameter's is a view of it.
TEST(FsdpOverlap, ZeroGradsReleasesGradientsUntilBackwardAddsToThem) {
  const DeviceMesh mesh = one_rank_mesh();
  SyntheticRun released(mesh, DType::BF16, DType::F32, true);
  released.step(0, 1);
  released.fsdp().zero_grads();
  for (const ParamShard& s : released.fsdp().shards()) {
    EXPECT_FALSE(s.grad.defined()) << s.param->name;
    EXPECT_FALSE(s.param->grad.defined()) << s.param->name;
  }
  released.micro_batches(1, 1);
  for (const ParamShard& s : released.fsdp().shards()) EXPECT_TRUE(s.grad.defined()) << s.param->name;
  released.fsdp().zero_grads();
  released.fsdp().wait_for_gradients();  // nothing added: zeros
  for (const ParamShard& s : released.fsdp().shards()) {
    ASSERT_TRUE(s.grad.defined()) << s.param->name;
    EXPECT_EQ(ops::sum_squares(s.grad), 0.0) << s.param->name;
  }

  SyntheticRun aliased(mesh, DType::F32, DType::F32, true);
  aliased.step(0, 1);
  aliased.fsdp().zero_grads();
  for (const ParamShard& s : aliased.fsdp().shards()) {
    ASSERT_TRUE(s.aliased && s.grad.defined()) << s.param->name;
    EXPECT_EQ(ops::sum_squares(s.grad), 0.0) << s.param->name;
    EXPECT_EQ(s.param->grad.raw_data(), s.grad.raw_data()) << s.param->name;
  }
}

// Frozen parameters (Parameter::trainable false, the base model under LoRA): FSDP holds their shard in the compute
// dtype only (no f32 master, no gradient, no reduce-scatter), hands out the same bits at every request of every step,
// and the trainable parameters' gradients and masters are the same bits as when nothing is frozen. The tied
// embedding is among the frozen ones. On two ranks (ctest fsdp_overlap_2ranks) and on one.
const std::vector<std::string> kFrozenNames = {"embed", "layers.0.w", "layers.1.experts", "layers.1.norm"};

bool is_frozen_name(const std::string& name) {
  return std::find(kFrozenNames.begin(), kFrozenNames.end(), name) != kFrozenNames.end();
}

using NamedRecords = std::vector<std::pair<std::string, std::vector<float>>>;

std::vector<std::vector<float>> record_values_of(const NamedRecords& records, bool frozen) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, values] : records)
    if (is_frozen_name(name) == frozen) out.push_back(values);
  return out;
}

void expect_frozen_shards_exact(const DeviceMesh& mesh, const Precision& precision) {
  SyntheticRun all(mesh, precision.compute, precision.reduce, true);
  SyntheticRun frozen(mesh, precision.compute, precision.reduce, true, kFrozenNames);
  std::vector<std::vector<float>> initial;
  int64_t frozen_bytes = 0, saved_bytes = 0;
  for (const ParamShard& s : frozen.fsdp().shards()) {
    ASSERT_EQ(s.frozen(), is_frozen_name(s.param->name)) << s.param->name;
    if (!s.frozen()) continue;
    EXPECT_EQ(s.frozen_values.dtype(), precision.compute) << s.param->name;
    EXPECT_EQ(s.frozen_values.numel(), s.shard_numel) << s.param->name;
    EXPECT_FALSE(s.master.defined()) << s.param->name;
    EXPECT_FALSE(s.grad.defined()) << s.param->name;
    initial.push_back(host_floats(s.frozen_values));
    const int64_t bytes = s.shard_numel * static_cast<int64_t>(dtype_size(precision.compute));
    frozen_bytes += bytes;
    saved_bytes += 2 * s.shard_numel * static_cast<int64_t>(sizeof(float)) - bytes;  // master + grad, f32
  }
  ASSERT_EQ(initial.size(), kFrozenNames.size());
  EXPECT_EQ(frozen.fsdp().frozen_shard_bytes(), frozen_bytes);
  // Compute copies (16-bit compute) are kept for the trainable shards only.
  EXPECT_EQ(frozen.fsdp().shard_bytes() - frozen.fsdp().compute_copy_bytes(),
            all.fsdp().shard_bytes() - all.fsdp().compute_copy_bytes() - saved_bytes);
  if (precision.compute != DType::F32) {
    EXPECT_LT(frozen.fsdp().compute_copy_bytes(), all.fsdp().compute_copy_bytes());
  } else {
    EXPECT_EQ(all.fsdp().compute_copy_bytes(), 0);
  }

  for (int step = 0; step < 3; ++step) {
    all.step(step, 2);
    frozen.step(step, 2);
    for (const ParamShard& s : frozen.fsdp().shards()) {
      if (!s.frozen()) continue;
      EXPECT_FALSE(s.grad.defined()) << s.param->name << " step " << step;
      EXPECT_FALSE(s.param->grad.defined()) << s.param->name << " step " << step;
    }
  }
  size_t k = 0;
  for (const ParamShard& s : frozen.fsdp().shards()) {
    if (!s.frozen()) continue;
    EXPECT_EQ(first_difference({host_floats(s.frozen_values)}, {initial[k++]}), "") << s.param->name;
  }

  // Every request of a frozen parameter handed out the same bits, equal to the first step's of the run without
  // frozen parameters (the same initial values in the compute dtype).
  NamedRecords first_step;
  const size_t requests_per_step = all.handed_out().size() / 3;
  for (size_t i = 0; i < requests_per_step; ++i) first_step.push_back(all.handed_out()[i]);
  for (const auto& [name, values] : frozen.handed_out()) {
    if (!is_frozen_name(name)) continue;
    const auto same = std::find_if(first_step.begin(), first_step.end(), [&](const auto& e) { return e.first == name; });
    ASSERT_NE(same, first_step.end()) << name;
    EXPECT_EQ(first_difference({values}, {same->second}), "") << name;
  }
  // The trainable shards: the same gradients and masters, bit for bit.
  EXPECT_TRUE(record_values_of(frozen.shard_records(), true).empty());
  EXPECT_EQ(record_values_of(frozen.shard_records(), false).size(),
            record_values_of(all.shard_records(), false).size());
  EXPECT_EQ(
      first_difference(record_values_of(frozen.shard_records(), false), record_values_of(all.shard_records(), false)),
      "");
}

class FsdpFrozen : public ::testing::TestWithParam<Precision> {};

TEST_P(FsdpFrozen, TwoRanksHoldFrozenShardsInComputeDtypeWithoutGradients) {
  REQUIRE_TWO_RANKS(world);
  const Precision precision = GetParam();
  if (precision.reduce != DType::F32 && !on_cuda()) GTEST_SKIP() << "MPI reduces float32 only";
  const DeviceMesh mesh = overlap_test_mesh(world, precision.ep);
  expect_frozen_shards_exact(mesh, precision);
  // Frozen shards take part in no reduce-scatter: per micro-batch only the trainable ones' (the head's norm,
  // layers.0's experts and norm, layers.1's w), against eight with nothing frozen. Under ep 2 each rank holds its
  // experts alone (a group of one): they are not reduced either way.
  SyntheticRun frozen(mesh, precision.compute, precision.reduce, true, kFrozenNames);
  SyntheticRun all(mesh, precision.compute, precision.reduce, true);
  frozen.step(0, 2);
  all.step(0, 2);
  EXPECT_EQ(frozen.fsdp().overlap_stats().deferred_reductions, 2 * (precision.ep == 1 ? 4 : 3));
  EXPECT_EQ(all.fsdp().overlap_stats().deferred_reductions, 2 * (precision.ep == 1 ? 8 : 6));
}

TEST_P(FsdpFrozen, OneRankHoldsFrozenShardsInComputeDtypeWithoutGradients) {
  const Precision precision = GetParam();
  if (precision.ep != 1) GTEST_SKIP() << "one rank holds every expert";
  if (precision.reduce != DType::F32) GTEST_SKIP() << "one rank reduces nothing";
  expect_frozen_shards_exact(one_rank_mesh(), precision);
}

INSTANTIATE_TEST_SUITE_P(Precisions, FsdpFrozen,
                         ::testing::Values(Precision{DType::F32, DType::F32, 1}, Precision{DType::BF16, DType::F32, 1},
                                           Precision{DType::BF16, DType::BF16, 1}, Precision{DType::F32, DType::F32, 2},
                                           Precision{DType::BF16, DType::F32, 2}),
                         [](const ::testing::TestParamInfo<Precision>& param) {
                           return fmt::format("{}_reduce_{}_ep{}", dtype_name(param.param.compute),
                                              dtype_name(param.param.reduce), param.param.ep);
                         });

// The toy Qwen3 model with its embedding (tied to the head) and every q_proj frozen by hand: its backward still
// computes their gradients, which FSDP drops; the frozen weights keep their bits over three updates and every other
// gradient is the same bits as with nothing frozen in the first step (the same weights).
void expect_toy_model_frozen_exact(const DeviceMesh& mesh) {
  const ModelConfig config = test::tiny_dense_config(true);
  std::vector<std::unique_ptr<CausalLM>> models;
  std::vector<std::unique_ptr<Fsdp>> fsdps;
  for (const bool freeze : {false, true}) {
    models.push_back(std::make_unique<CausalLM>(config, ModelOptions()));
    models.back()->init_weights(5);
    if (freeze)
      for (const auto& p : models.back()->params().all())
        if (p->name == "model.embed_tokens.weight" || p->name.find("q_proj") != std::string::npos) p->trainable = false;
    fsdps.push_back(std::make_unique<Fsdp>(models.back()->params(), mesh, DType::F32, DType::F32, true));
    models.back()->set_param_hooks(fsdps.back().get());
  }
  std::vector<std::vector<float>> initial_frozen;
  int64_t frozen_count = 0;
  for (const ParamShard& s : fsdps[1]->shards())
    if (s.frozen()) {
      initial_frozen.push_back(host_floats(s.frozen_values));
      ++frozen_count;
    }
  ASSERT_EQ(frozen_count, 1 + config.num_hidden_layers);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> grads[2];
    for (size_t r = 0; r < 2; ++r) {
      fsdps[r]->zero_grads();
      for (int m = 0; m < 2; ++m) {
        const Batch batch =
            test::packed_batch({7, 5}, config.vocab_size, static_cast<uint64_t>(1000 * step + 10 * m + mesh.rank));
        SftPass pass = models[r]->forward(batch, true);
        models[r]->backward(std::move(pass), 1.0f / 20.0f, 0.0f);
      }
      fsdps[r]->wait_for_gradients();
      for (ParamShard& s : fsdps[r]->shards()) {
        // The run without frozen weights updates them too but records only what the other run trains.
        if (s.frozen()) continue;
        ops::add_(s.master, s.grad, -0.5f);
        if (!models[1]->params().at(s.param->name).trainable) continue;
        grads[r].push_back(host_floats(s.grad));
      }
    }
    if (step == 0) {
      EXPECT_EQ(first_difference(grads[1], grads[0]), "");
    }
  }
  size_t k = 0;
  for (const ParamShard& s : fsdps[1]->shards()) {
    if (!s.frozen()) continue;
    EXPECT_FALSE(s.grad.defined()) << s.param->name;
    EXPECT_EQ(first_difference({host_floats(s.frozen_values)}, {initial_frozen[k++]}), "") << s.param->name;
  }
}

TEST(FsdpFrozen, ToyModelTwoRanksFrozenWeightsStayExact) {
  REQUIRE_TWO_RANKS(world);
  if (on_cuda()) GTEST_SKIP() << "GPU kernels with float atomics are not bitwise reproducible";
  expect_toy_model_frozen_exact(overlap_test_mesh(world, 1));
}

TEST(FsdpFrozen, ToyModelOneRankFrozenWeightsStayExact) { expect_toy_model_frozen_exact(one_rank_mesh()); }

}  // namespace
}  // namespace veomni
