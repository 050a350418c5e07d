// Unit tests of dataset input errors: damaged, foreign or newer files and inconsistent samples give InputError.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/dataset_reader.h"
#include "data/dataset_writer.h"
#include "io/hdf5_file.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

using DatasetErrorTest = veomni::testing::ScratchDir;

DatasetInfo info() {
  DatasetInfo i;
  i.producer = "test";
  return i;
}

Sample sample_of(int64_t length, int64_t seed = 0) {
  std::vector<int64_t> ids(static_cast<size_t>(length));
  std::vector<float> features(static_cast<size_t>(length) * 4);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) + seed;
  for (size_t i = 0; i < features.size(); ++i) features[i] = static_cast<float>(i * 2654435761u % 1000003) / 7.0f;
  return {{"input_ids", Tensor::from_vector(ids, {length})}, {"features", Tensor::from_vector(features, {length, 4})}};
}

void write_dataset(const std::string& file, int64_t samples = 3, int64_t length = 5) {
  DatasetWriter writer(file, info());
  for (int64_t s = 0; s < samples; ++s) writer.append(sample_of(length + s, s));
  writer.close();
}

// Runs f, expects an InputError whose message contains every fragment.
using veomni::testing::expect_input_error;

void read_everything(const std::string& file) {
  DatasetReader reader(file);
  for (int64_t s = 0; s < reader.num_samples(); ++s) reader.read(s);
}

}  // namespace

TEST_F(DatasetErrorTest, MissingFile) {
  expect_input_error([&] { DatasetReader reader(path("nope.h5")); }, {path("nope.h5"), "no such file"});
}

TEST_F(DatasetErrorTest, NotAnHdf5File) {
  std::ofstream(path("text.h5")) << "hello, not HDF5\n";
  expect_input_error([&] { DatasetReader reader(path("text.h5")); }, {path("text.h5"), "not an HDF5 file"});
}

TEST_F(DatasetErrorTest, ForeignHdf5File) {
  { h5::File::create(path("other.h5")).set_string_attribute("title", "something else"); }
  expect_input_error([&] { DatasetReader reader(path("other.h5")); }, {path("other.h5"), "not a veomni dataset"});
}

TEST_F(DatasetErrorTest, TruncatedFile) {
  write_dataset(path("t.h5"), 20, 400);
  fs::resize_file(path("t.h5"), fs::file_size(path("t.h5")) / 2);
  expect_input_error([&] { read_everything(path("t.h5")); }, {path("t.h5")});
}

TEST_F(DatasetErrorTest, CorruptBytesInData) {
  // Mostly chunk data (incompressible floats): the middle of the file lies inside a chunk.
  write_dataset(path("c.h5"), 8, 4000);
  const auto size = fs::file_size(path("c.h5"));
  {
    std::fstream file(path("c.h5"), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size / 2));
    const std::string garbage(64, '\x5a');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  expect_input_error([&] { read_everything(path("c.h5")); }, {path("c.h5")});
}

TEST_F(DatasetErrorTest, NewerFormatVersion) {
  write_dataset(path("n.h5"));
  {
    h5::File::open(path("n.h5"), h5::FileMode::ReadWrite)
        .set_int_attribute("format_version", kDatasetFormatVersion + 1);
  }
  expect_input_error([&] { DatasetReader reader(path("n.h5")); },
                     {path("n.h5"), "format_version 3 is newer than this veomni reads (2)", "upgrade"});
}

TEST_F(DatasetErrorTest, MissingHeaderAttribute) {
  write_dataset(path("a.h5"));
  { ASSERT_GE(H5Adelete(h5::File::open(path("a.h5"), h5::FileMode::ReadWrite).id(), "kind"), 0); }
  expect_input_error([&] { DatasetReader reader(path("a.h5")); }, {path("a.h5"), "'kind'", "missing"});
}

