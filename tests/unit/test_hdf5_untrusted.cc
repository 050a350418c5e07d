// Unit tests of HDF5 files from outside: fixed-length string writes, bounded reads of older variable-length ones,
// and datasets stored in forms veomni does not write.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "data/dataset_reader.h"
#include "io/hdf5_file.h"
#include "test_ckpt_util.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

using Hdf5UntrustedTest = veomni::testing::ScratchDir;
using veomni::test::read_bytes;

void put_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A root attribute written as veomni wrote strings before they became fixed-length (variable-length UTF-8).
void write_vlen_attribute(const std::string& path, const char* name, const char* value) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(attribute, type, &value), 0);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(file);
}

std::string read_string(const std::string& path, const std::string& name) {
  return h5::File::open(path).string_attribute(name);
}

using veomni::testing::input_error_of;

}  // namespace

TEST_F(Hdf5UntrustedTest, WritesFixedLengthStringsWithoutAGlobalHeap) {
  {
    h5::File file = h5::File::create(path("a.h5"));
    file.set_string_attribute("title", "caf\xc3\xa9 au lait");
    file.set_string_attribute("empty", "");
  }
  EXPECT_EQ(read_string(path("a.h5"), "title"), "caf\xc3\xa9 au lait");
  EXPECT_EQ(read_string(path("a.h5"), "empty"), "");
  // Variable-length strings live in a global heap collection ("GCOL"); fixed-length ones do not need one.
  EXPECT_EQ(read_bytes(path("a.h5")).find("GCOL"), std::string::npos);
}

TEST_F(Hdf5UntrustedTest, ReadsVariableLengthStringsOfOlderFiles) {
  write_vlen_attribute(path("old.h5"), "format", "veomni-dataset");
  EXPECT_NE(read_bytes(path("old.h5")).find("GCOL"), std::string::npos);
  EXPECT_EQ(read_string(path("old.h5"), "format"), "veomni-dataset");
  write_vlen_attribute(path("empty.h5"), "format", "");
  EXPECT_EQ(read_string(path("empty.h5"), "format"), "");
}

TEST_F(Hdf5UntrustedTest, ReadsTheCommittedFilesOfAnOlderWriter) {
  // Written with variable-length strings (format, kind, producer, dtype of every key).
  const std::string fixture = std::string(VEOMNI_SOURCE_DIR) + "/tests/fixtures/multimodal_train/mixed_media.h5";
  ASSERT_NE(read_bytes(fixture).find("GCOL"), std::string::npos);
  DatasetReader reader(fixture);
  EXPECT_GT(reader.num_samples(), 0);
  EXPECT_FALSE(reader.read(0).empty());
  const std::string seed = std::string(VEOMNI_SOURCE_DIR) + "/tests/fuzz/corpus/rank_file/rank-00000-of-00001.h5";
  ASSERT_NE(read_bytes(seed).find("GCOL"), std::string::npos);
  EXPECT_EQ(read_string(seed, "format"), "veomni-checkpoint-rank");
}

// Each damage of the global heap that made HDF5 1.10's own reader loop forever, overlap a memcpy or allocate
// 2^62 bytes is now an InputError naming the file and the attribute.
TEST_F(Hdf5UntrustedTest, DamagedGlobalHeapIsAnInputError) {
  write_vlen_attribute(path("good.h5"), "format", "veomni-dataset");
  const std::string good = read_bytes(path("good.h5"));
  const size_t heap = good.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  const size_t object = heap + 16;  // the first object's header: index, references, reserved, size
  struct Damage {
    const char* what;
    size_t at;
    std::string bytes;
  };
  const std::vector<Damage> damages = {
      {"collection size 2^62", heap + 8, std::string("\0\0\0\0\0\0\0\x40", 8)},
      {"collection beyond the file", heap + 8, std::string("\0\0\x10\0\0\0\0\0", 8)},
      {"object size 2^63", object + 8, std::string("\0\0\0\0\0\0\0\x80", 8)},
      {"object size past the collection", object + 8, std::string("\0\x20\0\0\0\0\0\0", 8)},
      {"object index missing", object, std::string("\x07\0", 2)},
      {"signature", heap, "GCOX"},
  };
  for (const Damage& damage : damages) {
    std::string bytes = good;
    bytes.replace(damage.at, damage.bytes.size(), damage.bytes);
    put_file_bytes(path("bad.h5"), bytes);
    const std::string message = input_error_of([&] { read_string(path("bad.h5"), "format"); });
    EXPECT_NE(message.find(path("bad.h5")), std::string::npos) << damage.what << ": " << message;
    EXPECT_NE(message.find("attribute 'format'"), std::string::npos) << damage.what << ": " << message;
  }
}

