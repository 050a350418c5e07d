// Reading and writing the dataset header (root attributes) and the per-key schema attributes of a file.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset_format.h"
#include "io/hdf5_file.h"

namespace veomni {

inline constexpr const char* kSamplesGroup = "samples";
inline constexpr const char* kDataName = "data";
inline constexpr const char* kOffsetsName = "offsets";

void write_dataset_header(h5::File& file, const DatasetInfo& info, const ShardInfo& shard);

struct DatasetHeader {
  DatasetInfo info;
  ShardInfo shard;
};
// Validates the root attributes: InputError naming the file for a foreign file, a newer format_version,
// a missing or out-of-range attribute.
DatasetHeader read_dataset_header(const h5::File& file);

void write_key_attributes(h5::Group& key_group, const KeyInfo& key);
// The schema of /samples/<name>, checked against its data and offsets datasets (dtype, rank, var axis,
// offsets length num_samples + 1).
KeyInfo read_key_info(const h5::Group& key_group, const std::string& name, int64_t num_samples);

}  // namespace veomni
