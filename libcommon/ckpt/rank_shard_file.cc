// Rank shard files: identity and position attributes, one checksummed chunked dataset per parameter and field.
#include "ckpt/rank_shard_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "ckpt/file_checksum.h"
#include "ckpt/staged_directory.h"

namespace veomni {

namespace {

constexpr const char* kRankFileFormat = "veomni-checkpoint-rank";
constexpr int64_t kChunkElements = int64_t{1} << 18;  // 1 MiB of f32 per checksummed chunk

void write_position(h5::Object& object, const TrainingPosition& p) {
  object.set_int_attribute("global_step", p.global_step);
  object.set_int_attribute("optimizer_steps", p.optimizer_steps);
  object.set_int_attribute("data_epoch", p.epoch);
  object.set_int_attribute("data_step_in_epoch", p.step_in_epoch);
  object.set_int_attribute("rng_seed", p.seed);
  object.set_int_attribute("lr_total_steps", p.lr_total_steps);
  object.set_float_attribute("last_lr", p.last_lr);
}

TrainingPosition read_position(const h5::Object& object) {
  TrainingPosition p;
  p.global_step = object.int_attribute("global_step");
  p.optimizer_steps = object.int_attribute("optimizer_steps");
  p.epoch = object.int_attribute("data_epoch");
  p.step_in_epoch = object.int_attribute("data_step_in_epoch");
  p.seed = object.int_attribute("rng_seed");
  p.lr_total_steps = object.int_attribute("lr_total_steps");
  p.last_lr = object.float_attribute("last_lr");
  return p;
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(fmt::format("{}: cannot stat the written file", path));
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

const char* shard_field_name(ShardField field) {
  switch (field) {
    case ShardField::Master: return "master";
    case ShardField::ExpAvg: return "exp_avg";
    case ShardField::ExpAvgSq: return "exp_avg_sq";
  }
  return "?";
}

RankShardWriter::RankShardWriter(std::string path, int64_t rank, const MeshShape& mesh,
                                 const TrainingPosition& position)
    : path_(std::move(path)), file_(h5::File::create(path_)) {
  file_.set_string_attribute("format", kRankFileFormat);
  file_.set_int_attribute("format_version", kRankFileFormatVersion);
  file_.set_int_attribute("rank", rank);
  file_.set_int_attribute("world", mesh.world);
  file_.set_int_attribute("ulysses", mesh.ulysses);
  file_.set_int_attribute("ep", mesh.ep);
  h5::Group state = file_.create_group("state");
  write_position(state, position);
  for (size_t i = 0; i < kShardFields.size(); ++i) groups_[i] = file_.create_group(shard_field_name(kShardFields[i]));
}

void RankShardWriter::write(ShardField field, const std::string& name, const Tensor& shard) {
  VEOMNI_CHECK((shard.dtype() == DType::F32 || (shard.dtype() == DType::BF16 && field != ShardField::Master)) &&
                   shard.ndim() == 1 && shard.numel() > 0,
               "{}: {} shard of '{}' must be a non-empty 1-D f32 (moments: or bf16) tensor, got {}", path_,
               shard_field_name(field), name, shard.describe());
  Tensor host = shard.is_cpu() ? shard : shard.to(Device::cpu());
  if (host.dtype() != DType::F32) host = host.to_dtype(DType::F32);  // bf16 moments widen exactly
  h5::DatasetLayout layout;
  layout.dtype = DType::F32;
  layout.shape = {host.numel()};
  layout.chunk = {std::min(host.numel(), kChunkElements)};
  layout.checksum = true;
  h5::Dataset dataset = groups_[static_cast<size_t>(field)].create_dataset(name, layout);
  dataset.write(host.raw_data(), DType::F32, {0}, {host.numel()});
}

RankFileInfo RankShardWriter::finish() {
  for (h5::Group& g : groups_) g.close();
  file_.flush();
  file_.close();
  fsync_path(path_);
  return {std::filesystem::path(path_).filename().string(), file_size(path_), file_checksum(path_)};
}

RankShardReader::RankShardReader(std::string path, int64_t rank, const MeshShape& mesh, int64_t global_step)
    : path_(std::move(path)), file_(h5::File::open(path_)) {
  VEOMNI_INPUT_CHECK(file_.has_attribute("format") && file_.string_attribute("format") == kRankFileFormat,
                     "{}: not a veomni checkpoint rank file (attribute 'format' is not \"{}\")", path_,
                     kRankFileFormat);
  const int64_t version = file_.int_attribute("format_version");
  VEOMNI_INPUT_CHECK(version == kRankFileFormatVersion, "{}: rank file format version {} (this build reads {})",
                     path_, version, kRankFileFormatVersion);
  const int64_t got_rank = file_.int_attribute("rank"), got_world = file_.int_attribute("world");
  const int64_t got_ulysses = file_.int_attribute("ulysses"), got_ep = file_.int_attribute("ep");
  VEOMNI_INPUT_CHECK(got_rank == rank && got_world == mesh.world && got_ulysses == mesh.ulysses && got_ep == mesh.ep,
                     "{}: holds rank {} of world {} (ulysses {}, ep {}) but metadata.json expects rank {} of {}", path_,
                     got_rank, got_world, got_ulysses, got_ep, rank, mesh.describe());
  const TrainingPosition p = position();
  VEOMNI_INPUT_CHECK(p.global_step == global_step,
                     "{}: written at step {} but metadata.json is of step {} (files of different saves mixed?)", path_,
                     p.global_step, global_step);
}

TrainingPosition RankShardReader::position() const { return read_position(file_.group("state")); }

void RankShardReader::read(ShardField field, const std::string& name, int64_t shard_numel, int64_t offset,
                           int64_t count, float* out) const {
  const h5::Dataset dataset = file_.group(shard_field_name(field)).dataset(name);
  VEOMNI_INPUT_CHECK(dataset.shape() == Shape{shard_numel} && dataset.stores(DType::F32),
                     "{}: holds {} {} but metadata.json expects f32[{}]", dataset.where(),
                     dataset.stored_type_name(), shape_str(dataset.shape()), shard_numel);
  VEOMNI_CHECK(offset >= 0 && count >= 0 && offset + count <= shard_numel, "{}: read of {} at {} outside [0, {})",
               dataset.where(), count, offset, shard_numel);
  if (count > 0) dataset.read(out, DType::F32, {offset}, {count});
}

std::vector<std::string> RankShardReader::names(ShardField field) const {
  const char* group = shard_field_name(field);
  VEOMNI_INPUT_CHECK(file_.contains(group), "{}: has no group '{}' (not a complete rank file)", path_, group);
  return file_.group(group).member_names();
}

}  // namespace veomni
