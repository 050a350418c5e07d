// TFRecord framing: write one record, read a whole file back with its CRCs checked.
#include "metrics/tfrecord.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "metrics/crc32c.h"

namespace veomni {

namespace {

constexpr size_t kLengthBytes = 8, kCrcBytes = 4;

void append_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

uint64_t read_le(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

}  // namespace

std::string frame_tfrecord(std::string_view data) {
  std::string out;
  out.reserve(kLengthBytes + 2 * kCrcBytes + data.size());
  append_le(out, data.size(), kLengthBytes);
  append_le(out, mask_crc32c(crc32c(out)), kCrcBytes);
  out.append(data);
  append_le(out, mask_crc32c(crc32c(data)), kCrcBytes);
  return out;
}

std::vector<TfRecord> read_tfrecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  VEOMNI_INPUT_CHECK(in.good(), "cannot open event file '{}': {}", path, std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string_view file(bytes);
  std::vector<TfRecord> records;
  size_t pos = 0;
  while (pos < file.size()) {
    const uint64_t offset = pos;
    VEOMNI_INPUT_CHECK(file.size() - pos >= kLengthBytes + kCrcBytes,
                       "{}: record at byte offset {}: the file ends inside its header ({} of {} bytes)", path, offset,
                       file.size() - pos, kLengthBytes + kCrcBytes);
    const std::string_view length_field = file.substr(pos, kLengthBytes);
    const uint64_t length_crc = read_le(file.substr(pos + kLengthBytes, kCrcBytes));
    VEOMNI_INPUT_CHECK(length_crc == mask_crc32c(crc32c(length_field)),
                       "{}: record at byte offset {}: the CRC of its length field does not match (corrupt file)", path,
                       offset);
    const uint64_t length = read_le(length_field);
    pos += kLengthBytes + kCrcBytes;
    VEOMNI_INPUT_CHECK(file.size() - pos >= kCrcBytes && length <= file.size() - pos - kCrcBytes,
                       "{}: record at byte offset {}: the file ends inside its {} data bytes (truncated)", path, offset,
                       length);
    const std::string_view data = file.substr(pos, length);
    const uint64_t data_crc = read_le(file.substr(pos + length, kCrcBytes));
    VEOMNI_INPUT_CHECK(data_crc == mask_crc32c(crc32c(data)),
                       "{}: record at byte offset {}: the CRC of its {} data bytes does not match (corrupt file)", path,
                       offset, length);
    records.push_back({offset, std::string(data)});
    pos += length + kCrcBytes;
  }
  return records;
}

}  // namespace veomni
