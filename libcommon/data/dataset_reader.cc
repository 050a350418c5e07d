// DatasetReader: opens and cross-checks the shards of a dataset, then reads samples by global index.
#include "data/dataset_reader.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "data/dataset_files.h"
#include "data/dataset_header.h"
#include "data/dataset_objective_keys.h"
#include "io/hdf5_file.h"

namespace veomni {

namespace {

struct KeyColumn {
  KeyInfo key;
  h5::Dataset data;
  h5::Dataset offsets;
  int64_t extent = 0;  // data length along the variable axis
};

struct ShardReader {
  h5::File file;
  DatasetHeader header;
  std::map<std::string, KeyColumn> columns;
  std::vector<int64_t> token_offsets;  // input_ids offsets, num_samples + 1 (empty without input_ids)
};

int64_t read_offset(const KeyColumn& column, int64_t position) {
  int64_t value = 0;
  column.offsets.read(&value, DType::I64, {position}, {1});
  return value;
}

KeyColumn open_column(const h5::Group& samples, const std::string& name, int64_t num_samples) {
  const h5::Group group = samples.group(name);
  KeyColumn column{read_key_info(group, name, num_samples), group.dataset(kDataName), group.dataset(kOffsetsName), 0};
  column.extent = column.data.shape()[static_cast<size_t>(column.key.var_axis)];
  const int64_t first = read_offset(column, 0), last = read_offset(column, num_samples);
  VEOMNI_INPUT_CHECK(first == 0 && last == column.extent,
                     "{}: offsets run from {} to {}, but the data holds {} along axis {} (expected 0 to {})",
                     column.offsets.where(), first, last, column.extent, column.key.var_axis, column.extent);
  return column;
}

std::vector<int64_t> read_token_offsets(const KeyColumn& column) {
  Tensor all = column.offsets.read_all(DType::I64);
  const int64_t* values = all.data<int64_t>();
  std::vector<int64_t> offsets(values, values + all.numel());
  for (size_t i = 1; i < offsets.size(); ++i)
    VEOMNI_INPUT_CHECK(offsets[i] >= offsets[i - 1], "{}: offsets decrease at sample {} ({} after {})",
                       column.offsets.where(), i - 1, offsets[i], offsets[i - 1]);
  return offsets;
}

// Entries of `column` in each sample, from its offsets.
std::vector<int64_t> entries_per_sample(const KeyColumn& column) {
  const Tensor all = column.offsets.read_all(DType::I64);
  const int64_t* offsets = all.data<int64_t>();
  std::vector<int64_t> counts;
  for (int64_t i = 0; i + 1 < all.numel(); ++i) counts.push_back(offsets[i + 1] - offsets[i]);
  return counts;
}

// A token-aligned key must be [L] (or position_ids [3, L]) with input_ids' length in every sample.
void check_token_key(const ShardReader& shard, const KeyColumn& column) {
  const KeyInfo& key = column.key;
  const std::string& path = shard.file.path();
  const bool last_axis = key.var_axis == static_cast<int>(key.shape.size()) - 1;
  const bool positions = key.name == "position_ids";
  VEOMNI_INPUT_CHECK(last_axis && key.shape.size() <= (positions ? 2u : 1u),
                     "{}: key '{}' is {}, expected {} like input_ids", path, key.name, key.describe(),
                     positions ? "[L] or [3, L]" : "[L]");
  VEOMNI_INPUT_CHECK(key.name != "labels" || key.dtype == DType::I64, "{}: key 'labels' is {}, expected i64[L]", path,
                     key.describe());
  VEOMNI_INPUT_CHECK(!positions || key.dtype == DType::I64 || key.dtype == DType::F32,
                     "{}: key 'position_ids' is {}, expected i64 or f32", path, key.describe());
  VEOMNI_INPUT_CHECK(!is_rollout_key(key.name) || key.dtype == DType::F32,
                     "{}: key '{}' is {}, expected f32[L] (a rollout value per token)", path, key.name, key.describe());
  const std::vector<int64_t> lengths = entries_per_sample(column);
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t tokens = shard.token_offsets[i + 1] - shard.token_offsets[i];
    VEOMNI_INPUT_CHECK(lengths[i] == tokens, "{} sample {}: {} has {} entries but input_ids {} tokens", path, i,
                       key.name, lengths[i], tokens);
  }
}

// chosen_length i64 [1] per sample, within [1, L); the reference log-probs f32 [1] beside it.
void check_pair_keys(const ShardReader& shard) {
  const std::string& path = shard.file.path();
  for (const auto& [name, column] : shard.columns) {
    if (!is_pair_key(name)) continue;
    const bool length = name == kChosenLengthKey;
    const DType dtype = length ? DType::I64 : DType::F32;
    VEOMNI_INPUT_CHECK(column.key.dtype == dtype && column.key.shape.size() == 1,
                       "{}: key '{}' is {}, expected {}[1] (one value per pair)", path, name, column.key.describe(),
                       dtype_name(dtype));
    VEOMNI_INPUT_CHECK(length || shard.columns.count(kChosenLengthKey),
                       "{}: key '{}' without '{}' (reference log-probs belong to preference pairs)", path, name,
                       kChosenLengthKey);
    const std::vector<int64_t> counts = entries_per_sample(column);
    for (size_t i = 0; i < counts.size(); ++i)
      VEOMNI_INPUT_CHECK(counts[i] == 1, "{} sample {}: key '{}' has {} entries, expected 1", path, i, name, counts[i]);
  }
  const auto chosen = shard.columns.find(kChosenLengthKey);
  if (chosen == shard.columns.end()) return;
  const Tensor values = chosen->second.data.read_all(DType::I64);
  for (int64_t i = 0; i < values.numel(); ++i) {
    const auto k = static_cast<size_t>(i);
    const int64_t tokens = shard.token_offsets[k + 1] - shard.token_offsets[k];
    const int64_t c = values.data<int64_t>()[i];
    VEOMNI_INPUT_CHECK(c >= 1 && c < tokens,
                       "{} sample {}: key '{}' is {}, expected 1 to {} (both sequences of the pair need a token)",
                       path, i, kChosenLengthKey, c, tokens - 1);
  }
}

// The keys that run along the tokens must have input_ids' length in every sample, and the dtypes the collators
// read: checked when the file is opened, so that an error names the file and the sample instead of a batch.
void check_token_keys(const ShardReader& shard) {
  const KeyColumn& ids = shard.columns.at("input_ids");
  VEOMNI_INPUT_CHECK(ids.key.dtype == DType::I64 && ids.key.shape.size() == 1,
                     "{}: key 'input_ids' is {}, expected i64[L]", shard.file.path(), ids.key.describe());
  for (const auto& [name, column] : shard.columns) {
    const bool token_key = name == "labels" || name == "position_ids" || name == "attention_mask" ||
                           name == "image_mask" || name == "video_mask" || name == "audio_mask" ||
                           is_rollout_key(name);
    if (token_key) check_token_key(shard, column);
  }
  check_pair_keys(shard);
}

ShardReader open_shard(const std::string& path) {
  ShardReader shard{h5::File::open(path), {}, {}, {}};
  shard.header = read_dataset_header(shard.file);
  const h5::Group samples = shard.file.group(kSamplesGroup);
  for (const std::string& name : samples.member_names())
    shard.columns.emplace(name, open_column(samples, name, shard.header.shard.num_samples));
  const auto input_ids = shard.columns.find("input_ids");
  if (input_ids != shard.columns.end()) {
    shard.token_offsets = read_token_offsets(input_ids->second);
    check_token_keys(shard);
  }
  return shard;
}

std::vector<KeyInfo> schema_of(const ShardReader& shard) {
  std::vector<KeyInfo> keys;
  for (const auto& entry : shard.columns) keys.push_back(entry.second.key);
  return keys;
}

std::string describe_keys(const std::vector<KeyInfo>& keys) {
  std::vector<std::string> parts;
  for (const KeyInfo& key : keys) parts.push_back(key.name + " " + key.describe());
  return fmt::format("{}", fmt::join(parts, ", "));
}

// A later shard must describe the same dataset as shard 0.
void check_same_dataset(const ShardReader& first, const ShardReader& other) {
  const DatasetInfo& a = first.header.info;
  const DatasetInfo& b = other.header.info;
  const std::string& path = other.file.path();
  const std::string& first_path = first.file.path();
  VEOMNI_INPUT_CHECK(
      a.kind == b.kind && a.tokenizer == b.tokenizer && a.packing == b.packing && a.max_seq_len == b.max_seq_len,
      "{}: header differs from {} (kind '{}' vs '{}', tokenizer '{}' vs '{}', packing '{}' vs '{}', "
      "max_seq_len {} vs {})",
      path, first_path, b.kind, a.kind, b.tokenizer, a.tokenizer, b.packing, a.packing, b.max_seq_len, a.max_seq_len);
  VEOMNI_INPUT_CHECK(a.chat_template == b.chat_template, "{}: header differs from {} (chat_template '{}' vs '{}')",
                     path, first_path, b.chat_template, a.chat_template);
  const std::vector<KeyInfo> keys = schema_of(other), first_keys = schema_of(first);
  VEOMNI_INPUT_CHECK(keys == first_keys, "{}: keys differ from {} ({} vs {})", path, first_path, describe_keys(keys),
                     describe_keys(first_keys));
}

}  // namespace

