// TensorBoard event files: CRC-32C vectors, TFRecord framing, the Event wire bytes TensorBoard expects, writing and
// reading back, corrupt and truncated records reported with file and offset.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "tests/common/expect_error.h"
#include "tests/common/scratch_dir.h"
#include "metrics/crc32c.h"
#include "metrics/tensorboard_reader.h"
#include "metrics/tensorboard_writer.h"
#include "metrics/tfrecord.h"
#include "test_ckpt_util.h"

namespace veomni {
namespace {

using test::read_bytes;
using veomni::testing::expect_input_error;

void write_record_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

uint64_t le(const std::string& bytes, size_t pos, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[pos + i]);
  return v;
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of ones, and ascending 0..31.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, MaskRotatesAndAddsTheConstant) {
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0x00008000u), 0xa282ead8u + 1u);  // bit 15 rotates to bit 0
  EXPECT_EQ(mask_crc32c(0x00000001u), 0xa282ead8u + 0x20000u);
}

TEST(TfRecord, FramesLengthCrcDataCrc) {
  const std::string record = frame_tfrecord("hello");
  ASSERT_EQ(record.size(), 8u + 4u + 5u + 4u);
  EXPECT_EQ(le(record, 0, 8), 5u);
  EXPECT_EQ(le(record, 8, 4), mask_crc32c(crc32c(record.substr(0, 8))));
  EXPECT_EQ(record.substr(12, 5), "hello");
  EXPECT_EQ(le(record, 17, 4), mask_crc32c(crc32c("hello")));
}

class TfRecordFile : public veomni::testing::ScratchDir {};

TEST_F(TfRecordFile, ReadsBackEveryRecordWithItsOffset) {
  write_record_bytes(path("r"), frame_tfrecord("a") + frame_tfrecord("") + frame_tfrecord("third"));
  const std::vector<TfRecord> records = read_tfrecords(path("r"));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].data, "a");
  EXPECT_EQ(records[1].offset, 17u);
  EXPECT_EQ(records[1].data, "");
  EXPECT_EQ(records[2].offset, 33u);
  EXPECT_EQ(records[2].data, "third");
}

TEST_F(TfRecordFile, CorruptDataIsReportedWithFileAndOffset) {
  std::string bytes = frame_tfrecord("first") + frame_tfrecord("second");
  bytes[21 + 12 + 2] ^= 0x01;  // a data byte of the second record (the first is 21 bytes)
  write_record_bytes(path("r"), bytes);
  expect_input_error([&] { read_tfrecords(path("r")); },
                     {path("r"), "record at byte offset 21", "CRC of its 6 data bytes does not match"});
}

TEST_F(TfRecordFile, CorruptLengthAndTruncationAreReported) {
  std::string bytes = frame_tfrecord("first");
  bytes[3] ^= 0x40;
  write_record_bytes(path("len"), bytes);
  expect_input_error([&] { read_tfrecords(path("len")); }, {"byte offset 0", "CRC of its length field"});
  const std::string whole = frame_tfrecord("first") + frame_tfrecord("second");
  write_record_bytes(path("cut"), whole.substr(0, whole.size() - 3));
  expect_input_error([&] { read_tfrecords(path("cut")); }, {"byte offset 21", "truncated"});
  write_record_bytes(path("head"), whole.substr(0, 21 + 5));
  expect_input_error([&] { read_tfrecords(path("head")); }, {"byte offset 21", "ends inside its header"});
}

TEST(TensorBoardWriter, EventFileNameIsWhatTensorBoardLooksFor) {
  EXPECT_EQ(tensorboard_event_file_name(1700000000, "node-3"), "events.out.tfevents.1700000000.node-3");
}

class TensorBoardFiles : public veomni::testing::ScratchDir {};