TEST_F(Hdf5UntrustedTest, OverlongFixedLengthStringIsAnInputError) {
  {
    h5::File file = h5::File::create(path("long.h5"));
    file.set_string_attribute("title", std::string(1000, 'x'));
  }
  // The datatype message of the 1001-byte string (class 3, version 1), its size damaged to 1 GiB.
  std::string bytes = read_bytes(path("long.h5"));
  const size_t type = bytes.find(std::string("\xe9\x03\x00\x00", 4));
  ASSERT_NE(type, std::string::npos);
  ASSERT_EQ(bytes[type - 4] & 0x0F, 3);
  bytes.replace(type, 4, std::string("\x00\x00\x00\x40", 4));
  put_file_bytes(path("long.h5"), bytes);
  const std::string message = input_error_of([&] { read_string(path("long.h5"), "title"); });
  EXPECT_NE(message.find("attribute 'title'"), std::string::npos) << message;
}

TEST_F(Hdf5UntrustedTest, DatasetWithAForeignFilterIsAnInputError) {
  {
    const hid_t file = H5Fcreate(path("so.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[1] = {16}, chunk[1] = {8};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(plist, 1, chunk);
    H5Pset_scaleoffset(plist, H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT);
    const hid_t dataset = H5Dcreate2(file, "x", H5T_STD_I64LE, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    std::vector<int64_t> values(16, 7);
    ASSERT_GE(H5Dwrite(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(dataset);
    H5Pclose(plist);
    H5Sclose(space);
    H5Fclose(file);
  }
  const std::string message = input_error_of([&] {
    int64_t value = 0;
    h5::File::open(path("so.h5")).dataset("x").read(&value, DType::I64, {0}, {1});
  });
  EXPECT_NE(message.find(path("so.h5") + ":/x"), std::string::npos) << message;
  EXPECT_NE(message.find("filter"), std::string::npos) << message;
}

// HDF5 1.10 divided by a chunk extent of 0 while opening such a dataset (SIGFPE; found by fuzz_dataset).
TEST_F(Hdf5UntrustedTest, ChunkExtentOfZeroIsAnInputError) {
  {
    h5::File file = h5::File::create(path("chunk.h5"));
    h5::DatasetLayout layout;
    layout.dtype = DType::I64;
    layout.shape = {16};
    layout.chunk = {8};
    file.create_dataset("x", layout);
  }
  // The layout message (version 3, chunked, 2 axes: 8 elements, 8 bytes each), its first extent damaged to 0.
  std::string bytes = read_bytes(path("chunk.h5"));
  size_t layout = bytes.find(std::string("\x03\x02\x02", 3));
  while (layout != std::string::npos && bytes.compare(layout + 11, 8, std::string("\x08\0\0\0\x08\0\0\0", 8)) != 0)
    layout = bytes.find(std::string("\x03\x02\x02", 3), layout + 1);
  ASSERT_NE(layout, std::string::npos);
  bytes.replace(layout + 11, 4, std::string(4, '\0'));
  put_file_bytes(path("chunk.h5"), bytes);
  const std::string message = input_error_of([&] { (void)h5::File::open(path("chunk.h5")).dataset("x"); });
  EXPECT_NE(message.find(path("chunk.h5") + ":/x"), std::string::npos) << message;
  EXPECT_NE(message.find("0 elements long along axis 0"), std::string::npos) << message;
}

// HDF5 1.10 decoded an attribute message whose datatype size ran past the message, reading freed memory (found by
// fuzz_dataset); the object header is now checked when the file or a member is opened.
TEST_F(Hdf5UntrustedTest, AttributeMessageLargerThanItselfIsAnInputError) {
  {
    h5::File file = h5::File::create(path("attr.h5"));
    file.set_int_attribute("num_shards", 1);
  }
  // The version-1 attribute message: version 1, reserved, name size 11, datatype size 12, ...
  std::string bytes = read_bytes(path("attr.h5"));
  const size_t name = bytes.find("num_shards");
  ASSERT_NE(name, std::string::npos);
  const size_t message = name - 8;
  ASSERT_EQ(bytes.compare(message, 6, std::string("\x01\x00\x0b\x00\x0c\x00", 6)), 0);
  bytes[message + 5] = '\xe1';  // datatype size 0xe10c
  put_file_bytes(path("attr.h5"), bytes);
  const std::string error = input_error_of([&] { (void)h5::File::open(path("attr.h5")).int_attribute("num_shards"); });
  EXPECT_NE(error.find(path("attr.h5") + " attribute 'num_shards'"), std::string::npos) << error;
  EXPECT_NE(error.find("larger than itself"), std::string::npos) << error;
}

// HDF5's integer conversion walked the bits a damaged precision names, past the attribute's value (a SEGV in
// H5T__bit_find, found by fuzz_rank_file); a number type whose bits leave its element is now an InputError.
TEST_F(Hdf5UntrustedTest, NumberTypeWithBitsOutsideItsElementIsAnInputError) {
  {
    h5::File file = h5::File::create(path("bits.h5"));
    file.set_int_attribute("num_shards", 1);
  }
  std::string bytes = read_bytes(path("bits.h5"));
  const size_t name = bytes.find("num_shards");
  ASSERT_NE(name, std::string::npos);
  // Version-1 message: the name (11 bytes, padded to 16) after 8 header bytes, then the datatype: class and bit
  // fields (4), element size (4), bit offset (2), precision (2).
  const size_t type = name + 16;
  ASSERT_EQ(bytes[type] & 0x0F, 0);  // fixed-point
  ASSERT_EQ(static_cast<uint8_t>(bytes[type + 10]), 64);  // a 64-bit integer's precision
  bytes[type + 11] = '\x0f';  // precision 0x0f40 bits in an 8-byte element
  put_file_bytes(path("bits.h5"), bytes);
  const std::string error = input_error_of([&] { (void)h5::File::open(path("bits.h5")).int_attribute("num_shards"); });
  EXPECT_NE(error.find(path("bits.h5") + " attribute 'num_shards'"), std::string::npos) << error;
  EXPECT_NE(error.find("number type is damaged"), std::string::npos) << error;
}

// H5Fopen loaded the root group's header and allocated the length of a damaged continuation message, up to 2^63
// bytes (found by fuzz_dataset); the root header is now checked against the file size before HDF5 opens the file.
TEST_F(Hdf5UntrustedTest, HeaderContinuationBeyondTheFileIsAnInputError) {
  {
    h5::File file = h5::File::create(path("cont.h5"));
    for (int i = 0; i < 12; ++i) file.set_int_attribute(fmt::format("attribute_{}", i), i);
  }
  // The root header's continuation message (type 0x10, 16 bytes: address, length): its length damaged to 2^59.
  std::string bytes = read_bytes(path("cont.h5"));
  const size_t message = bytes.find(std::string("\x10\x00\x10\x00\x00\x00\x00\x00", 8));
  ASSERT_NE(message, std::string::npos);
  bytes.replace(message + 8 + 8, 8, std::string("\0\0\0\0\0\0\0\x08", 8));
  put_file_bytes(path("cont.h5"), bytes);
  const std::string error = input_error_of([&] { (void)h5::File::open(path("cont.h5")); });
  EXPECT_NE(error.find(path("cont.h5")), std::string::npos) << error;
  EXPECT_NE(error.find("beyond the end of the file"), std::string::npos) << error;
}

// Looking up a link allocated the data size that a damaged local heap of the group declares, up to 2^59 bytes (found
// by fuzz_rank_file); the heap is now checked with the group's object header.
TEST_F(Hdf5UntrustedTest, LocalHeapBeyondTheFileIsAnInputError) {
  {
    h5::File file = h5::File::create(path("heap.h5"));
    file.create_group("state");
  }
  // The local heap of the root group: "HEAP", version 0, 3 reserved bytes, then its data segment size.
  std::string bytes = read_bytes(path("heap.h5"));
  const size_t heap = bytes.find("HEAP");
  ASSERT_NE(heap, std::string::npos);
  bytes.replace(heap + 8, 8, std::string("\0\0\0\0\0\0\0\x08", 8));
  put_file_bytes(path("heap.h5"), bytes);
  const std::string error = input_error_of([&] { (void)h5::File::open(path("heap.h5")).contains("state"); });
  EXPECT_NE(error.find(path("heap.h5")), std::string::npos) << error;
  EXPECT_NE(error.find("local heap"), std::string::npos) << error;
}