struct DatasetReader::Impl {
  std::string path;
  std::vector<ShardReader> shards;
  std::vector<ShardInfo> shard_infos;
  std::vector<KeyInfo> keys;
  int64_t total = 0;

  void add_shard(ShardReader shard, int64_t position, int64_t count, bool named_as_shard) {
    const ShardInfo& info = shard.header.shard;
    VEOMNI_INPUT_CHECK(named_as_shard || info.num_shards == 1,
                       "{}: this file is shard {} of a set of {}; open the whole set (its directory or a "
                       "'name-*-of-*.h5' pattern) or rename it back to its shard name",
                       info.path, info.shard_index, info.num_shards);
    VEOMNI_INPUT_CHECK(!named_as_shard || (info.shard_index == position && info.num_shards == count),
                       "{}: header says shard {} of {}, but its name makes it shard {} of {}", info.path,
                       info.shard_index, info.num_shards, position, count);
    VEOMNI_INPUT_CHECK(info.first_sample == total, "{}: first_sample is {}, but the shards before it hold {} samples",
                       info.path, info.first_sample, total);
    if (!shards.empty()) check_same_dataset(shards.front(), shard);
    total += info.num_samples;
    shard_infos.push_back(info);
    shards.push_back(std::move(shard));
  }

  void check_totals() const {
    for (const ShardInfo& info : shard_infos)
      VEOMNI_INPUT_CHECK(info.total_samples == total, "{}: total_samples is {}, but the set holds {} samples",
                         info.path, info.total_samples, total);
  }