// first_sample + num_samples once overflowed int64 on such a file (found by fuzz_dataset).
TEST_F(DatasetErrorTest, HugeSampleCount) {
  write_dataset(path("c.h5"));
  { h5::File::open(path("c.h5"), h5::FileMode::ReadWrite).set_int_attribute("first_sample", INT64_MAX); }
  expect_input_error([&] { DatasetReader reader(path("c.h5")); },
                     {path("c.h5"), "'first_sample'", "out of range", "at most 2^48"});
}

TEST_F(DatasetErrorTest, MissingOffsetsDataset) {
  write_dataset(path("o.h5"));
  {
    h5::File file = h5::File::open(path("o.h5"), h5::FileMode::ReadWrite);
    ASSERT_GE(H5Ldelete(file.id(), "samples/features/offsets", H5P_DEFAULT), 0);
  }
  expect_input_error([&] { DatasetReader reader(path("o.h5")); }, {path("o.h5"), "samples/features", "offsets"});
}

TEST_F(DatasetErrorTest, UnknownKeyOnRead) {
  write_dataset(path("k.h5"));
  DatasetReader reader(path("k.h5"));
  expect_input_error([&] { reader.read(0, {"pixel_values"}); }, {path("k.h5"), "no key 'pixel_values'", "input_ids"});
  expect_input_error([&] { reader.read(3); }, {"sample 3 out of range", "holds 3"});
}

TEST_F(DatasetErrorTest, BadOffsets) {
  write_dataset(path("b.h5"));
  {
    h5::File file = h5::File::open(path("b.h5"), h5::FileMode::ReadWrite);
    const int64_t backwards = 20;
    file.group("samples").group("features").dataset("offsets").write(&backwards, DType::I64, {1}, {1});
  }
  {
    DatasetReader reader(path("b.h5"));  // only input_ids offsets are checked on open
    expect_input_error([&] { reader.read(1); }, {path("b.h5"), "samples/features/offsets", "sample 1"});
  }

  {
    h5::File file = h5::File::open(path("b.h5"), h5::FileMode::ReadWrite);
    const int64_t backwards = 2;
    file.group("samples").group("input_ids").dataset("offsets").write(&backwards, DType::I64, {2}, {1});
  }
  expect_input_error([&] { DatasetReader again(path("b.h5")); }, {path("b.h5"), "input_ids/offsets", "decrease"});
}

TEST_F(DatasetErrorTest, OffsetsDisagreeWithData) {
  write_dataset(path("d.h5"));
  {
    h5::File file = h5::File::open(path("d.h5"), h5::FileMode::ReadWrite);
    const int64_t too_far = 1000;
    file.group("samples").group("features").dataset("offsets").write(&too_far, DType::I64, {3}, {1});
  }
  expect_input_error([&] { DatasetReader reader(path("d.h5")); }, {path("d.h5"), "features/offsets", "1000"});
}

TEST_F(DatasetErrorTest, WrongStoredElementType) {
  write_dataset(path("w.h5"));
  {
    h5::File::open(path("w.h5"), h5::FileMode::ReadWrite)
        .group("samples")
        .group("features")
        .set_string_attribute("dtype", "i64");
  }
  expect_input_error([&] { DatasetReader reader(path("w.h5")); }, {path("w.h5"), "features/data", "f32", "i64"});
}

TEST_F(DatasetErrorTest, MismatchedSampleKeysOnWrite) {
  DatasetWriter writer(path("m.h5"), info());
  writer.append(sample_of(3));
  Sample extra = sample_of(2);
  extra["labels"] = Tensor::from_vector<int64_t>({1, 2}, {2});
  expect_input_error([&] { writer.append(extra); }, {path("m.h5"), "sample 1", "unexpected: [labels]"});
  Sample missing = sample_of(2);
  missing.erase("features");
  expect_input_error([&] { writer.append(missing); }, {"missing: [features]"});
  Sample wrong_dtype = sample_of(2);
  wrong_dtype["input_ids"] = Tensor::from_vector<int32_t>({1, 2}, {2});
  expect_input_error([&] { writer.append(wrong_dtype); }, {"'input_ids' is i32[2]", "expected i64[L]"});
  Sample wrong_width = sample_of(2);
  wrong_width["features"] = Tensor::zeros({2, 5}, DType::F32);
  expect_input_error([&] { writer.append(wrong_width); }, {"'features' is f32[2, 5]", "expected f32[L, 4]"});
  writer.append(sample_of(4));  // the bad samples left nothing behind
  writer.close();
  DatasetReader reader(path("m.h5"));
  EXPECT_EQ(reader.num_samples(), 2);
  EXPECT_EQ(reader.sequence_length(1), 4);
}

