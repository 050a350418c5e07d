// HuggingFace model directories: model.safetensors, or model-0000i-of-0000n.safetensors shards plus their index.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace veomni {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightsIndexFile = "model.safetensors.index.json";
// "model-00002-of-00005.safetensors" for index 2 (1-based) of 5.
std::string hf_shard_file_name(size_t index, size_t count);

// "5GB" (10^9, as HuggingFace counts), "500MB", "1.5GiB" (2^30), "4096" (bytes); units are case-insensitive.
// Throws InputError for anything else, zero, or a size beyond 64 bits.
uint64_t parse_byte_size(std::string_view text);

// Reads the weights of a HF model directory (or a single .safetensors file). As transformers does, a
// model.safetensors takes precedence over an index. An index is validated on open: every file it names exists and
// is a valid safetensors file, every mapped tensor is in its file, and metadata.total_size (when present) equals
// the bytes of the mapped tensors. Tensors are read one at a time.
class HfCheckpointReader {
 public:
  explicit HfCheckpointReader(const std::string& dir_or_file);
  ~HfCheckpointReader();
  HfCheckpointReader(const HfCheckpointReader&) = delete;
  HfCheckpointReader& operator=(const HfCheckpointReader&) = delete;

  const std::string& source() const { return source_; }
  bool sharded() const { return files_.size() > 1 || !index_path_.empty(); }
  // Sorted tensor names.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // dtype, shape and offsets; InputError naming the checkpoint and the tensor when absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // Path of the file holding the tensor.
  const std::string& file_of(const std::string& name) const;
  // Sum of the bytes of every tensor.
  uint64_t total_bytes() const;

  Tensor read(const std::string& name) const;
  Tensor read_rows(const std::string& name, int64_t row_begin, int64_t row_end) const;
  void read_into(const std::string& name, Tensor& destination) const;

 private:
  void open_single(const std::string& file);
  void open_index(const std::string& dir);
  const SafetensorsReader& file_reader(const std::string& name) const;

  std::string source_;
  std::string index_path_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, size_t> tensors_;  // name -> index into files_
  std::vector<std::string> names_;
};

// Writes a HF weights directory streaming: declare every tensor (name, dtype, shape) first; the first write plans
// the shards (declared order, a tensor is never split, a shard closes before it would exceed max_shard_bytes, a
// tensor larger than the limit gets a shard of its own); write the tensors in declared order; finish() writes the
// index when there is more than one shard and removes stale weight files of an earlier save (a leftover
// model.safetensors would shadow a new index). Memory stays bounded by one tensor. Each file is written atomically.
class HfCheckpointWriter {
 public:
  // metadata goes into every file's __metadata__; transformers refuses files whose "format" is not "pt".
  HfCheckpointWriter(std::string dir, uint64_t max_shard_bytes,
                     std::map<std::string, std::string> metadata = {{"format", "pt"}});
  ~HfCheckpointWriter();
  HfCheckpointWriter(const HfCheckpointWriter&) = delete;
  HfCheckpointWriter& operator=(const HfCheckpointWriter&) = delete;

  void declare(const std::string& name, DType dtype, const Shape& shape);
  // The next declared tensor, whole (see SafetensorsWriter::write).
  void write(const std::string& name, const Tensor& tensor);
  // The next rows along dim 0 of the tensor being written (see SafetensorsWriter::write_rows).
  void write_rows(const std::string& name, const Tensor& rows);
  void finish();

  // The shard plan: file names in order, and which file each tensor goes to (plans on first call).
  const std::vector<std::string>& shard_files();
  const std::string& file_of(const std::string& name);
  uint64_t total_bytes() const;

 private:
  struct Shard {
    std::string file;
    std::vector<size_t> tensors;  // indices into declared_
  };
  void plan();
  SafetensorsWriter& writer_for_next_tensor();
  void open_next_shard();
  void close_current_shard();
  void write_index() const;
  void remove_stale_files() const;

  std::string dir_;
  uint64_t max_shard_bytes_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsEntry> declared_;
  std::map<std::string, size_t> declared_index_;
  std::vector<Shard> shards_;
  std::vector<std::string> shard_file_names_;
  std::vector<size_t> shard_of_tensor_;
  bool planned_ = false;
  size_t opened_shards_ = 0;
  std::unique_ptr<SafetensorsWriter> current_;
  bool finished_ = false;
};

}  // namespace veomni