  // (shard, index within the shard) of a global sample index.
  std::pair<const ShardReader*, int64_t> locate(int64_t index) const {
    VEOMNI_INPUT_CHECK(index >= 0 && index < total, "{}: sample {} out of range (the dataset holds {})", path, index,
                       total);
    // The first shard ending after `index` (empty shards end where they start, so they are passed over).
    const auto holder = std::partition_point(shard_infos.begin(), shard_infos.end(), [&](const ShardInfo& s) {
      return s.first_sample + s.num_samples <= index;
    });
    return {&shards[static_cast<size_t>(holder - shard_infos.begin())], index - holder->first_sample};
  }

  Tensor read_key(const ShardReader& shard, const KeyColumn& column, int64_t local) const {
    int64_t begin, end;
    if (column.key.name == "input_ids") {
      begin = shard.token_offsets[static_cast<size_t>(local)];
      end = shard.token_offsets[static_cast<size_t>(local) + 1];
    } else {
      begin = read_offset(column, local);
      end = read_offset(column, local + 1);
      VEOMNI_INPUT_CHECK(0 <= begin && begin <= end && end <= column.extent,
                         "{}: offsets of sample {} are [{}, {}), not within [0, {}]", column.offsets.where(), local,
                         begin, end, column.extent);
    }
    const Shape shape = column.key.sample_shape(end - begin);
    uint64_t bytes = dtype_size(column.key.dtype);
    for (int64_t d : shape)
      VEOMNI_INPUT_CHECK(d >= 0 && !__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) &&
                             bytes <= kMaxSampleKeyBytes,
                         "{}: sample {} would be {} {}, more than {} bytes: a corrupt file?", column.data.where(),
                         local, dtype_name(column.key.dtype), shape_str(shape), kMaxSampleKeyBytes);
    Tensor tensor = Tensor::empty(shape, column.key.dtype);
    Shape offset(tensor.shape().size(), 0);
    offset[static_cast<size_t>(column.key.var_axis)] = begin;
    column.data.read(tensor.numel() ? tensor.raw_data() : nullptr, column.key.dtype, offset, tensor.shape());
    return tensor;
  }
};

