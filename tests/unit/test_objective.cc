// Unit tests of the trainer's objectives: train.objective validation, the SFT objective against the causal LM's
// own SFT pass, and per-sequence sums of per-token values over Ulysses SP slices (on two MPI ranks:
// ctest -R objective_sequence_sums_2ranks).
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "model/causal_lm.h"
#include "parallel/ulysses.h"
#include "test_model_util.h"
#include "train/objective.h"
#include "train/objective_sequence_sums.h"
#include "train/train_config.h"
#include "train/train_model.h"
#include "tests/common/expect_error.h"

using namespace veomni;

namespace {

using veomni::testing::input_error_of;

TrainConfig valid_objective_config() {
  TrainConfig c;
  c.model.config_path = "configs/model_configs/qwen3_toy";
  c.data.train_path = "data.h5";
  c.train.global_batch_size = 8;
  return c;
}

TEST(TrainObjective, DefaultsToSft) {
  EXPECT_EQ(TrainConfig().train.objective, "sft");
  EXPECT_NO_THROW(validate_train_config(valid_objective_config()));
  const TrainConfig c = train_config_from_yaml("train:\n  objective: sft\n", "cfg.yaml");
  EXPECT_EQ(c.train.objective, "sft");
}

// Each objective's section is checked when that objective runs, naming the key; other objectives ignore it.
TEST(TrainObjective, TheRunningObjectivesSectionIsValidatedNamingTheKey) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"dpo", {"--train.dpo_config.beta", "0"}},
      {"dpo", {"--train.dpo_config.loss_type", "ipo", "--train.dpo_config.label_smoothing", "0.1"}},
      {"ppo_actor", {"--train.actor.clip_ratio_c", "0.5"}},
      {"ppo_actor", {"--train.actor.clip_ratio_low", "1.5"}},
      {"value", {"--train.critic.cliprange_value", "-1"}}};
  for (const auto& [name, args] : cases) {
    TrainConfig c = valid_objective_config();
    apply_train_config_overrides(c, args);
    EXPECT_NO_THROW(validate_train_config(c)) << "sft ignores " << args[0];
    apply_train_config_overrides(c, {"--train.objective", name});
    const std::string message = input_error_of([&] { validate_train_config(c); });
    const std::string key = args[args.size() - 2].substr(2);
    EXPECT_NE(message.find(key), std::string::npos) << message;
  }
}

TEST(TrainObjective, EveryNameMakesItsObjectiveWithVeOmnisAndVerlsMetricNames) {
  const ModelConfig config = test::tiny_dense_config(false);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
      {"sft", {"loss", "foundation_loss"}},
      {"dpo", {"loss", "dpo_loss", "chosen_rewards", "rejected_rewards", "reward_accuracy", "reward_margin"}},
      {"reward", {"loss", "rm_loss", "reward_accuracy", "chosen_reward", "rejected_reward"}},
      {"value", {"loss", "vf_loss", "vf_clipfrac"}},
      {"ppo_actor", {"loss", "pg_loss", "pg_clipfrac", "pg_clipfrac_lower", "ppo_kl", "entropy"}}};
  for (const auto& [name, names] : expected) {
    ObjectiveSettings settings;
    settings.name = name;
    settings.dpo.reference_free = true;
    std::unique_ptr<Objective> objective = make_objective(settings, config);
    const StepLossScale scale = objective->step_scale(4, 1);
    const ObjectiveMetrics metrics = objective->step_metrics(std::vector<double>(objective->num_sums(), 0.0), scale);
    std::vector<std::string> got;
    for (const auto& m : metrics) got.push_back(m.first);
    EXPECT_EQ(got, names) << name;
  }
  ObjectiveSettings kl;
  kl.name = "ppo_actor";
  kl.actor.use_kl_loss = true;
  std::unique_ptr<Objective> actor = make_objective(kl, config);
  EXPECT_EQ(actor->step_metrics(std::vector<double>(actor->num_sums(), 0.0), actor->step_scale(1, 1)).back().first,
            "kl_loss");
}

TEST(TrainObjective, UnknownNamesAreRefusedByTheKeysChoices) {
  TrainConfig c = valid_objective_config();
  const std::string message = input_error_of([&] { apply_train_config_overrides(c, {"--train.objective", "kto"}); });
  EXPECT_NE(message.find("train.objective"), std::string::npos) << message;
  EXPECT_THROW(check_objective_available("kto"), InputError);
}

