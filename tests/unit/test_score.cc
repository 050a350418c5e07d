// veomni-score's pieces: the input-order plan, records against the LM head and the value head on one process, the
// output keys, and the dataset checks.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "data/collator.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "model/model_config.h"
#include "tests/common/expect_error.h"
#include "tests/common/scratch_dir.h"
#include "train/objective_sequence_sums.h"
#include "train/run_setup.h"
#include "train/score_pass.h"
#include "train/score_plan.h"

namespace veomni {
namespace {

TEST(ScorePlan, EverySampleOnceInInputOrderOverTheRanks) {
  const std::vector<int64_t> lengths{30, 50, 0, 40, 120, 10, 10};
  const ScorePlan plan = plan_scoring(lengths, 100, 2);
  EXPECT_EQ(plan.max_seq_len, 120);
  std::vector<int64_t> seen;
  for (const MicroBatchPlan& m : plan.micro_batches) seen.insert(seen.end(), m.samples.begin(), m.samples.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 3, 4, 5, 6}));  // the empty sample has nothing to score
  // The budget is raised to the longest sample (120): 30+50+40 | 120 | 10+10.
  ASSERT_EQ(plan.micro_batches.size(), 3u);
  EXPECT_EQ(plan.micro_batches[0].samples, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(plan.micro_batches[2].samples, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(plan.num_rounds(), 2);
  EXPECT_EQ(plan.micro_batch_of(0, 0), 0);
  EXPECT_EQ(plan.micro_batch_of(0, 1), 1);
  EXPECT_EQ(plan.micro_batch_of(1, 0), 2);
  EXPECT_EQ(plan.micro_batch_of(1, 1), -1);  // runs a discarded forward to meet the collectives
}

TokenSample random_sample(Rng& rng, int64_t length, int64_t prompt, int64_t chosen_length = 0) {
  TokenSample s;
  s.input_ids = Tensor::empty({length}, DType::I64);
  s.labels = Tensor::empty({length}, DType::I64);
  for (int64_t i = 0; i < length; ++i) {
    const auto id = static_cast<int64_t>(rng.uniform_int(1024));
    s.input_ids.data<int64_t>()[i] = id;
    const bool masked = i < prompt || (chosen_length > 0 && i >= chosen_length && i < chosen_length + prompt);
    s.labels.data<int64_t>()[i] = masked ? kIgnoreIndex : id;
  }
  s.chosen_length = chosen_length;
  s.context = "test sample";
  return s;
}

class ScorePass : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.text = load_model_config(std::string(VEOMNI_SOURCE_DIR) + "/configs/model_configs/qwen3_toy");
  }
  std::unique_ptr<TrainModel> model(ModelHead head) const {
    auto m = make_run_model(config_, ModelOptions{}, head, false);
    m->init_weights(7);
    return m;
  }
  // Records of the samples packed into one micro-batch.
  std::vector<double> records(TrainModel& m, ScoreWhat what, const std::vector<TokenSample>& samples,
                              std::vector<ScoreSlot>* slots_out = nullptr) const {
    std::vector<ScoreSlot> slots;
    int64_t row = 0, offset = 0;
    for (size_t k = 0; k < samples.size(); ++k) {
      const int64_t length = samples[k].input_ids.numel();
      slots.push_back({static_cast<int64_t>(k), length, 0, row, offset});
      row += length;
      offset += score_record_size(what, length);
    }
    std::vector<double> buffer(static_cast<size_t>(offset), 0.0);
    score_packed_samples(m, what, samples, slots, collate_, 0, buffer);
    if (slots_out) *slots_out = slots;
    return buffer;
  }
  // The LM head's label log-probs of one sample on its own, f32 [L] in the shifted (target) alignment.
  std::vector<float> head_logprobs(TrainModel& m, const TokenSample& sample, Batch* batch_out = nullptr) const {
    MultimodalBatch batch;
    batch.text = slice_for_sp_rank(pack_samples({sample}, collate_), 1, 0);
    BodyOutput body = m.body().forward(batch, false);
    const Tensor lp = m.lm_head().logprobs_forward(body.hidden, batch.text.target_ids, false).logprobs;
    if (batch_out) *batch_out = batch.text;
    return lp.to_float_vector();
  }

  RunModelConfig config_;
  CollateOptions collate_;
};

