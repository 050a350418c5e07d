// Unit tests of safetensors reading and writing: exact bytes, every dtype, streaming, and each invalid file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/error.h"
#include "core/tensor.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "test_ckpt_util.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/expect_error.h"

using namespace veomni;
namespace fs = std::filesystem;

namespace {

class Safetensors : public veomni::testing::ScratchDir {
 protected:

  // A file made of an explicit header length (default: the header's), the header text and the data bytes.
  std::string write_raw(const std::string& name, const std::string& header, const std::string& data,
                        std::optional<uint64_t> header_length = std::nullopt) const {
    const uint64_t n = header_length.value_or(header.size());
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << data;
    return path(name);
  }
};

std::string le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

using veomni::test::read_bytes;
using veomni::test::same_bytes;
using veomni::testing::expect_input_error;

// A tensor whose bytes are 0, 1, 2, ... (mod 251) so any misplaced byte shows.
Tensor patterned_tensor(const Shape& shape, DType dtype, int seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>((i * 7 + seed) % 251);
  if (dtype == DType::Bool)
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  return t;
}

}  // namespace

TEST_F(Safetensors, DTypeNames) {
  EXPECT_STREQ(safetensors_dtype_name(DType::BF16), "BF16");
  EXPECT_STREQ(safetensors_dtype_name(DType::Bool), "BOOL");
  EXPECT_EQ(dtype_from_safetensors_name("I64"), DType::I64);
  expect_input_error([] { dtype_from_safetensors_name("F64"); }, {"'F64'", "BF16"});
  expect_input_error([] { dtype_from_safetensors_name("bf16"); }, {"'bf16'"});  // the format's names are upper-case
}

TEST_F(Safetensors, ExactBytesWithHeaderPaddedToEight) {
  write_safetensors(path("a.safetensors"), {{"a", Tensor::from_vector<float>({1.0f, 2.0f}, {2})}});
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 54 bytes
  const float data[2] = {1.0f, 2.0f};
  EXPECT_EQ(read_bytes(path("a.safetensors")),
            le64(56) + header + "  " + std::string(reinterpret_cast<const char*>(data), 8));
}

TEST_F(Safetensors, MetadataComesFirstAndScalarsWork) {
  Tensor scalar = Tensor::empty({}, DType::BF16);
  scalar.data<bf16>()[0] = float_to_bf16(1.0f);
  write_safetensors(path("m.safetensors"), {{"w", scalar}}, {{"format", "pt"}});
  const std::string header = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}})";
  EXPECT_EQ(read_bytes(path("m.safetensors")), le64(88) + header + "   " + std::string("\x80\x3f", 2));
  SafetensorsReader reader(path("m.safetensors"));
  EXPECT_EQ(reader.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(reader.data_offset(), 96u);
  EXPECT_TRUE(same_bytes(reader.read("w"), scalar));
}

TEST_F(Safetensors, RoundTripEveryDType) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  int seed = 0;
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8, DType::Bool}) {
    tensors.emplace_back(fmt::format("t.{}", dtype_name(d)), patterned_tensor({3, 5}, d, ++seed));
    tensors.emplace_back(fmt::format("v.{}", dtype_name(d)), patterned_tensor({7}, d, ++seed));
  }
  tensors.emplace_back("empty", Tensor::empty({0, 4}, DType::F32));
  write_safetensors(path("all.safetensors"), tensors, {{"format", "pt"}, {"producer", "veomni"}});

  SafetensorsReader reader(path("all.safetensors"));
  EXPECT_EQ(reader.metadata().at("producer"), "veomni");
  ASSERT_EQ(reader.entries().size(), tensors.size());
  EXPECT_EQ(reader.data_offset() % 8, 0u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    EXPECT_EQ(reader.entries()[i].name, name);  // the writer keeps the order tensors were given in
    EXPECT_TRUE(reader.contains(name));
    EXPECT_EQ(reader.entry(name).dtype, tensor.dtype());
    EXPECT_EQ(reader.entry(name).shape, tensor.shape());
    EXPECT_EQ(reader.entry(name).nbytes(), tensor.nbytes());
    EXPECT_TRUE(same_bytes(reader.read(name), tensor)) << name;
  }
  Tensor into = Tensor::zeros({3, 5}, DType::I64);
  reader.read_into("t.i64", into);
  EXPECT_TRUE(same_bytes(into, tensors[8].second));
  EXPECT_FALSE(reader.contains("nope"));
  expect_input_error([&] { reader.read("nope"); }, {path("all.safetensors"), "'nope'"});
}

