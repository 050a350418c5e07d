// Streaming dataset writers: schema from the first sample, chunk-aligned appends, atomic rename on close.
#include "data/dataset_writer.h"

#include <fcntl.h>
#include <spdlog/fmt/ranges.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/dataset_column.h"
#include "data/dataset_header.h"
#include "data/dataset_objective_keys.h"
#include "io/atomic_file.h"
#include "io/hdf5_file.h"

namespace veomni {

namespace {

// fsync of a file or directory: makes the bytes (or a rename) survive a crash.
void sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open to sync: {}", path, std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  // Some file systems cannot fsync a directory; the rename is still atomic there.
  if (rc != 0 && !directory) throw InputError(fmt::format("{}: fsync failed: {}", path, std::strerror(errno)));
}

// "f32[2, 3]": a tensor as the schema messages show it.
std::string signature(const Tensor& tensor) {
  return fmt::format("{}{}", dtype_name(tensor.dtype()), shape_str(tensor.shape()));
}

void validate_key_name(const std::string& name, const std::string& context) {
  VEOMNI_INPUT_CHECK(!name.empty() && name != "." && name.find('/') == std::string::npos,
                     "{}: invalid key name '{}' (non-empty, no '/')", context, name);
}

KeyInfo key_from_tensor(const std::string& name, const Tensor& tensor, const DatasetWriterOptions& options,
                        const std::string& context) {
  validate_key_name(name, context);
  VEOMNI_INPUT_CHECK(tensor.ndim() >= 1, "{}: key '{}' is a scalar; store it with shape [1]", context, name);
  const auto override_axis = options.var_axes.find(name);
  const int var_axis =
      override_axis != options.var_axes.end() ? override_axis->second : default_var_axis(name, tensor.ndim());
  VEOMNI_INPUT_CHECK(var_axis >= 0 && var_axis < tensor.ndim(), "{}: variable axis {} of key '{}' is not an axis of {}",
                     context, var_axis, name, signature(tensor));
  KeyInfo key{name, tensor.dtype(), tensor.shape(), var_axis};
  for (int axis = 0; axis < tensor.ndim(); ++axis)
    VEOMNI_INPUT_CHECK(axis == var_axis || tensor.dim(axis) > 0,
                       "{}: key '{}' has an empty fixed axis ({}); only the variable axis may be 0", context, name,
                       signature(tensor));
  key.shape[static_cast<size_t>(var_axis)] = -1;
  return key;
}

bool matches(const KeyInfo& key, const Tensor& tensor) {
  if (tensor.dtype() != key.dtype || tensor.ndim() != static_cast<int>(key.shape.size())) return false;
  for (int axis = 0; axis < tensor.ndim(); ++axis)
    if (axis != key.var_axis && tensor.dim(axis) != key.shape[static_cast<size_t>(axis)]) return false;
  return true;
}

struct Column {
  KeyInfo key;
  h5::Group group;
  ColumnAppender data;
  ColumnAppender offsets;
  int64_t end = 0;
};

h5::DatasetLayout growing_layout(const Shape& shape, int var_axis, DType dtype, const DatasetWriterOptions& options) {
  h5::DatasetLayout layout;
  layout.dtype = dtype;
  layout.shape = layout.max_shape = layout.chunk = shape;
  const auto axis = static_cast<size_t>(var_axis);
  layout.shape[axis] = 0;
  layout.max_shape[axis] = h5::kUnlimited;
  layout.chunk[axis] = chunk_length_for(shape, var_axis, dtype, options.chunk_bytes);
  layout.deflate_level = options.compression_level;
  layout.shuffle = options.compression_level > 0;
  layout.checksum = true;
  return layout;
}

Column create_column(h5::Group& samples, const KeyInfo& key, const DatasetWriterOptions& options) {
  h5::Group group = samples.create_group(key.name);
  write_key_attributes(group, key);
  const h5::DatasetLayout data_layout = growing_layout(key.shape, key.var_axis, key.dtype, options);
  const h5::DatasetLayout offsets_layout = growing_layout({-1}, 0, DType::I64, options);
  ColumnAppender data(group.create_dataset(kDataName, data_layout), key.dtype, key.shape, key.var_axis,
                      data_layout.chunk[static_cast<size_t>(key.var_axis)]);
  ColumnAppender offsets(group.create_dataset(kOffsetsName, offsets_layout), DType::I64, {-1}, 0,
                         offsets_layout.chunk[0]);
  const int64_t zero = 0;
  offsets.append(&zero, 1);
  return Column{key, std::move(group), std::move(data), std::move(offsets)};
}

}  // namespace

struct DatasetWriter::Impl {
  enum class State { Open, Finished, Committed };

