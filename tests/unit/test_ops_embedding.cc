// Tests of the embedding lookup and its accumulating, deterministic gradient.
#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

TEST(OpsEmbedding, ForwardGathersRows) {
  std::mt19937 rng(61);
  const Tensor table = random_f32({10, 7}, rng);
  const Tensor ids = Tensor::from_vector<int64_t>({3, 0, 9, 3}, {4});
  Tensor out = Tensor::empty({4, 7}, DType::F32);
  ops::embedding_forward(ids, table, out);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t h = 0; h < 7; ++h)
      ASSERT_EQ(out.data<float>()[i * 7 + h], table.data<float>()[ids.data<int64_t>()[i] * 7 + h]);
}

TEST(OpsEmbedding, BackwardAccumulatesRepeatedIds) {
  std::mt19937 rng(62);
  const int64_t v = 50, h = 300, n = 200;
  std::uniform_int_distribution<int64_t> pick(0, 9);  // ids 0..9 only: many repeats
  std::vector<int64_t> id(static_cast<size_t>(n));
  for (auto& x : id) x = pick(rng);
  const Tensor ids = Tensor::from_vector(id, {n});
  const Tensor dout = random_f32({n, h}, rng);
  Tensor dtable = Tensor::full<float>({v, h}, 1.0f);
  ops::embedding_backward(ids, dout, dtable);
  Doubles want(static_cast<size_t>(v * h), 1.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < h; ++c)
      want[static_cast<size_t>(id[static_cast<size_t>(i)] * h + c)] += dout.item_as_double(i * h + c);
  EXPECT_TRUE(all_close(dtable, want, 1e-5, 1e-5));
  Tensor again = Tensor::full<float>({v, h}, 1.0f);
  with_threads(1, [&] { ops::embedding_backward(ids, dout, again); });
  EXPECT_TRUE(bitwise_equal(dtable, again));
}

TEST(OpsEmbedding, RejectsOutOfRangeIds) {
  const Tensor table = Tensor::zeros({4, 2}, DType::F32);
  Tensor out = Tensor::zeros({2, 2}, DType::F32);
  EXPECT_THROW(ops::embedding_forward(Tensor::from_vector<int64_t>({0, 4}, {2}), table, out), InputError);
  EXPECT_THROW(ops::embedding_forward(Tensor::from_vector<int64_t>({-1, 0}, {2}), table, out), InputError);
  EXPECT_THROW(ops::embedding_forward(Tensor::from_vector<int32_t>({0, 1}, {2}), table, out), Error);
  EXPECT_THROW(ops::embedding_forward(Tensor::from_vector<int64_t>({0, 1, 2}, {3}), table, out), Error);
  Tensor dtable = Tensor::zeros({4, 2}, DType::F32);
  EXPECT_THROW(ops::embedding_backward(Tensor::from_vector<int64_t>({0, 7}, {2}), out, dtable), InputError);
  EXPECT_EQ(dtable.to_float_vector(), std::vector<float>(8, 0.0f));
}