TEST_F(Safetensors, ReadRowsReadsOnlyThoseRows) {
  const Tensor t = patterned_tensor({6, 3}, DType::F32, 5);
  write_safetensors(path("r.safetensors"), {{"x", t}});
  SafetensorsReader reader(path("r.safetensors"));
  EXPECT_TRUE(same_bytes(reader.read_rows("x", 2, 5), t.slice(2, 5).clone()));
  EXPECT_EQ(reader.read_rows("x", 6, 6).shape(), (Shape{0, 3}));
  EXPECT_THROW(reader.read_rows("x", 4, 7), Error);
}

TEST_F(Safetensors, StreamingWriterInRowBlocks) {
  const Tensor a = patterned_tensor({5, 4}, DType::BF16, 1);
  const Tensor b = patterned_tensor({3}, DType::I32, 2);
  {
    SafetensorsWriter w(path("s.safetensors"), {{"format", "pt"}});
    w.declare("a", DType::BF16, {5, 4});
    w.declare("b", DType::I32, {3});
    EXPECT_EQ(w.header_bytes() % 8, 0u);
    EXPECT_EQ(w.file_bytes(), 8 + w.header_bytes() + 40 + 12);
    w.write_rows("a", a.slice(0, 2));
    EXPECT_FALSE(w.all_written());
    EXPECT_THROW(w.write("b", b), Error);  // "a" is not complete yet
    w.write_rows("a", a.slice(2, 5));
    EXPECT_THROW(w.declare("c", DType::F32, {1}), Error);  // declarations end with the first write
    EXPECT_FALSE(fs::exists(path("s.safetensors")));    // nothing under the final name before finish()
    w.write("b", b);
    EXPECT_TRUE(w.all_written());
    w.finish();
    EXPECT_EQ(fs::file_size(path("s.safetensors")), w.file_bytes());
  }
  SafetensorsReader reader(path("s.safetensors"));
  EXPECT_TRUE(same_bytes(reader.read("a"), a));
  EXPECT_TRUE(same_bytes(reader.read("b"), b));
}

TEST_F(Safetensors, WriterMisuseIsAnInternalError) {
  SafetensorsWriter w(path("bad.safetensors"));
  w.declare("a", DType::F32, {2});
  w.declare("b", DType::F32, {2});
  EXPECT_THROW(w.declare("a", DType::F32, {2}), Error);
  EXPECT_THROW(w.write("b", Tensor::zeros({2}, DType::F32)), Error);  // out of order
  EXPECT_THROW(w.write("a", Tensor::zeros({3}, DType::F32)), Error);  // shape differs
  EXPECT_THROW(w.write("a", Tensor::zeros({2}, DType::BF16)), Error);  // dtype differs
  w.write("a", Tensor::zeros({2}, DType::F32));
  EXPECT_THROW(w.finish(), Error);  // "b" missing
}