TEST_F(DatasetErrorTest, BadSchemaOnWrite) {
  DatasetWriter writer(path("s.h5"), info());
  expect_input_error([&] { writer.append({{"scalar", Tensor::zeros({}, DType::F32)}}); }, {"'scalar' is a scalar"});
  expect_input_error([&] { writer.append({{"a/b", Tensor::zeros({2}, DType::F32)}}); }, {"invalid key name 'a/b'"});
  expect_input_error([&] { writer.append({{"x", Tensor::zeros({2, 0}, DType::F32)}}); }, {"empty fixed axis"});
  expect_input_error([&] { writer.append({}); }, {"no keys"});
  expect_input_error([&] { DatasetWriter bad(path("k.h5"), DatasetInfo{.kind = "audio"}); },
                     {"unknown dataset kind 'audio'"});
}

TEST_F(DatasetErrorTest, ShardsMustShareKeys) {
  ShardedDatasetWriter writer(path("x.h5"), 2, 2, info());
  writer.append(sample_of(3));
  Sample other = sample_of(3);
  other.erase("features");
  expect_input_error([&] { writer.append(other); }, {"x-00001-of-00002.h5", "missing: [features]"});
}

TEST_F(DatasetErrorTest, ShardedWriterLimits) {
  expect_input_error([&] { ShardedDatasetWriter writer(path("x.h5"), 3, 4, info()); },
                     {"cannot split 3 samples into 4 shards"});
  ShardedDatasetWriter writer(path("y.h5"), 2, 1, info());
  writer.append(sample_of(1));
  EXPECT_THROW(writer.close(), Error);
}

TEST_F(DatasetErrorTest, IncompleteShardSet) {
  {
    ShardedDatasetWriter writer(path("x.h5"), 4, 4, info());
    for (int64_t s = 0; s < 4; ++s) writer.append(sample_of(2, s));
    writer.close();
  }
  fs::remove(path("x-00002-of-00004.h5"));
  expect_input_error([&] { DatasetReader reader(path("x-00000-of-00004.h5")); },
                     {"incomplete dataset", "1 of 4 shards missing", "x-00002-of-00004.h5"});
  expect_input_error([&] { DatasetReader reader(dir_.string()); }, {"x-00002-of-00004.h5"});
}

TEST_F(DatasetErrorTest, ShardRenamedAsALoneFile) {
  {
    ShardedDatasetWriter writer(path("x.h5"), 2, 2, info());
    for (int64_t s = 0; s < 2; ++s) writer.append(sample_of(2, s));
    writer.close();
  }
  fs::rename(path("x-00001-of-00002.h5"), path("lone.h5"));
  expect_input_error([&] { DatasetReader reader(path("lone.h5")); }, {path("lone.h5"), "shard 1 of a set of 2"});
}

TEST_F(DatasetErrorTest, DirectoryWithTwoDatasets) {
  write_dataset(path("a.h5"));
  write_dataset(path("b.h5"));
  expect_input_error([&] { DatasetReader reader(dir_.string()); }, {"more than one dataset", "a.h5", "b.h5"});
}

TEST_F(DatasetErrorTest, SequenceLengthNeedsInputIds) {
  {
    DatasetWriter writer(path("f.h5"), info());
    writer.append({{"features", Tensor::zeros({2, 4}, DType::F32)}});
    writer.close();
  }
  DatasetReader reader(path("f.h5"));
  expect_input_error([&] { reader.sequence_length(0); }, {"no input_ids"});
}
