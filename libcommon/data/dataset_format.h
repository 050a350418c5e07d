// The veomni dataset format (man veomni-data(5)): version, header fields, per-key schema, shard file names.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/tensor.h"

namespace veomni {

inline constexpr const char* kDatasetFormatName = "veomni-dataset";
// Bump when a reader of the previous version would misread a new file; readers reject newer versions. Writers
// write the oldest version that describes the file (dataset_format_version_for): version 2 added the preference
// and rollout keys, so SFT files stay version 1.
inline constexpr int64_t kDatasetFormatVersion = 2;

// The longest sample, in tokens, that the producers write and the reader takes (16 Mi): far beyond any model's
// context, and small enough that the bytes of a sample's keys cannot overflow.
inline constexpr int64_t kMaxSampleTokens = int64_t{1} << 24;
// The most bytes one key of one sample may hold when read (16 GiB): a larger size is a corrupt file.
inline constexpr uint64_t kMaxSampleKeyBytes = uint64_t{1} << 34;

// What the producer records about a dataset; every shard of a set carries the same values.
struct DatasetInfo {
  std::string kind = "text";                       // text | vl | omni
  std::string producer;                            // the tool that wrote it, e.g. "veomni-dummy-data"
  std::string producer_version;                    // e.g. "0.1.0"
  std::string packing = "none";                    // "none" or a free-text description of how samples were packed
  int64_t max_seq_len = 0;                         // the sequence length the producer targeted (0 = not bounded)
  std::string tokenizer;                           // tokenizer name or path; "" when unknown
  // The chat template conversations were rendered with (data/chat_template_identity.h): "chatml", "jinja
  // sha256:<hex>", "none" (nothing rendered: generated or pre-tokenized samples); "" in files older than the field.
  std::string chat_template;
  std::string chat_template_kwargs;  // the template's extra variables as JSON ("{}" by default), for the record
  int64_t format_version = kDatasetFormatVersion;  // as read from the file (writers set it from the keys)
};

// Where one file sits in its set (a lone file is shard 0 of 1).
struct ShardInfo {
  std::string path;
  int64_t shard_index = 0;
  int64_t num_shards = 1;
  int64_t first_sample = 0;   // global index of this file's first sample
  int64_t num_samples = 0;    // samples in this file
  int64_t total_samples = 0;  // samples in the whole set
};

// One key's schema: element type and per-sample shape, with -1 on the variable axis ({3, -1} for M-RoPE
// position_ids, {-1, 1536} for pixel_values, {-1} for input_ids).
struct KeyInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  int var_axis = 0;

  // The shape of one sample whose variable axis has `length` entries.
  Shape sample_shape(int64_t length) const;
  // "i64[3, L]".
  std::string describe() const;
  bool operator==(const KeyInfo&) const = default;
};

// The axis that varies between samples when the writer is not told otherwise: the last axis of a 2-D
// position_ids (3, L), axis 0 for everything else (input_ids (L), pixel_values (N, 1536), *_grid_thw (n, 3)).
int default_var_axis(std::string_view key, int ndim);

// InputError unless kind is text, vl or omni.
void validate_dataset_kind(std::string_view kind, std::string_view context);

// "stem-00002-of-00004.h5" (stem may contain directories).
std::string shard_file_name(const std::string& stem, int64_t index, int64_t count);

struct ShardFileName {
  std::string stem;
  int64_t index = 0;
  int64_t count = 0;
};
// Parses a path ending in "-NNNNN-of-NNNNN.h5"; nullopt for any other name.
std::optional<ShardFileName> parse_shard_file_name(const std::string& path);

}  // namespace veomni