TEST_F(ScorePass, TokenLogprobsEqualTheLmHeadSampleBySample) {
  auto m = model(ModelHead::LanguageModel);
  Rng rng(3);
  const std::vector<TokenSample> samples{random_sample(rng, 17, 4), random_sample(rng, 9, 0),
                                         random_sample(rng, 23, 6)};
  std::vector<ScoreSlot> slots;
  const std::vector<double> buffer = records(*m, ScoreWhat::Logprobs, samples, &slots);
  for (size_t k = 0; k < samples.size(); ++k) {
    const std::vector<float> alone = head_logprobs(*m, samples[k]);
    const int64_t length = samples[k].input_ids.numel();
    ScoreTotals totals;
    const Sample out = score_output_sample(ScoreWhat::Logprobs, buffer.data() + slots[k].record_offset, length,
                                           false, false, {}, totals);
    const std::vector<float> tokens = out.at("token_logprobs").to_float_vector();
    ASSERT_EQ(static_cast<int64_t>(tokens.size()), length);
    // Entry j belongs to predicting labels[j]: the head's value at position j - 1; nothing predicts labels[0].
    EXPECT_EQ(tokens[0], 0.0f);
    double sum = 0;
    int64_t predicted = 0;
    for (int64_t j = 1; j < length; ++j) {
      EXPECT_NEAR(tokens[static_cast<size_t>(j)], alone[static_cast<size_t>(j - 1)], 1e-5)
          << "sample " << k << " label " << j;
      const bool label = samples[k].labels.data<int64_t>()[j] != kIgnoreIndex;
      if (!label) {
        EXPECT_EQ(tokens[static_cast<size_t>(j)], 0.0f);
      }
      predicted += label;
      sum += alone[static_cast<size_t>(j - 1)];
    }
    EXPECT_LT(sum, 0.0);
    EXPECT_NEAR(out.at("logps").to_float_vector()[0], sum, 1e-4);
    EXPECT_EQ(out.at("num_label_tokens").data<int64_t>()[0], predicted);
    EXPECT_EQ(totals.label_tokens, predicted);
  }
}

TEST_F(ScorePass, PairSumsAreTheSequenceSumsDpoReads) {
  auto m = model(ModelHead::LanguageModel);
  Rng rng(5);
  const TokenSample pair = random_sample(rng, 20, 3, 8);
  Batch batch;
  const std::vector<float> alone = head_logprobs(*m, pair, &batch);
  const std::vector<double> sums = sequence_sums(batch, Tensor::from_vector(alone, {20}), nullptr);
  const std::vector<double> buffer = records(*m, ScoreWhat::Logprobs, {pair});
  ScoreTotals totals;
  const Sample out = score_output_sample(ScoreWhat::Logprobs, buffer.data(), 20, true, false, {}, totals);
  EXPECT_NEAR(out.at("chosen_logps").to_float_vector()[0], sums[0], 1e-4);
  EXPECT_NEAR(out.at("rejected_logps").to_float_vector()[0], sums[1], 1e-4);
  EXPECT_NEAR(out.at("logps").to_float_vector()[0], sums[0] + sums[1], 1e-4);
  // As a reference: the input keys and DPO's reference keys.
  Sample input{{"input_ids", pair.input_ids}};
  const Sample ref = score_output_sample(ScoreWhat::Logprobs, buffer.data(), 20, true, true, input, totals);
  EXPECT_EQ(ref.count("input_ids"), 1u);
  EXPECT_NEAR(ref.at("ref_chosen_logps").to_float_vector()[0], sums[0], 1e-4);
  EXPECT_NEAR(ref.at("ref_rejected_logps").to_float_vector()[0], sums[1], 1e-4);
}

TEST_F(ScorePass, RewardIsTheValueHeadAtEachSequencesLastToken) {
  auto m = model(ModelHead::SequenceReward);
  Rng rng(9);
  const TokenSample plain = random_sample(rng, 11, 0), pair = random_sample(rng, 14, 2, 6);
  MultimodalBatch batch;
  batch.text = slice_for_sp_rank(pack_samples({plain, pair}, collate_), 1, 0);
  BodyOutput body = m->body().forward(batch, false);
  const std::vector<float> values = m->value_head().forward(body.hidden, false).values.to_float_vector();
  const std::vector<double> buffer = records(*m, ScoreWhat::Reward, {plain, pair});
  EXPECT_NEAR(buffer[0], values[10], 1e-6);
  EXPECT_NEAR(buffer[2], values[11 + 5], 1e-6);
  EXPECT_NEAR(buffer[3], values[11 + 13], 1e-6);
  ScoreTotals totals;
  const Sample out = score_output_sample(ScoreWhat::Reward, buffer.data() + 2, 14, true, false, {}, totals);
  EXPECT_NEAR(out.at("chosen_reward").to_float_vector()[0], values[16], 1e-6);
  EXPECT_NEAR(out.at("rejected_reward").to_float_vector()[0], values[24], 1e-6);
}

class ScoreDataset : public veomni::testing::ScratchDir {};

TEST_F(ScoreDataset, WithoutLabelsIsAnInputErrorNamingFileAndKey) {
  const std::string file = path("ids_only.h5");
  DatasetWriter writer(file, DatasetInfo{});
  writer.append({{"input_ids", Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3})}});
  writer.close();
  const DatasetReader reader(file);
  veomni::testing::expect_input_error([&] { check_score_dataset(reader, file, ScoreWhat::Logprobs, false); },
                                      {file, "labels"});
  veomni::testing::expect_input_error([&] { check_score_dataset(reader, file, ScoreWhat::Value, false); },
                                      {file, "labels"});
  check_score_dataset(reader, file, ScoreWhat::Reward, false);  // a reward reads the last token only
  veomni::testing::expect_input_error([] { score_what_from_name("ppl"); }, {"--what", "ppl"});
}

}  // namespace
}  // namespace veomni
