// The dataset header (root attributes) and per-key schema attributes, with validation on read.
#include "data/dataset_header.h"

#include "core/error.h"

namespace veomni {

namespace {

// Counts and indices of samples, shards and tokens; the cap keeps sums of two of them (first_sample + num_samples)
// far from overflowing, and no real dataset comes near it.
constexpr int64_t kMaxCount = int64_t{1} << 48;

int64_t read_count(const h5::Object& object, const std::string& name, int64_t minimum) {
  const int64_t value = object.int_attribute(name);
  VEOMNI_INPUT_CHECK(value >= minimum && value <= kMaxCount,
                     "{} attribute '{}': {} is out of range (at least {}, at most 2^48: a damaged file?)",
                     object.where(), name, value, minimum);
  return value;
}

void check_format(const h5::File& file) {
  if (!file.has_attribute("format"))
    throw InputError(fmt::format("{}: not a veomni dataset (no 'format' attribute; see man veomni-data)", file.path()));
  const std::string format = file.string_attribute("format");
  VEOMNI_INPUT_CHECK(format == kDatasetFormatName, "{}: not a veomni dataset (format is '{}', expected '{}')",
                     file.path(), format, kDatasetFormatName);
}

int64_t read_format_version(const h5::File& file) {
  const int64_t version = file.int_attribute("format_version");
  VEOMNI_INPUT_CHECK(version <= kDatasetFormatVersion,
                     "{}: dataset format_version {} is newer than this veomni reads ({}); upgrade veomni", file.path(),
                     version, kDatasetFormatVersion);
  VEOMNI_INPUT_CHECK(version >= 1, "{}: invalid dataset format_version {}", file.path(), version);
  return version;
}

DType read_key_dtype(const h5::Group& group) {
  const std::string name = group.string_attribute("dtype");
  try {
    return dtype_from_name(name);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{} attribute 'dtype': {}", group.where(), e.what()));
  }
}

// The fixed axes of a key hold the same size in every sample: each must be a real size, and one sample of
// kMaxSampleTokens entries along the variable axis must stay within kMaxSampleKeyBytes (a corrupt or hostile file
// could otherwise make a read allocate an overflowed size).
void check_sample_dims(const h5::Dataset& data, const Shape& shape, int64_t var_axis) {
  uint64_t row_bytes = 1;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (static_cast<int64_t>(axis) == var_axis) continue;
    VEOMNI_INPUT_CHECK(shape[axis] >= 0 && !__builtin_mul_overflow(row_bytes, static_cast<uint64_t>(shape[axis]),
                                                                     &row_bytes) &&
                           row_bytes <= kMaxSampleKeyBytes,
                       "{}: shape {} is too large (axis {} holds {}): a corrupt file?", data.where(),
                       shape_str(shape), axis, shape[axis]);
  }
}

}  // namespace

void write_dataset_header(h5::File& file, const DatasetInfo& info, const ShardInfo& shard) {
  file.set_string_attribute("format", kDatasetFormatName);
  file.set_int_attribute("format_version", info.format_version);
  file.set_string_attribute("kind", info.kind);
  file.set_string_attribute("producer", info.producer);
  file.set_string_attribute("producer_version", info.producer_version);
  file.set_string_attribute("packing", info.packing);
  file.set_int_attribute("max_seq_len", info.max_seq_len);
  file.set_string_attribute("tokenizer", info.tokenizer);
  if (!info.chat_template.empty()) file.set_string_attribute("chat_template", info.chat_template);
  if (!info.chat_template_kwargs.empty()) file.set_string_attribute("chat_template_kwargs", info.chat_template_kwargs);
  file.set_int_attribute("num_samples", shard.num_samples);
  file.set_int_attribute("shard_index", shard.shard_index);
  file.set_int_attribute("num_shards", shard.num_shards);
  file.set_int_attribute("first_sample", shard.first_sample);
  file.set_int_attribute("total_samples", shard.total_samples);
}

DatasetHeader read_dataset_header(const h5::File& file) {
  check_format(file);
  DatasetHeader header;
  DatasetInfo& info = header.info;
  info.format_version = read_format_version(file);
  info.kind = file.string_attribute("kind");
  validate_dataset_kind(info.kind, file.path());
  info.producer = file.string_attribute("producer");
  info.producer_version = file.string_attribute("producer_version");
  info.packing = file.string_attribute("packing");
  info.max_seq_len = read_count(file, "max_seq_len", 0);
  info.tokenizer = file.string_attribute("tokenizer");
  // Optional: files written before these attributes existed have neither.
  if (file.has_attribute("chat_template")) info.chat_template = file.string_attribute("chat_template");
  if (file.has_attribute("chat_template_kwargs"))
    info.chat_template_kwargs = file.string_attribute("chat_template_kwargs");

  ShardInfo& shard = header.shard;
  shard.path = file.path();
  shard.num_samples = read_count(file, "num_samples", 0);
  shard.num_shards = read_count(file, "num_shards", 1);
  shard.shard_index = read_count(file, "shard_index", 0);
  VEOMNI_INPUT_CHECK(shard.shard_index < shard.num_shards, "{}: shard_index {} is not below num_shards {}", file.path(),
                     shard.shard_index, shard.num_shards);
  shard.first_sample = read_count(file, "first_sample", 0);
  shard.total_samples = read_count(file, "total_samples", shard.first_sample + shard.num_samples);
  return header;
}

void write_key_attributes(h5::Group& key_group, const KeyInfo& key) {
  key_group.set_string_attribute("dtype", dtype_name(key.dtype));
  key_group.set_int_attribute("var_axis", key.var_axis);
}

KeyInfo read_key_info(const h5::Group& key_group, const std::string& name, int64_t num_samples) {
  KeyInfo key;
  key.name = name;
  key.dtype = read_key_dtype(key_group);
  const h5::Dataset data = key_group.dataset(kDataName);
  VEOMNI_INPUT_CHECK(data.stores(key.dtype), "{}: holds {} elements, which is not how dtype {} is stored", data.where(),
                     data.stored_type_name(), dtype_name(key.dtype));
  key.shape = data.shape();
  VEOMNI_INPUT_CHECK(!key.shape.empty(), "{}: a scalar dataset (expected at least one axis)", data.where());
  const int64_t var_axis = key_group.int_attribute("var_axis");
  VEOMNI_INPUT_CHECK(var_axis >= 0 && var_axis < static_cast<int64_t>(key.shape.size()),
                     "{} attribute 'var_axis': {} is not an axis of the rank-{} data", key_group.where(), var_axis,
                     key.shape.size());
  key.var_axis = static_cast<int>(var_axis);
  check_sample_dims(data, key.shape, var_axis);
  key.shape[static_cast<size_t>(var_axis)] = -1;

  const h5::Dataset offsets = key_group.dataset(kOffsetsName);
  VEOMNI_INPUT_CHECK(offsets.stores(DType::I64), "{}: holds {} elements, expected i64", offsets.where(),
                     offsets.stored_type_name());
  const Shape offsets_shape = offsets.shape();
  VEOMNI_INPUT_CHECK(offsets_shape == Shape{num_samples + 1},
                     "{}: shape {} does not match num_samples {} (expected [{}])", offsets.where(),
                     shape_str(offsets_shape), num_samples, num_samples + 1);
  return key;
}

}  // namespace veomni