DatasetReader::DatasetReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  const std::vector<std::string> files = resolve_dataset_files(path);
  for (size_t k = 0; k < files.size(); ++k) {
    const bool named_as_shard = parse_shard_file_name(files[k]).has_value();
    impl_->add_shard(open_shard(files[k]), static_cast<int64_t>(k), static_cast<int64_t>(files.size()), named_as_shard);
  }
  impl_->check_totals();
  impl_->keys = schema_of(impl_->shards.front());
}

DatasetReader::~DatasetReader() = default;
DatasetReader::DatasetReader(DatasetReader&&) noexcept = default;
DatasetReader& DatasetReader::operator=(DatasetReader&&) noexcept = default;

int64_t DatasetReader::num_samples() const { return impl_->total; }
const DatasetInfo& DatasetReader::info() const { return impl_->shards.front().header.info; }
const std::vector<KeyInfo>& DatasetReader::keys() const { return impl_->keys; }
const std::vector<ShardInfo>& DatasetReader::shards() const { return impl_->shard_infos; }

bool DatasetReader::has_key(const std::string& name) const { return impl_->shards.front().columns.count(name) > 0; }

Sample DatasetReader::read(int64_t index) const {
  std::vector<std::string> names;
  for (const KeyInfo& key : impl_->keys) names.push_back(key.name);
  return read(index, names);
}

Sample DatasetReader::read(int64_t index, const std::vector<std::string>& keys) const {
  const auto [shard, local] = impl_->locate(index);
  Sample sample;
  for (const std::string& name : keys) {
    const auto column = shard->columns.find(name);
    VEOMNI_INPUT_CHECK(column != shard->columns.end(), "{}: no key '{}' (keys: {})", impl_->path, name,
                       describe_keys(impl_->keys));
    try {
      Tensor tensor = impl_->read_key(*shard, column->second, local);
      if (tensor.dtype() == DType::F32 && (is_rollout_key(name) || is_pair_key(name)))
        check_finite_values(tensor, name, fmt::format("{} sample {}", shard->header.shard.path, local));
      sample.emplace(name, std::move(tensor));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} (reading sample {})", e.what(), index));
    }
  }
  return sample;
}

int64_t DatasetReader::sequence_length(int64_t index) const {
  VEOMNI_INPUT_CHECK(has_key("input_ids"), "{}: no input_ids key, so sample lengths are unknown", impl_->path);
  const auto [shard, local] = impl_->locate(index);
  const auto i = static_cast<size_t>(local);
  return shard->token_offsets[i + 1] - shard->token_offsets[i];
}

}  // namespace veomni