// The trainer's SFT objective over TrainModel gives CausalLM's loss and gradients bit for bit, and its metrics are
// VeOmni's keys.
TEST(SftObjective, EqualsTheCausalLmSftPassBitwise) {
  for (bool moe : {false, true}) {
    const ModelConfig config = moe ? test::tiny_moe_config(false) : test::tiny_dense_config(false);
    MultimodalBatch batch;
    batch.text = test::packed_batch({6, 5}, config.vocab_size, 4, 1);

    std::unique_ptr<Objective> sft = make_objective(ObjectiveSettings{}, config);
    EXPECT_EQ(sft->normaliser(batch, true), batch.text.valid_tokens);
    EXPECT_EQ(sft->normaliser(batch, false), batch.text.valid_tokens);
    const StepLossScale scale = sft->step_scale(batch.text.valid_tokens, 2);
    EXPECT_EQ(scale.aux_loss_coef, moe ? 0.01 : 0.0);

    CausalLM lm(config, ModelOptions{});
    lm.init_weights(7);
    lm.params().zero_grads();
    SftPass pass = lm.forward(batch.text, true);
    const ForwardStats stats = pass.stats;
    lm.backward(std::move(pass), scale.ce_grad_scale(), scale.aux_grad_scale());

    TrainModel model(config, ModelOptions{});
    model.init_weights(7);
    model.params().zero_grads();
    std::vector<double> sums(sft->num_sums(), 0.0);
    sft->micro_batch(model, batch, scale, true, sums);
    EXPECT_EQ(sums[0], stats.ce_sum);
    EXPECT_EQ(sums[1], stats.aux_loss);
    ASSERT_EQ(model.params().all().size(), lm.params().all().size());
    for (size_t i = 0; i < lm.params().all().size(); ++i) {
      const Parameter& a = *lm.params().all()[i];
      const Parameter& b = *model.params().all()[i];
      ASSERT_EQ(a.name, b.name);
      EXPECT_EQ(a.grad.to_float_vector(), b.grad.to_float_vector()) << a.name;
    }
    const ObjectiveMetrics metrics = sft->step_metrics(sums, scale);
    ASSERT_EQ(metrics.size(), moe ? 3u : 2u);
    EXPECT_EQ(metrics[0].first, "loss");
    EXPECT_EQ(metrics[1].first, "foundation_loss");
    EXPECT_EQ(metrics[1].second, stats.ce_sum / static_cast<double>(batch.text.valid_tokens));
    if (moe) {
      EXPECT_EQ(metrics[2].first, "aux_loss");
      EXPECT_EQ(metrics[0].second, metrics[1].second + 0.01 * (stats.aux_loss / 2));
    }
    // An SP rank other than the first leaves the shared aux loss to the first.
    std::vector<double> other(sft->num_sums(), 0.0);
    sft->micro_batch(model, batch, scale, false, other);
    EXPECT_EQ(other[1], 0.0);
  }
}

// A row of three sequences [0, 5), [5, 9), [9, 12) with value g + 1 at global token g.
Batch slice_of_row(int64_t sp_size, int64_t sp_rank) {
  const int64_t local = 12 / sp_size;
  Batch b;
  b.cu_seqlens = {0, 5, 9, 12};
  b.sp_offset = local * sp_rank;
  b.input_ids = Tensor::zeros({local}, DType::I64);
  return b;
}

Tensor batch_values_of(const Batch& b) {
  std::vector<float> v;
  for (int64_t i = 0; i < b.input_ids.numel(); ++i) v.push_back(static_cast<float>(b.sp_offset + i + 1));
  return Tensor::from_vector(v, {b.input_ids.numel()});
}

TEST(SequenceSums, SumEachPackedSequenceAndSpreadTheGradientBack) {
  const Batch b = slice_of_row(1, 0);
  EXPECT_EQ(sequence_sums(b, batch_values_of(b), nullptr), (std::vector<double>{15, 30, 33}));
  const Tensor d = sequence_sums_backward(b, {1, 2, 3}, Device::cpu());
  EXPECT_EQ(d.to_float_vector(), (std::vector<float>{1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3}));
}

TEST(SequenceLastValues, ReadEachSequencesLastTokenAndPutTheGradientThere) {
  const Batch b = slice_of_row(1, 0);
  EXPECT_EQ(sequence_last_values(b, batch_values_of(b), nullptr), (std::vector<double>{5, 9, 12}));
  const Tensor d = sequence_last_values_backward(b, {1, 2, 3}, Device::cpu());
  EXPECT_EQ(d.to_float_vector(), (std::vector<float>{0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 3}));
}

// The MPI world when this process is one of the two ranks of mpirun -np 2; null otherwise.
std::shared_ptr<Communicator> objective_two_rank_world() {
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

// Under Ulysses SP 2 the middle sequence spans both ranks: each rank's slice sums to the whole row's totals.
TEST(SequenceSums, SumOverTheSequenceParallelGroup) {
  const std::shared_ptr<Communicator> world = objective_two_rank_world();
  if (!world) GTEST_SKIP() << "runs on two MPI ranks: ctest -R objective_sequence_sums_2ranks";
  const DeviceMesh mesh = build_device_mesh(world, 2, 1);
  UlyssesHooks sp(mesh.sp);
  const Batch b = slice_of_row(2, mesh.sp_rank());
  EXPECT_EQ(sequence_sums(b, batch_values_of(b), &sp), (std::vector<double>{15, 30, 33}));
  const Tensor d = sequence_sums_backward(b, {1, 2, 3}, Device::cpu());
  const std::vector<float> want = mesh.sp_rank() == 0 ? std::vector<float>{1, 1, 1, 1, 1, 2}
                                                      : std::vector<float>{2, 2, 2, 3, 3, 3};
  EXPECT_EQ(d.to_float_vector(), want);
  // Sequence 0 ends on rank 0 (token 4), sequences 1 and 2 on rank 1 (tokens 8 and 11).
  EXPECT_EQ(sequence_last_values(b, batch_values_of(b), &sp), (std::vector<double>{5, 9, 12}));
  const Tensor d_last = sequence_last_values_backward(b, {1, 2, 3}, Device::cpu());
  const std::vector<float> want_last = mesh.sp_rank() == 0 ? std::vector<float>{0, 0, 0, 0, 1, 0}
                                                           : std::vector<float>{0, 0, 2, 0, 0, 3};
  EXPECT_EQ(d_last.to_float_vector(), want_last);
}

}  // namespace