TEST_F(Safetensors, UnfinishedWriterLeavesNothing) {
  {
    SafetensorsWriter w(path("u.safetensors"));
    w.declare("a", DType::F32, {1000});
    w.write("a", Tensor::zeros({1000}, DType::F32));
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(Safetensors, EmptyFileRoundTrip) {
  write_safetensors(path("e.safetensors"), {});
  EXPECT_EQ(read_bytes(path("e.safetensors")), le64(8) + "{}      ");
  EXPECT_TRUE(SafetensorsReader(path("e.safetensors")).entries().empty());
}

TEST_F(Safetensors, AcceptsUnpaddedHeadersAndAnyOffsetOrder) {
  // Other writers need not pad, and may list tensors in any order in the JSON.
  const std::string header =
      R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  const std::string p = write_raw("o.safetensors", header, std::string("\x01\x00\x00\x00\x07\x08", 6));
  SafetensorsReader reader(p);
  ASSERT_EQ(reader.entries().size(), 2u);
  EXPECT_EQ(reader.entries()[0].name, "a");
  EXPECT_EQ(reader.read("a").data<int32_t>()[0], 1);
  EXPECT_EQ(reader.read("b").data<uint8_t>()[1], 8);
}

TEST_F(Safetensors, InvalidFilesAreInputErrorsNamingTheFile) {
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  struct Case {
    std::string name;
    std::string header;
    std::string data;
    std::optional<uint64_t> length;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"length_beyond_file", f32x2, eight, 1000, "header length 1000 exceeds"},
      {"length_huge", f32x2, eight, uint64_t{1} << 62, "exceeds"},
      {"length_tiny", "{", "", std::nullopt, "too small"},
      {"bad_json", R"({"a":{"dtype":"F32",})", "", std::nullopt, "(safetensors header):1:21: invalid JSON"},
      {"not_object", "[1,2]", "", std::nullopt, "must be a JSON object"},
      {"unknown_dtype", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'a': unsupported safetensors dtype 'F64'"},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'a' (F32 [3]) needs 12 bytes but its data_offsets [0, 8) span 8"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       std::string(12, '\0'), std::nullopt, "tensor 'b' at data_offsets [4, 12) overlaps 'a' at [0, 8)"},
      {"gap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
       std::string(20, '\0'), std::nullopt, "gap in the data section: bytes [8, 12) before tensor 'b'"},
      {"not_from_zero", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0'),
       std::nullopt, "bytes [0, 4) before tensor 'a'"},
      {"truncated_data", f32x2, "1234", std::nullopt, "truncated file: its tensors need 8 bytes of data but only 4"},
      {"trailing_bytes", f32x2, std::string(12, '\0'), std::nullopt, "4 unexpected bytes after the last tensor"},
      {"reversed_offsets", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight, std::nullopt,
       "end before they begin"},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight, std::nullopt,
       "shape must hold non-negative integers, found -2"},
      {"missing_field", R"({"a":{"dtype":"F32","shape":[2]}})", eight, std::nullopt, "has no 'data_offsets'"},
      {"overflowing_shape", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight,
       std::nullopt, "overflows 64 bits"},
      {"bad_metadata", R"({"__metadata__":{"format":1}})", "", std::nullopt, "__metadata__ 'format' must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = write_raw(c.name + ".safetensors", c.header, c.data, c.length);
    expect_input_error([&] { SafetensorsReader reader(p); }, {p, c.fragment});
  }
  std::ofstream(path("short.safetensors"), std::ios::binary) << "abc";
  expect_input_error([&] { SafetensorsReader reader(path("short.safetensors")); },
                     {path("short.safetensors"), "too short"});
  expect_input_error([&] { SafetensorsReader reader(path("missing.safetensors")); }, {path("missing.safetensors")});
  expect_input_error([&] { SafetensorsReader reader(dir_.string()); }, {dir_.string(), "not a regular file"});
}

TEST_F(Safetensors, TruncatedValidFileIsRejected) {
  write_safetensors(path("t.safetensors"), {{"a", patterned_tensor({64}, DType::F32, 3)}});
  fs::resize_file(path("t.safetensors"), fs::file_size(path("t.safetensors")) - 10);
  expect_input_error([&] { SafetensorsReader reader(path("t.safetensors")); },
                     {path("t.safetensors"), "truncated file"});
  fs::resize_file(path("t.safetensors"), 20);  // cut inside the header
  expect_input_error([&] { SafetensorsReader reader(path("t.safetensors")); },
                     {path("t.safetensors"), "header length 64 exceeds the 12 bytes"});
}
