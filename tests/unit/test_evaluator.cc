// Unit tests of validation (train/evaluator.h): the SFT eval loss equals the token-weighted mean computed sample by
// sample with the causal LM, eval_batches caps the set, and a wrong eval set is an InputError naming data.eval_path.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/collator.h"
#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "dist/device_mesh.h"
#include "model/causal_lm.h"
#include "test_ckpt_util.h"
#include "test_model_util.h"
#include "tests/common/expect_error.h"
#include "tests/common/scratch_dir.h"
#include "train/evaluator.h"
#include "train/objective.h"

namespace veomni {
namespace {

constexpr int64_t kMaxSeqLen = 16;

class EvaluatorTest : public testing::ScratchDir {
 protected:
  // Samples of the given lengths: random ids, the first two labels ignored.
  std::string write_set(const std::string& name, const std::vector<int64_t>& lengths, bool pairs = false) {
    const std::string file = path(name);
    DatasetWriter writer(file, DatasetInfo{});
    Rng rng(5);
    for (int64_t n : lengths) {
      std::vector<int64_t> ids, labels;
      for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int64_t>(rng.uniform_int(50)));
      labels = ids;
      labels[0] = labels[1] = kIgnoreIndex;
      Sample s{{"input_ids", Tensor::from_vector(ids, {n})}, {"labels", Tensor::from_vector(labels, {n})}};
      if (pairs) s["chosen_length"] = Tensor::from_vector(std::vector<int64_t>{n / 2}, {1});
      writer.append(s);
    }
    writer.close();
    return file;
  }

  static MultimodalBatch collate(const DatasetReader& dataset, const std::string& path,
                                 const std::vector<int64_t>& indices, int64_t vocab) {
    CollateOptions options;
    options.max_seq_len = kMaxSeqLen;
    options.vocab_size = vocab;
    std::vector<TokenSample> samples;
    for (int64_t i : indices) samples.push_back(token_sample_from(dataset.read(i), path));
    MultimodalBatch batch;
    batch.text = slice_for_sp_rank(pack_samples(samples, options), 1, 0);
    return batch;
  }
};

double metric(const EvalMetrics& metrics, const std::string& name) {
  for (const auto& [key, value] : metrics)
    if (key == name) return value;
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

TEST_F(EvaluatorTest, SftEvalLossIsTheTokenWeightedMeanOverTheWholeSet) {
  const ModelConfig config = test::tiny_dense_config(false);
  const std::vector<int64_t> lengths{9, 5, 12, 7, 16, 6, 20};  // the last one truncated to kMaxSeqLen
  const std::string file = write_set("eval.h5", lengths);
  const DatasetReader reader(file);
  const auto world = std::make_shared<test::LocalCommunicator>();
  const DeviceMesh mesh;  // one process
  TrainModel model(config, ModelOptions{});
  model.init_weights(7);
  std::unique_ptr<Objective> sft = make_objective(ObjectiveSettings{}, config);
  const CollateMicroBatch collate_fn = [&](const DatasetReader& d, const std::string& p, const std::vector<int64_t>& s) {
    return collate(d, p, s, config.vocab_size);
  };

  // Sample by sample, unpacked, with the causal LM's own SFT pass.
  CausalLM lm(config, ModelOptions{});
  lm.init_weights(7);
  double ce_sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < reader.num_samples(); ++i) {
    const ForwardStats stats = lm.forward(collate(reader, file, {i}, config.vocab_size).text, false).stats;
    ce_sum += stats.ce_sum;
    tokens += stats.valid_tokens;
  }

  const Evaluator whole({file, kMaxSeqLen, kMaxSeqLen, 0}, reader, file);
  EXPECT_GT(whole.num_micro_batches(), 3u);  // packed: fewer micro-batches than samples
  EXPECT_LT(whole.num_micro_batches(), lengths.size());
  const EvalMetrics metrics = whole.evaluate(*sft, model, *world, mesh, collate_fn);
  ASSERT_EQ(metrics.front().first, "eval_loss");
  EXPECT_NEAR(metric(metrics, "eval_loss"), ce_sum / static_cast<double>(tokens), 1e-6 * ce_sum / tokens);
  EXPECT_EQ(metric(metrics, "eval_foundation_loss"), metric(metrics, "eval_loss"));
  for (const auto& p : model.params().all()) EXPECT_FALSE(p->grad.defined()) << p->name;

  // eval_batches 1: the first micro-batch only (its samples in the set's order: 9 + 5 tokens fit in 16).
  const EvalMetrics first = Evaluator({file, kMaxSeqLen, kMaxSeqLen, 1}, reader, file)
                                .evaluate(*sft, model, *world, mesh, collate_fn);
  double first_sum = 0;
  int64_t first_tokens = 0;
  for (int64_t i : {0, 1}) {
    const ForwardStats stats = lm.forward(collate(reader, file, {i}, config.vocab_size).text, false).stats;
    first_sum += stats.ce_sum;
    first_tokens += stats.valid_tokens;
  }
  EXPECT_NEAR(metric(first, "eval_loss"), first_sum / static_cast<double>(first_tokens), 1e-6);
}

TEST_F(EvaluatorTest, AWrongEvalSetIsAnInputErrorNamingTheKey) {
  const std::string train = write_set("train.h5", {8, 9});
  const DatasetReader reader(train);
  testing::expect_input_error([&] { Evaluator({path("absent.h5"), kMaxSeqLen, kMaxSeqLen, 0}, reader, train); },
                              {"data.eval_path", "absent.h5"});
  const std::string pairs = write_set("pairs.h5", {8, 10}, true);
  testing::expect_input_error([&] { Evaluator({pairs, kMaxSeqLen, kMaxSeqLen, 0}, reader, train); },
                              {"data.eval_path", pairs, "key 'chosen_length'", "data.train_path", train});
  const DatasetReader pair_reader(pairs);
  const std::string long_pairs = write_set("long_pairs.h5", {8, 30}, true);
  testing::expect_input_error([&] { Evaluator({long_pairs, kMaxSeqLen, kMaxSeqLen, 0}, pair_reader, pairs); },
                              {"data.eval_path", "sample 1", "data.max_seq_len"});
}

}  // namespace
}  // namespace veomni