  std::string path;
  std::string temp_path;
  DatasetInfo info;
  DatasetWriterOptions options;
  ShardInfo shard;
  h5::File file;
  h5::Group samples;
  std::map<std::string, Column> columns;
  int64_t num_samples = 0;
  State state = State::Open;

  std::string sample_context() const { return fmt::format("{}: sample {}", path, shard.first_sample + num_samples); }

  void create_columns(const std::vector<KeyInfo>& keys) {
    for (const KeyInfo& key : keys) columns.emplace(key.name, create_column(samples, key, options));
  }

  std::vector<KeyInfo> schema_of(const Sample& sample) const {
    VEOMNI_INPUT_CHECK(!sample.empty(), "{}: a sample with no keys", sample_context());
    std::vector<KeyInfo> keys;
    for (const auto& [name, tensor] : sample) keys.push_back(key_from_tensor(name, tensor, options, sample_context()));
    return keys;
  }

  void check_against_schema(const Sample& sample) const {
    std::vector<std::string> missing, unexpected;
    for (const auto& entry : columns)
      if (!sample.count(entry.first)) missing.push_back(entry.first);
    for (const auto& entry : sample)
      if (!columns.count(entry.first)) unexpected.push_back(entry.first);
    VEOMNI_INPUT_CHECK(missing.empty() && unexpected.empty(),
                       "{}: keys differ from the dataset's (missing: [{}], unexpected: [{}])", sample_context(),
                       fmt::join(missing, ", "), fmt::join(unexpected, ", "));
    for (const auto& [name, column] : columns) {
      const Tensor& tensor = sample.at(name);
      VEOMNI_INPUT_CHECK(matches(column.key, tensor), "{}: key '{}' is {}, expected {} (L = any length)",
                         sample_context(), name, signature(tensor), column.key.describe());
    }
  }

  void append_checked(const Sample& sample) {
    for (auto& [name, column] : columns) {
      const Tensor& given = sample.at(name);
      const Tensor tensor = given.is_cpu() ? given : given.to(Device::cpu());
      const int64_t length = tensor.dim(column.key.var_axis);
      if (tensor.numel() > 0) column.data.append(tensor.raw_data(), length);
      column.end += length;
      column.offsets.append(&column.end, 1);
    }
    ++num_samples;
  }
};

DatasetWriter::DatasetWriter(std::string path, DatasetInfo info, DatasetWriterOptions options, ShardInfo shard)
    : impl_(std::make_unique<Impl>()) {
  VEOMNI_INPUT_CHECK(!path.empty(), "dataset output path is empty");
  validate_dataset_kind(info.kind, path);
  VEOMNI_INPUT_CHECK(options.compression_level >= 0 && options.compression_level <= 9,
                     "{}: compression level {} is not in 0..9", path, options.compression_level);
  VEOMNI_CHECK(options.chunk_bytes > 0, "chunk_bytes must be positive");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  VEOMNI_INPUT_CHECK(!error, "{}: cannot create directory {}: {}", path, parent.string(), error.message());

  impl_->path = std::move(path);
  impl_->temp_path = atomic_temp_path(impl_->path);
  impl_->info = std::move(info);
  impl_->options = std::move(options);
  impl_->shard = std::move(shard);
  impl_->file = h5::File::create(impl_->temp_path);
  impl_->samples = impl_->file.create_group(kSamplesGroup);
}

DatasetWriter::~DatasetWriter() {
  if (!impl_ || impl_->state == Impl::State::Committed) return;
  const std::string temp_path = impl_->temp_path;
  impl_.reset();  // closes every HDF5 handle first
  std::error_code ignored;
  std::filesystem::remove(temp_path, ignored);
}

DatasetWriter::DatasetWriter(DatasetWriter&&) noexcept = default;
DatasetWriter& DatasetWriter::operator=(DatasetWriter&&) noexcept = default;

void DatasetWriter::append(const Sample& sample) {
  VEOMNI_CHECK(impl_->state == Impl::State::Open, "{}: append after close", impl_->path);
  if (impl_->columns.empty()) {
    const std::vector<KeyInfo> keys = impl_->schema_of(sample);
    impl_->create_columns(keys);
  }
  impl_->check_against_schema(sample);
  impl_->append_checked(sample);
}

void DatasetWriter::finish_temporary() {
  Impl& impl = *impl_;
  if (impl.state != Impl::State::Open) return;
  std::vector<std::string> key_names;
  for (const auto& entry : impl.columns) key_names.push_back(entry.first);
  impl.info.format_version = dataset_format_version_for(key_names);
  for (auto& [name, column] : impl.columns) {
    column.data.finish();
    column.offsets.finish();
    column.group.close();
  }
  impl.columns.clear();
  ShardInfo shard = impl.shard;
  shard.path = impl.path;
  shard.num_samples = impl.num_samples;
  if (shard.num_shards == 1) shard.total_samples = shard.first_sample + impl.num_samples;
  write_dataset_header(impl.file, impl.info, shard);
  impl.samples.close();
  impl.file.flush();
  impl.file.close();
  sync_path(impl.temp_path, false);
  impl.state = Impl::State::Finished;
}

