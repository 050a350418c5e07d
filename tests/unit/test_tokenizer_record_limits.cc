// Unit tests of the preprocessing record reader on hostile input: endless lines, NUL bytes and number overflows
// are InputErrors naming the file and line (with the text library, like the other tokenizer tests).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/text_preprocess_input.h"
#include "data/text_preprocess_record.h"
#include "tests/common/scratch_dir.h"

using namespace veomni;

namespace {

using RecordLimits = veomni::testing::ScratchDir;

std::string record_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "no error";
}

void read_all(RecordReader& reader) {
  std::vector<RecordRef> block;
  while (reader.next_block(block)) {
  }
}

TEST_F(RecordLimits, LineLongerThanTheLimitNamesFileAndLine) {
  std::ofstream(path("a.jsonl")) << "{\"text\": \"ok\"}\n{\"text\": \"" << std::string(300, 'x') << "\"}\n";
  RecordReader reader({path("a.jsonl")}, 16, 100);
  const std::string message = record_error_of([&] { read_all(reader); });
  EXPECT_NE(message.find("a.jsonl:2: the line is longer than 100 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("--max-line-bytes"), std::string::npos) << message;
}

TEST_F(RecordLimits, EndlessInputStopsAtTheLimit) {
  RecordReader reader({"/dev/zero"}, 1 << 16, 1 << 20);
  const std::string message = record_error_of([&] { read_all(reader); });
  EXPECT_NE(message.find("/dev/zero:1: the line is longer than 1048576 bytes"), std::string::npos) << message;
}

TEST_F(RecordLimits, LinesWithinTheLimitAreRead) {
  std::ofstream(path("b.jsonl")) << "{\"text\": \"" << std::string(80, 'x') << "\"}\n{}\n";
  RecordReader reader({path("b.jsonl")}, 16, 100);
  std::vector<RecordRef> block;
  size_t records = 0;
  while (reader.next_block(block)) records += block.size();
  EXPECT_EQ(records, 2u);
}

TEST(RecordLine, NulByteAndNumberOverflowAreErrorsWithTheColumn) {
  const std::string with_nul("{\"text\": \"ok\"}\0{\"text\": \"hidden\"}", 33);
  EXPECT_NE(record_error_of([&] { parse_record_line(with_nul); }).find("NUL byte at column 15"), std::string::npos);
  const std::string overflow = record_error_of([] { parse_record_line("{\"text\": 1e999}"); });
  EXPECT_NE(overflow.find("invalid JSON at column 10: number overflow"), std::string::npos) << overflow;
}

}  // namespace
