// Reading preprocessing inputs in blocks of records: JSONL (one object a line) or JSON arrays; "-" is stdin.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress_meter.h"

namespace veomni {

// One record of a block: a JSONL line (value null) or an element of a JSON array (line empty).
struct RecordRef {
  size_t file = 0;     // index in the reader's paths
  int64_t number = 0;  // 1-based line of a JSONL file, 0-based element of an array
  std::string_view line;
  const nlohmann::json* value = nullptr;
};

// The longest JSONL line read by default: room for a multimodal record with inline data, while a file without
// line breaks (a binary file, /dev/zero) fails early instead of filling the memory.
inline constexpr size_t kDefaultMaxLineBytes = size_t{64} << 20;

class RecordReader {
 public:
  // Opens nothing yet; InputError later names a path that cannot be read. A JSONL line longer than max_line_bytes
  // is an InputError naming the file and line.
  static constexpr size_t kDefaultBlockBytes = size_t{4} << 20;
  explicit RecordReader(std::vector<std::string> paths, size_t block_bytes = kDefaultBlockBytes,
                        size_t max_line_bytes = kDefaultMaxLineBytes);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // The next block of records (lines that are empty or only spaces are not records); false at the end. The views
  // stay valid until the next call. A file whose first non-space byte is '[' is read whole as a JSON array
  // (InputError "<path>:<line>:<column>: invalid JSON" when it is not one).
  bool next_block(std::vector<RecordRef>& out);

  // "data.jsonl:12" or "data.json: element 3", for messages.
  std::string location(const RecordRef& record) const;
  const std::string& path(size_t file) const { return paths_[file]; }
  // Records handed out so far in `file` (to tell an empty file).
  int64_t records_in(size_t file) const { return records_in_[file]; }
  size_t num_files() const { return paths_.size(); }
  uint64_t bytes_read() const { return bytes_read_; }
  // Sum of the sizes of the regular files among the inputs (0 when one is stdin or a pipe: no estimate).
  uint64_t bytes_total() const { return bytes_total_; }

 private:
  bool open_next_file();
  void read_json_array(std::string head);
  bool read_more();
  void check_line_length(size_t bytes, int64_t line) const;

  std::vector<std::string> paths_;
  std::vector<int64_t> records_in_;
  size_t block_bytes_;
  size_t max_line_bytes_;
  size_t current_ = 0;
  bool opened_ = false;
  std::FILE* file_ = nullptr;
  bool owns_file_ = false;
  bool eof_ = false;
  bool is_array_ = false;
  std::string buffer_;  // JSONL bytes not yet handed out
  std::string block_;   // the bytes of the current block's lines
  int64_t next_line_ = 1;
  nlohmann::json array_;
  size_t next_element_ = 0;
  uint64_t bytes_read_ = 0;
  uint64_t bytes_total_ = 0;
};

// Logs records/s, MB/s and the time left (when the input size is known) at most every few seconds.
class RecordProgress {
 public:
  explicit RecordProgress(const RecordReader& reader);
  void update(int64_t records, int64_t kept);

 private:
  const RecordReader& reader_;
  ProgressMeter meter_;
};

// Every input file must hold at least one record: an empty one is almost always a mistake upstream. InputError
// naming the file, or with skip_bad a warning.
void check_no_empty_input(const RecordReader& reader, bool skip_bad);

}  // namespace veomni