void DatasetWriter::commit() {
  Impl& impl = *impl_;
  VEOMNI_CHECK(impl.state == Impl::State::Finished, "{}: commit before finish", impl.path);
  std::error_code error;
  std::filesystem::rename(impl.temp_path, impl.path, error);
  VEOMNI_INPUT_CHECK(!error, "{}: cannot rename {} into place: {}", impl.path, impl.temp_path, error.message());
  const std::string parent = std::filesystem::path(impl.path).parent_path().string();
  sync_path(parent.empty() ? "." : parent, true);
  impl.state = Impl::State::Committed;
}

void DatasetWriter::close() {
  if (impl_->state == Impl::State::Committed) return;
  finish_temporary();
  commit();
}

int64_t DatasetWriter::num_samples() const { return impl_->num_samples; }

std::vector<KeyInfo> DatasetWriter::keys() const {
  std::vector<KeyInfo> keys;
  for (const auto& entry : impl_->columns) keys.push_back(entry.second.key);
  return keys;
}

const std::string& DatasetWriter::path() const { return impl_->path; }

// ---------------------------------------------------------------------------------------------------------------

std::vector<std::string> sharded_dataset_paths(const std::string& path, int64_t num_shards) {
  if (num_shards == 1) return {path};
  const std::string suffix = ".h5";
  const bool has_suffix = path.size() > suffix.size() && path.ends_with(suffix);
  const std::string stem = has_suffix ? path.substr(0, path.size() - suffix.size()) : path;
  std::vector<std::string> paths;
  for (int64_t k = 0; k < num_shards; ++k) paths.push_back(shard_file_name(stem, k, num_shards));
  return paths;
}

ShardedDatasetWriter::ShardedDatasetWriter(const std::string& path, int64_t total_samples, int64_t num_shards,
                                           DatasetInfo info, DatasetWriterOptions options)
    : info_(std::move(info)), options_(std::move(options)), total_samples_(total_samples), num_shards_(num_shards) {
  VEOMNI_INPUT_CHECK(num_shards >= 1, "{}: number of shards must be at least 1, got {}", path, num_shards);
  VEOMNI_INPUT_CHECK(total_samples >= 0, "{}: negative number of samples {}", path, total_samples);
  VEOMNI_INPUT_CHECK(num_shards == 1 || num_shards <= total_samples,
                     "{}: cannot split {} samples into {} shards (each shard needs at least one sample)", path,
                     total_samples, num_shards);
  paths_ = sharded_dataset_paths(path, num_shards);
}

ShardedDatasetWriter::~ShardedDatasetWriter() = default;

int64_t ShardedDatasetWriter::first_sample_of(int64_t shard) const { return shard * total_samples_ / num_shards_; }

void ShardedDatasetWriter::open_shard(int64_t shard) {
  std::vector<KeyInfo> schema;
  if (current_) {
    VEOMNI_CHECK(current_->num_samples() == first_sample_of(current_shard_ + 1) - first_sample_of(current_shard_),
                 "shard {} got {} samples", current_shard_, current_->num_samples());
    schema = current_->keys();
    current_->finish_temporary();
    finished_.push_back(std::move(*current_));
  }
  ShardInfo placement{paths_[static_cast<size_t>(shard)],
                      shard,
                      num_shards_,
                      first_sample_of(shard),
                      first_sample_of(shard + 1) - first_sample_of(shard),
                      total_samples_};
  current_ = std::make_unique<DatasetWriter>(placement.path, info_, options_, placement);
  // Later shards must match the first one's keys, not only their own first sample.
  if (!schema.empty()) current_->impl_->create_columns(schema);
  current_shard_ = shard;
}

void ShardedDatasetWriter::append(const Sample& sample) {
  VEOMNI_CHECK(!closed_, "append after close");
  if (appended_ >= total_samples_)
    throw Error(fmt::format("{}: more than the {} samples planned", paths_.front(), total_samples_));
  while (appended_ >= first_sample_of(current_shard_ + 1)) open_shard(current_shard_ + 1);
  current_->append(sample);
  ++appended_;
}

void ShardedDatasetWriter::close() {
  if (closed_) return;
  if (appended_ != total_samples_)
    throw Error(fmt::format("{}: {} samples written of the {} planned", paths_.front(), appended_, total_samples_));
  if (!current_) open_shard(0);  // an empty dataset still gets its (empty) file
  current_->finish_temporary();
  finished_.push_back(std::move(*current_));
  current_.reset();
  for (DatasetWriter& shard : finished_) shard.commit();
  closed_ = true;
}

}  // namespace veomni
