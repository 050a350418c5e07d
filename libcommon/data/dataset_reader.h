// Random-access reader of a veomni dataset: one file or a whole set of shards read as one dataset.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_format.h"
#include "data/sample.h"

namespace veomni {

// Opens and validates every file of the dataset up front (headers, keys, offsets of input_ids); any problem
// is an InputError naming the file. Reads are safe from several threads (HDF5 calls are serialised).
class DatasetReader {
 public:
  // `path`: a dataset file, one shard of a set, a directory holding one dataset, or a pattern such as
  // "data/train-*-of-*.h5" (see resolve_dataset_files).
  explicit DatasetReader(const std::string& path);
  ~DatasetReader();
  DatasetReader(DatasetReader&&) noexcept;
  DatasetReader& operator=(DatasetReader&&) noexcept;

  // Samples in the whole set.
  int64_t num_samples() const;
  // Header of the set (identical in every shard: checked on open).
  const DatasetInfo& info() const;
  // Schema of every key, in name order.
  const std::vector<KeyInfo>& keys() const;
  bool has_key(const std::string& name) const;
  // The files, shard 0 first.
  const std::vector<ShardInfo>& shards() const;

  // Sample `index` (0 <= index < num_samples()) with every key, or only `keys`.
  Sample read(int64_t index) const;
  Sample read(int64_t index, const std::vector<std::string>& keys) const;
  // Tokens in sample `index` (the length of its input_ids), from offsets held in memory: no data is read.
  int64_t sequence_length(int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
