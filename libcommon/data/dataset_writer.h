// Streaming writers of veomni datasets: one file (DatasetWriter) or a set of shards (ShardedDatasetWriter).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_format.h"
#include "data/sample.h"

namespace veomni {

struct DatasetWriterOptions {
  int compression_level = 1;            // deflate 0 (off) .. 9; shuffle is on whenever deflate is
  size_t chunk_bytes = 256 * 1024;      // target uncompressed bytes per chunk of each key
  std::map<std::string, int> var_axes;  // per-key variable axis; others use default_var_axis()
};

// Appends samples one by one with bounded memory (about one chunk per key is buffered). Every sample must
// have the key set, dtypes and fixed dimensions of the first. The file is written as "<path>.tmp-<pid>" and
// renamed to `path` by close(); destroying the writer without close() deletes the temporary file.
class DatasetWriter {
 public:
  DatasetWriter(std::string path, DatasetInfo info, DatasetWriterOptions options = {}, ShardInfo shard = {});
  ~DatasetWriter();
  DatasetWriter(DatasetWriter&&) noexcept;
  DatasetWriter& operator=(DatasetWriter&&) noexcept;
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  void append(const Sample& sample);
  // Writes the header, syncs and renames into place. A second call does nothing.
  void close();

  int64_t num_samples() const;
  // The schema fixed by the first sample (empty before it).
  std::vector<KeyInfo> keys() const;
  const std::string& path() const;

 private:
  friend class ShardedDatasetWriter;
  // close() in two steps, so that a set of shards appears under its final names only when all are complete.
  void finish_temporary();
  void commit();

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits `total_samples` into `num_shards` contiguous runs written as "<stem>-00000-of-00004.h5", ... where
// stem is `path` without its ".h5"; with one shard the file is `path` itself. The shards are renamed into
// place together by close(); destroying the writer without close() deletes every temporary file.
class ShardedDatasetWriter {
 public:
  ShardedDatasetWriter(const std::string& path, int64_t total_samples, int64_t num_shards, DatasetInfo info,
                       DatasetWriterOptions options = {});
  ~ShardedDatasetWriter();
  ShardedDatasetWriter(const ShardedDatasetWriter&) = delete;
  ShardedDatasetWriter& operator=(const ShardedDatasetWriter&) = delete;

  void append(const Sample& sample);
  // Requires exactly total_samples appended (Error otherwise).
  void close();

  int64_t num_samples() const { return appended_; }
  // Final file names, shard 0 first.
  const std::vector<std::string>& paths() const { return paths_; }
  // Global index of shard k's first sample (k = num_shards gives total_samples).
  int64_t first_sample_of(int64_t shard) const;

 private:
  void open_shard(int64_t shard);

  DatasetInfo info_;
  DatasetWriterOptions options_;
  int64_t total_samples_;
  int64_t num_shards_;
  std::vector<std::string> paths_;
  std::vector<DatasetWriter> finished_;
  std::unique_ptr<DatasetWriter> current_;
  int64_t current_shard_ = -1;
  int64_t appended_ = 0;
  bool closed_ = false;
};

// The file names ShardedDatasetWriter uses for `path` split into `num_shards`.
std::vector<std::string> sharded_dataset_paths(const std::string& path, int64_t num_shards);

}  // namespace veomni
