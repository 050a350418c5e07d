// Unit tests of the text preprocessing's SampleStore with a small memory buffer: samples spilled to the spool file read
// back exactly as the in-memory store gives them (one by one and packed into rows), and nothing is left on disk.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "core/error.h"
#include "data/text_preprocess_pack.h"

using namespace veomni;

namespace {

LabeledTokens tokens_of(int64_t seed, int64_t length) {
  LabeledTokens t;
  for (int64_t i = 0; i < length; ++i) {
    t.ids.push_back(static_cast<int32_t>((seed * 131 + i * 17) % 151000));
    t.trained.push_back(static_cast<uint8_t>((seed + i) % 3 != 0));
  }
  return t;
}

void expect_same_stored_sample(const Sample& a, const Sample& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, tensor] : a) {
    const Tensor& other = b.at(key);
    ASSERT_EQ(tensor.numel(), other.numel()) << key;
    for (int64_t i = 0; i < tensor.numel(); ++i)
      EXPECT_EQ(tensor.data<int64_t>()[i], other.data<int64_t>()[i]) << key << "[" << i << "]";
  }
}

TEST(SampleStore, SpilledSamplesReadBackExactly) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("veomni_sample_store_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  SampleStore memory;
  {
    SampleStore spooled(dir.string(), 100);  // 20 tokens: most samples go to the spool
    for (int64_t s = 0; s < 40; ++s) {
      memory.add(tokens_of(s, 1 + (s * 7) % 30));
      spooled.add(tokens_of(s, 1 + (s * 7) % 30));
    }
    EXPECT_GT(spooled.spooled_tokens(), memory.total_tokens() / 2);
    EXPECT_EQ(memory.spooled_tokens(), 0);
    EXPECT_EQ(spooled.total_tokens(), memory.total_tokens());
    EXPECT_EQ(spooled.trained_tokens(), memory.trained_tokens());
    for (int64_t s = 0; s < 40; ++s) expect_same_stored_sample(spooled.sample(s), memory.sample(s));
    const auto rows = pack_best_fit(memory, 48);
    EXPECT_EQ(pack_best_fit(spooled, 48), rows);
    for (const auto& row : rows)
      expect_same_stored_sample(spooled.packed_row(row, 48, 7), memory.packed_row(row, 48, 7));
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the spool file must be unlinked";
  }
  std::filesystem::remove_all(dir);
}

TEST(SampleStore, SpoolInAMissingDirectoryIsAnInputError) {
  SampleStore store("/nonexistent/veomni/dir", 1);
  EXPECT_THROW(store.add(tokens_of(1, 4)), InputError);
}

}  // namespace