TEST_F(TensorBoardFiles, WritesFileVersionThenOneEventPerStepAndReadsThemBack) {
  if (!tensorboard_supported()) {
    expect_input_error([&] { TensorBoardWriter writer(path("tb")); }, {"protobuf", "train.use_tensorboard false"});
    return;
  }
  std::string written;
  {
    TensorBoardWriter writer(path("tb"));
    written = writer.path();
    writer.add_scalars(1, {{"loss", 2.5}, {"grad_norm", 0.1}, {"lr", 1e-5}});
    // Flushed at every step: a live TensorBoard (or a crash) sees the step without the writer closing.
    EXPECT_EQ(read_tensorboard_event_file(written).scalars.size(), 3u);
    writer.add_scalars(2, {{"loss", 2.25}, {"grad_norm", 0.2}, {"lr", 2e-5}});
  }
  EXPECT_EQ(list_tensorboard_event_files(path("tb")), std::vector<std::string>{written});
  EXPECT_NE(written.find("/events.out.tfevents."), std::string::npos);
  const TensorBoardEventFile file = read_tensorboard_event_file(written);
  EXPECT_EQ(file.file_version, "brain.Event:2");
  ASSERT_EQ(file.scalars.size(), 6u);
  EXPECT_EQ(file.scalars[0].tag, "loss");
  EXPECT_EQ(file.scalars[0].step, 1);
  EXPECT_EQ(file.scalars[0].value, 2.5f);
  EXPECT_EQ(file.scalars[2].value, static_cast<float>(1e-5));
  EXPECT_EQ(file.scalars[4].tag, "grad_norm");
  EXPECT_EQ(file.scalars[4].step, 2);
  EXPECT_EQ(file.scalars[4].value, 0.2f);
  EXPECT_GT(file.scalars[5].wall_time, 1.6e9);
}

// The field numbers TensorBoard reads (TensorFlow's event.proto and summary.proto), checked on the raw bytes:
// Event.wall_time 1 (double), step 2 (varint), file_version 3 (string), summary 5; Summary.value 1; Value.tag 1,
// simple_value 2 (float).
TEST_F(TensorBoardFiles, EventBytesUseTensorFlowsFieldNumbers) {
  if (!tensorboard_supported()) GTEST_SKIP() << "this build has no protobuf (TensorBoard files disabled)";
  std::string written;
  {
    TensorBoardWriter writer(path("tb"));
    written = writer.path();
    writer.add_scalars(7, {{"loss", 1.5}});
  }
  const std::vector<TfRecord> records = read_tfrecords(written);
  ASSERT_EQ(records.size(), 2u);
  const std::string& version = records[0].data;
  ASSERT_EQ(version.size(), 9u + 2u + 13u);
  EXPECT_EQ(version[0], '\x09');
  EXPECT_EQ(version.substr(9), std::string("\x1a\x0d") + "brain.Event:2");
  const std::string& event = records[1].data;
  float value = 1.5f;
  std::string value_bytes(4, '\0');
  std::memcpy(value_bytes.data(), &value, 4);
  const std::string summary_value = std::string("\x0a\x04loss\x15", 7) + value_bytes;
  const std::string summary = std::string("\x0a") + static_cast<char>(summary_value.size()) + summary_value;
  const std::string tail = std::string("\x10\x07\x2a", 3) + static_cast<char>(summary.size()) + summary;
  EXPECT_EQ(event[0], '\x09');
  EXPECT_EQ(event.substr(9), tail);
}

TEST_F(TensorBoardFiles, ASecondWriterInTheDirectoryStartsItsOwnFile) {
  if (!tensorboard_supported()) GTEST_SKIP() << "this build has no protobuf (TensorBoard files disabled)";
  TensorBoardWriter first(path("tb"));
  TensorBoardWriter second(path("tb"));
  EXPECT_NE(first.path(), second.path());
  EXPECT_EQ(list_tensorboard_event_files(path("tb")).size(), 2u);
}

TEST_F(TensorBoardFiles, CorruptEventRecordIsReportedWithFileAndOffset) {
  if (!tensorboard_supported()) GTEST_SKIP() << "this build has no protobuf (TensorBoard files disabled)";
  std::string written;
  {
    TensorBoardWriter writer(path("tb"));
    written = writer.path();
    writer.add_scalars(1, {{"loss", 3.0}});
  }
  std::string bytes = read_bytes(written);
  const size_t second = read_tfrecords(written)[1].offset;
  bytes[bytes.size() - 6] ^= 0x10;  // inside the step's value
  write_record_bytes(written, bytes);
  expect_input_error([&] { read_tensorboard_event_file(written); },
                     {written, fmt::format("record at byte offset {}", second), "does not match"});
}

}  // namespace
}  // namespace veomni
