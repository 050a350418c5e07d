// Checkpoint reading with resharding: a requested element range is cut out of every saved rank shard it overlaps.
#include "ckpt/checkpoint_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "ckpt/file_checksum.h"
#include "io/json_file.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

void check_rank_file(const fs::path& path, uint64_t expected_bytes) {
  struct stat st {};
  VEOMNI_INPUT_CHECK(::stat(path.c_str(), &st) == 0, "{}: rank file is missing (the checkpoint is incomplete)",
                     path.string());
  VEOMNI_INPUT_CHECK(static_cast<uint64_t>(st.st_size) == expected_bytes,
                     "{}: has {} bytes but metadata.json recorded {} (truncated or damaged)", path.string(),
                     static_cast<uint64_t>(st.st_size), expected_bytes);
}

// Python's json writes NaN / Infinity / -Infinity, which the log keeps to show what happened.
double metric_value(const nlohmann::ordered_json& entry, const std::string& path, const std::string& key, size_t i) {
  if (entry.is_number()) return entry.get<double>();
  if (entry.is_string()) {
    const auto& s = entry.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  throw InputError(fmt::format("{}: key '{}' index {} is {}, expected a number", path, key, i, entry.dump()));
}

}  // namespace

FlatRange full_tensor_range(const ShardSpec& spec, const Shape& full_shape) {
  const int64_t rows = full_shape.empty() ? 1 : full_shape[0];
  const int64_t row_numel = shape_numel(full_shape) / std::max<int64_t>(1, rows);
  const int64_t base = spec.rows_begin * row_numel;
  return {base + spec.flat_begin, base + spec.flat_end};
}

CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)), metadata_(read_checkpoint_metadata(dir_)) {
  for (const RankFileInfo& f : metadata_.rank_files) check_rank_file(fs::path(dir_) / f.file, f.bytes);
  if (metadata_.has_metrics) {
    const fs::path log = fs::path(dir_) / kCheckpointMetricsFile;
    std::error_code ec;
    VEOMNI_INPUT_CHECK(fs::is_regular_file(log, ec), "{}: missing (metadata.json says the checkpoint stores it)",
                       log.string());
  }
  files_.resize(metadata_.rank_files.size());
  verified_.assign(metadata_.rank_files.size(), false);
}

CheckpointReader::~CheckpointReader() = default;

size_t CheckpointReader::param_index(const std::string& name) const {
  for (size_t i = 0; i < metadata_.params.size(); ++i)
    if (metadata_.params[i].name == name) return i;
  throw InputError(fmt::format("{}: the checkpoint has no parameter '{}'", dir_, name));
}

void CheckpointReader::require_full_model(const std::string& purpose) const {
  if (!metadata_.adapter) return;
  const BaseModelIdentity& base = metadata_.adapter->base;
  throw InputError(fmt::format(
      "{}: an adapter checkpoint (LoRA rank {}: {} trainable tensors; the base model, {}, is not in it); {} needs a "
      "whole model (hint: read its adapters with read_adapter_checkpoint, or train without model.lora_config)",
      dir_, metadata_.adapter->lora.rank, metadata_.params.size(),
      base.random_init() ? fmt::format("a random initialisation with seed {}", base.seed) : "'" + base.model_path + "'",
      purpose));
}

const RankShardReader& CheckpointReader::rank_file(int64_t rank) const {
  std::unique_ptr<RankShardReader>& file = files_.at(static_cast<size_t>(rank));
  if (!file) {
    const RankFileInfo& info = metadata_.rank_files[static_cast<size_t>(rank)];
    const std::string path = (fs::path(dir_) / info.file).string();
    if (!verified_[static_cast<size_t>(rank)]) {
      const uint64_t checksum = file_checksum(path);
      VEOMNI_INPUT_CHECK(checksum == info.checksum,
                         "{}: content checksum {} differs from {} recorded in metadata.json (the file is damaged)",
                         path, format_checksum(checksum), format_checksum(info.checksum));
      verified_[static_cast<size_t>(rank)] = true;
    }
    file = std::make_unique<RankShardReader>(path, rank, metadata_.mesh, metadata_.position.global_step);
  }
  return *file;
}

void CheckpointReader::read_range(size_t index, ShardField field, int64_t begin, int64_t end, float* out) const {
  const CheckpointParam& p = metadata_.params.at(index);
  VEOMNI_CHECK(begin >= 0 && begin <= end && end <= shape_numel(p.shape), "range [{}, {}) of '{}' {}", begin, end,
               p.name, shape_str(p.shape));
  int64_t covered = 0;
  for (int64_t r = 0; r < metadata_.mesh.world && covered < end - begin; ++r) {
    const ShardSpec spec = shard_spec_for(p.shape, p.expert, metadata_.mesh, r);
    const FlatRange held = full_tensor_range(spec, p.shape);
    const int64_t lo = std::max(begin, held.begin), hi = std::min(end, held.end);
    if (lo >= hi) continue;
    rank_file(r).read(field, p.name, p.shard_numel, lo - held.begin, hi - lo, out + (lo - begin));
    covered += hi - lo;
  }
  VEOMNI_CHECK(covered == end - begin, "{}: the shards cover {} of the {} elements [{}, {}) of '{}'", dir_, covered,
               end - begin, begin, end, p.name);
}

Tensor CheckpointReader::read_full(size_t index, ShardField field) const {
  const CheckpointParam& p = metadata_.params.at(index);
  Tensor full = Tensor::empty(p.shape, DType::F32);
  read_range(index, field, 0, full.numel(), full.data<float>());
  return full;
}

void CheckpointReader::close_files() {
  for (std::unique_ptr<RankShardReader>& file : files_) file.reset();
}

MetricsLog CheckpointReader::metrics() const {
  if (!metadata_.has_metrics) return MetricsLog();
  const std::string path = (fs::path(dir_) / kCheckpointMetricsFile).string();
  const nlohmann::ordered_json root = read_ordered_json_file(path, NonFiniteTokens::AsStrings);
  VEOMNI_INPUT_CHECK(root.is_object(), "{}: expected an object of metric arrays", path);
  std::vector<MetricSeries> series;
  for (const auto& [key, array] : root.items()) {
    VEOMNI_INPUT_CHECK(array.is_array(), "{}: key '{}' is not an array", path, key);
    MetricSeries s{key, {}};
    for (size_t i = 0; i < array.size(); ++i) s.values.push_back(metric_value(array[i], path, key, i));
    series.push_back(std::move(s));
  }
  MetricsLog log(std::move(series), path);
  VEOMNI_INPUT_CHECK(log.series().empty() || static_cast<int64_t>(log.num_steps()) == metadata_.position.global_step,
                     "{}: it has {} steps but the checkpoint is at step {}", path, log.num_steps(),
                     metadata_.position.global_step);
  return log;
}

}  // namespace veomni
