// safetensors files: a validating reader that reads one tensor at a time, and a streaming atomic writer.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace veomni {

class AtomicFileWriter;

// Safetensors dtype strings ("F32", "BF16", "F16", "I32", "I64", "U8", "BOOL") <-> DType.
const char* safetensors_dtype_name(DType dtype);
// Throws InputError listing the supported names for any other string (F64, I8, F8_E4M3, ...).
DType dtype_from_safetensors_name(std::string_view name);

// One tensor of a file: offsets are relative to the start of the data section, [begin, end).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

// Opens and validates a whole file on construction (header length vs file size, JSON, dtypes, sizes, offsets
// contiguous from 0 and covering exactly the data section); any problem is an InputError naming the file. Reads
// then fetch one tensor each with pread, so memory stays bounded by the tensor read.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  // In file order (ascending offsets).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The optional "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // InputError naming the file and the tensor when absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // Absolute file offset of the data section (8 + header length).
  uint64_t data_offset() const { return data_offset_; }

  // A new CPU tensor holding the tensor's bytes.
  Tensor read(const std::string& name) const;
  // Rows [row_begin, row_end) along dim 0 (a shard of a parameter), reading only those bytes.
  Tensor read_rows(const std::string& name, int64_t row_begin, int64_t row_end) const;
  // Fills a CPU tensor of the same dtype and shape (or with the right element count for rows) in place.
  void read_into(const std::string& name, Tensor& destination) const;

 private:
  void read_bytes(uint64_t offset, void* destination, uint64_t bytes, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  uint64_t data_offset_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Streams a safetensors file: declare every tensor first (fixing the header), then write them in declared order,
// then finish(). Memory stays bounded by the tensor (or row block) being written. The file is written under a
// temporary name and renamed by finish(); destroying an unfinished writer removes the temporary file.
class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Before any write; names must be unique and not "__metadata__".
  void declare(const std::string& name, DType dtype, const Shape& shape);
  // The next declared tensor, whole: dtype and shape must match the declaration. Non-CPU tensors are copied to
  // the CPU first.
  void write(const std::string& name, const Tensor& tensor);
  // The next rows (along dim 0) of the tensor being written: trailing dims and dtype must match; the tensor is
  // complete once all its rows have arrived (lets a merger stream a tensor from its shards).
  void write_rows(const std::string& name, const Tensor& rows);
  // Requires every declared tensor written in full; syncs and renames the file into place.
  void finish();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& declared() const { return entries_; }
  // True once every declared tensor has been written in full (finish() is then allowed).
  bool all_written() const { return next_entry_ == entries_.size() && written_in_entry_ == 0; }
  // Header length as it will be written (multiple of 8) and the whole file size; valid after declarations.
  uint64_t header_bytes() const;
  uint64_t file_bytes() const;

 private:
  std::string header_text() const;
  void start_data();
  SafetensorsEntry& current_entry(const std::string& name);

  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::unique_ptr<AtomicFileWriter> file_;  // opened by the first write
  size_t next_entry_ = 0;
  uint64_t written_in_entry_ = 0;
  bool finished_ = false;
};

// Writes named CPU tensors in the given order, atomically.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace veomni
