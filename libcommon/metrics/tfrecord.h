// TFRecord framing, the container of TensorBoard event files: each record is a little-endian uint64 length, the
// masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace veomni {

// One framed record, ready to append to a file.
std::string frame_tfrecord(std::string_view data);

struct TfRecord {
  uint64_t offset = 0;  // byte offset of the record's length field in the file
  std::string data;
};

// Every record of a TFRecord file, both CRCs checked. Throws InputError naming the file and the record's byte offset
// when a CRC does not match or the file ends inside a record.
std::vector<TfRecord> read_tfrecords(const std::string& path);

}  // namespace veomni
