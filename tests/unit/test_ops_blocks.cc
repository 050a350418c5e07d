// Tests of place_blocks (blocks into a zeroed matrix) and add_blocks (blocks of a matrix added to their owners).
#include "kernels/ops.h"
#include "test_ops_util.h"

using namespace veomni;
using namespace veomni::test_ops;

namespace {

TEST(OpsBlocks, PlaceBlocksZeroesAllButTheBlocks) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor b = Tensor::from_vector<float>({7, 8, 9}, {1, 3});
  Tensor out = Tensor::full<float>({4, 5}, 99.0f);
  ops::place_blocks({a, b}, {0, 3}, {0, 2}, out);
  const std::vector<float> want = {1, 2, 0, 0, 0,  //
                                   3, 4, 0, 0, 0,  //
                                   5, 6, 0, 0, 0,  //
                                   0, 0, 7, 8, 9};
  EXPECT_EQ(out.to_float_vector(), want);
}

TEST(OpsBlocks, AddBlocksAddsEachBlockToItsOwner) {
  const Tensor src = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor first = Tensor::full<float>({2, 2}, 1.0f), second = Tensor::full<float>({1, 4}, -1.0f);
  ops::add_blocks(src, {1, 0}, {2, 0}, {&first, &second});
  EXPECT_EQ(first.to_float_vector(), (std::vector<float>{7, 8, 11, 12}));
  EXPECT_EQ(second.to_float_vector(), (std::vector<float>{-1, 0, 1, 2}));
}

TEST(OpsBlocks, RejectsBlocksOutsideOverlappingOrTooMany) {
  const Tensor a = Tensor::zeros({2, 2}, DType::F32);
  Tensor out = Tensor::zeros({3, 3}, DType::F32);
  EXPECT_THROW(ops::place_blocks({a}, {2}, {0}, out), Error);           // leaves out
  EXPECT_THROW(ops::place_blocks({a, a}, {0, 1}, {0, 1}, out), Error);  // overlap
  EXPECT_THROW(ops::place_blocks({a}, {0, 1}, {0}, out), Error);        // offsets do not match the blocks
  const Tensor one = Tensor::zeros({1, 1}, DType::F32);
  Tensor big = Tensor::zeros({9, 9}, DType::F32);
  std::vector<Tensor> nine(9, one);
  std::vector<int64_t> diagonal = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_THROW(ops::place_blocks(nine, diagonal, diagonal, big), Error);
  Tensor dst = Tensor::zeros({2, 2}, DType::F32);
  EXPECT_THROW(ops::add_blocks(out, {2}, {2}, {&dst}), Error);
}

}  // namespace
