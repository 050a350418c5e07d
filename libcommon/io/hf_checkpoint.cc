// Reading validated HF weight directories (single file or sharded + index) and writing them shard by shard.
#include "io/hf_checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

bool file_exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool is_weight_file_name(const std::string& name) {
  static const std::regex kShard(R"(model-[0-9]+-of-[0-9]+\.safetensors)");
  return name == kHfWeightsFile || name == kHfWeightsIndexFile || std::regex_match(name, kShard);
}

// The index names files next to it; anything that would leave the directory is refused.
void check_mapped_file_name(const std::string& index_path, const std::string& tensor, const std::string& file) {
  const fs::path p(file);
  bool escapes = file.empty() || p.is_absolute();
  for (const auto& part : p) escapes = escapes || part == "..";
  VEOMNI_INPUT_CHECK(!escapes, "{}: tensor '{}' is mapped to '{}', which is not a file name inside the directory",
                     index_path, tensor, file);
}

uint64_t index_total_size(const std::string& index_path, const nlohmann::json& total_size) {
  // Some writers store it as a float (e.g. 16060522496.0); accept any non-negative whole number.
  if (total_size.is_number_unsigned()) return total_size.get<uint64_t>();
  if (total_size.is_number_integer() && total_size.get<int64_t>() >= 0) return total_size.get<uint64_t>();
  if (total_size.is_number_float()) {
    const double v = total_size.get<double>();
    if (v >= 0 && v < 1.8e19 && v == std::floor(v)) return static_cast<uint64_t>(v);
  }
  throw InputError(fmt::format("{}: metadata.total_size must be a whole number of bytes, found {}", index_path,
                               total_size.dump()));
}

struct SizeUnit {
  const char* name;
  uint64_t bytes;
};
constexpr SizeUnit kSizeUnits[] = {{"", 1},
                                   {"B", 1},
                                   {"KB", 1'000},
                                   {"MB", 1'000'000},
                                   {"GB", 1'000'000'000},
                                   {"TB", 1'000'000'000'000},
                                   {"KIB", uint64_t{1} << 10},
                                   {"MIB", uint64_t{1} << 20},
                                   {"GIB", uint64_t{1} << 30},
                                   {"TIB", uint64_t{1} << 40}};

std::string trim_size_text(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// Bytes per unit (case-insensitive), or 0 for an unknown unit.
uint64_t unit_bytes(std::string unit) {
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const SizeUnit& u : kSizeUnits)
    if (unit == u.name) return u.bytes;
  return 0;
}

// number * unit in whole bytes (rounded down); nullopt when the number is malformed or the product overflows.
std::optional<uint64_t> scale(const std::string& number, uint64_t unit) {
  const char* first = number.data();
  const char* last = number.data() + number.size();
  if (number.find('.') == std::string::npos) {  // whole numbers stay exact beyond 2^53
    uint64_t whole = 0, bytes = 0;
    const auto [end, ec] = std::from_chars(first, last, whole);
    if (ec != std::errc() || end != last || __builtin_mul_overflow(whole, unit, &bytes)) return std::nullopt;
    return bytes;
  }
  double fraction = 0;
  const auto [end, ec] = std::from_chars(first, last, fraction);
  const long double bytes = static_cast<long double>(fraction) * static_cast<long double>(unit);
  if (ec != std::errc() || end != last || !(bytes < 18446744073709551616.0L)) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

}  // namespace

std::string hf_shard_file_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

uint64_t parse_byte_size(std::string_view text) {
  const std::string s = trim_size_text(text);
  const size_t number_end = std::min(s.find_first_not_of("0123456789."), s.size());
  const std::string number = s.substr(0, number_end);
  const uint64_t unit = unit_bytes(trim_size_text(std::string_view(s).substr(number_end)));
  const std::optional<uint64_t> bytes = unit == 0 || number.empty() ? std::nullopt : scale(number, unit);
  VEOMNI_INPUT_CHECK(bytes && *bytes > 0,
                     "invalid size '{}': expected a positive number of bytes with an optional unit B, KB, MB, GB, TB "
                     "(powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 5GB",
                     text);
  return *bytes;
}

// ---- reader ----

HfCheckpointReader::HfCheckpointReader(const std::string& dir_or_file) : source_(dir_or_file) {
  std::error_code ec;
  VEOMNI_INPUT_CHECK(fs::exists(dir_or_file, ec), "checkpoint '{}' does not exist", dir_or_file);
  const fs::path dir(dir_or_file);
  if (!fs::is_directory(dir, ec))
    open_single(dir_or_file);
  else if (file_exists(dir / kHfWeightsFile))
    open_single((dir / kHfWeightsFile).string());
  else if (file_exists(dir / kHfWeightsIndexFile))
    open_index(dir_or_file);
  else
    throw InputError(fmt::format("{}: no {} or {}: not a HuggingFace model directory with safetensors weights",
                                 dir_or_file, kHfWeightsFile, kHfWeightsIndexFile));
  for (const auto& [name, file] : tensors_) names_.push_back(name);
}

HfCheckpointReader::~HfCheckpointReader() = default;

void HfCheckpointReader::open_single(const std::string& file) {
  files_.push_back(std::make_unique<SafetensorsReader>(file));
  for (const SafetensorsEntry& e : files_.front()->entries()) tensors_.emplace(e.name, 0);
}

void HfCheckpointReader::open_index(const std::string& dir) {
  index_path_ = (fs::path(dir) / kHfWeightsIndexFile).string();
  const nlohmann::json root = read_json_file(index_path_);
  VEOMNI_INPUT_CHECK(root.is_object() && root.contains("weight_map") && root["weight_map"].is_object(),
                     "{}: expected {{\"metadata\": {{...}}, \"weight_map\": {{tensor: file}}}}", index_path_);
  const nlohmann::json& weight_map = root["weight_map"];
  VEOMNI_INPUT_CHECK(!weight_map.empty(), "{}: weight_map is empty", index_path_);
  std::map<std::string, size_t> file_index;
  for (const auto& [name, file] : weight_map.items()) {
    VEOMNI_INPUT_CHECK(file.is_string(), "{}: weight_map['{}'] must be a file name, found {}", index_path_, name,
                       file.dump());
    const std::string file_name = file.get<std::string>();
    check_mapped_file_name(index_path_, name, file_name);
    auto it = file_index.find(file_name);
    if (it == file_index.end()) {
      const fs::path path = fs::path(dir) / file_name;
      VEOMNI_INPUT_CHECK(file_exists(path), "{}: tensor '{}' is mapped to '{}', which does not exist in {}",
                         index_path_, name, file_name, dir);
      files_.push_back(std::make_unique<SafetensorsReader>(path.string()));
      it = file_index.emplace(file_name, files_.size() - 1).first;
    }
    VEOMNI_INPUT_CHECK(files_[it->second]->contains(name),
                       "{}: tensor '{}' is mapped to '{}', but that file holds no such tensor", index_path_, name,
                       file_name);
    tensors_.emplace(name, it->second);
  }
  if (root.contains("metadata")) {
    const nlohmann::json& metadata = root["metadata"];
    VEOMNI_INPUT_CHECK(metadata.is_object(), "{}: metadata must be an object, found {}", index_path_,
                       metadata.type_name());
    if (metadata.contains("total_size")) {
      const uint64_t declared = index_total_size(index_path_, metadata["total_size"]);
      VEOMNI_INPUT_CHECK(declared == total_bytes(),
                         "{}: metadata.total_size is {} but the tensors in weight_map hold {} bytes", index_path_,
                         declared, total_bytes());
    }
  }
  for (const auto& file : files_) {
    size_t unmapped = 0;
    for (const SafetensorsEntry& e : file->entries()) unmapped += tensors_.count(e.name) == 0 ? 1 : 0;
    if (unmapped > 0)
      spdlog::warn("{}: {} tensors are not in the weight_map of {} and are ignored", file->path(), unmapped,
                   index_path_);
  }
}

const SafetensorsReader& HfCheckpointReader::file_reader(const std::string& name) const {
  const auto it = tensors_.find(name);
  VEOMNI_INPUT_CHECK(it != tensors_.end(), "{}: no tensor named '{}' ({} tensors in the checkpoint)", source_, name,
                     tensors_.size());
  return *files_[it->second];
}

const SafetensorsEntry& HfCheckpointReader::entry(const std::string& name) const {
  return file_reader(name).entry(name);
}

const std::string& HfCheckpointReader::file_of(const std::string& name) const { return file_reader(name).path(); }

uint64_t HfCheckpointReader::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, file] : tensors_) total += files_[file]->entry(name).nbytes();
  return total;
}

Tensor HfCheckpointReader::read(const std::string& name) const { return file_reader(name).read(name); }

Tensor HfCheckpointReader::read_rows(const std::string& name, int64_t row_begin, int64_t row_end) const {
  return file_reader(name).read_rows(name, row_begin, row_end);
}

void HfCheckpointReader::read_into(const std::string& name, Tensor& destination) const {
  file_reader(name).read_into(name, destination);
}

// ---- writer ----

HfCheckpointWriter::HfCheckpointWriter(std::string dir, uint64_t max_shard_bytes,
                                       std::map<std::string, std::string> metadata)
    : dir_(std::move(dir)), max_shard_bytes_(max_shard_bytes), metadata_(std::move(metadata)) {
  VEOMNI_INPUT_CHECK(max_shard_bytes_ > 0, "{}: the maximum shard size must be positive", dir_);
}

HfCheckpointWriter::~HfCheckpointWriter() = default;

void HfCheckpointWriter::declare(const std::string& name, DType dtype, const Shape& shape) {
  VEOMNI_CHECK(!planned_, "{}: tensor '{}' declared after writing started", dir_, name);
  VEOMNI_CHECK(declared_index_.count(name) == 0, "{}: tensor '{}' declared twice", dir_, name);
  const uint64_t bytes = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  declared_index_.emplace(name, declared_.size());
  declared_.push_back(SafetensorsEntry{name, dtype, shape, 0, bytes});
}

void HfCheckpointWriter::plan() {
  VEOMNI_CHECK(!planned_, "{}: planned twice", dir_);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  VEOMNI_INPUT_CHECK(!ec, "cannot create directory '{}': {}", dir_, ec.message());
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < declared_.size(); ++i) {
    const uint64_t bytes = declared_[i].nbytes();
    if (shards_.empty() || (!shards_.back().tensors.empty() && shard_bytes + bytes > max_shard_bytes_)) {
      shards_.push_back({});
      shard_bytes = 0;
    }
    shards_.back().tensors.push_back(i);
    shard_bytes += bytes;
  }
  if (shards_.empty()) shards_.push_back({});  // no tensors: still an (empty) model.safetensors
  shard_of_tensor_.assign(declared_.size(), 0);
  for (size_t s = 0; s < shards_.size(); ++s) {
    shards_[s].file = shards_.size() == 1 ? kHfWeightsFile : hf_shard_file_name(s + 1, shards_.size());
    shard_file_names_.push_back(shards_[s].file);
    for (size_t t : shards_[s].tensors) shard_of_tensor_[t] = s;
  }
  planned_ = true;
}

const std::vector<std::string>& HfCheckpointWriter::shard_files() {
  if (!planned_) plan();
  return shard_file_names_;
}

const std::string& HfCheckpointWriter::file_of(const std::string& name) {
  if (!planned_) plan();
  const auto it = declared_index_.find(name);
  VEOMNI_CHECK(it != declared_index_.end(), "{}: tensor '{}' was not declared", dir_, name);
  return shards_[shard_of_tensor_[it->second]].file;
}

uint64_t HfCheckpointWriter::total_bytes() const {
  uint64_t total = 0;
  for (const SafetensorsEntry& e : declared_) total += e.nbytes();
  return total;
}

void HfCheckpointWriter::open_next_shard() {
  const Shard& shard = shards_[opened_shards_++];
  current_ = std::make_unique<SafetensorsWriter>((fs::path(dir_) / shard.file).string(), metadata_);
  for (size_t t : shard.tensors) current_->declare(declared_[t].name, declared_[t].dtype, declared_[t].shape);
}

void HfCheckpointWriter::close_current_shard() {
  current_->finish();
  current_.reset();
}

SafetensorsWriter& HfCheckpointWriter::writer_for_next_tensor() {
  VEOMNI_CHECK(!finished_, "{}: write after finish()", dir_);
  if (!planned_) plan();
  if (current_ && current_->all_written()) close_current_shard();
  if (!current_) {
    VEOMNI_CHECK(opened_shards_ < shards_.size(), "{}: write after every declared tensor was written", dir_);
    open_next_shard();
  }
  return *current_;
}

void HfCheckpointWriter::write(const std::string& name, const Tensor& tensor) {
  writer_for_next_tensor().write(name, tensor);
}

void HfCheckpointWriter::write_rows(const std::string& name, const Tensor& rows) {
  writer_for_next_tensor().write_rows(name, rows);
}

void HfCheckpointWriter::finish() {
  VEOMNI_CHECK(!finished_, "{}: finish() called twice", dir_);
  if (!planned_) plan();
  if (current_) close_current_shard();
  while (opened_shards_ < shards_.size()) {
    const Shard& shard = shards_[opened_shards_];
    VEOMNI_CHECK(shard.tensors.empty(), "{}: finish() before tensor '{}' was written", dir_,
                 declared_[shard.tensors.front()].name);
    open_next_shard();
    close_current_shard();
  }
  if (shards_.size() > 1) write_index();
  remove_stale_files();
  finished_ = true;
}

void HfCheckpointWriter::write_index() const {
  nlohmann::json weight_map = nlohmann::json::object();  // std::map underneath: keys come out sorted
  for (size_t t = 0; t < declared_.size(); ++t) weight_map[declared_[t].name] = shards_[shard_of_tensor_[t]].file;
  int64_t total_parameters = 0;
  for (const SafetensorsEntry& e : declared_) total_parameters += shape_numel(e.shape);
  // The metadata transformers 5 writes: element count and bytes of all tensors.
  const nlohmann::json index = {{"metadata", {{"total_parameters", total_parameters}, {"total_size", total_bytes()}}},
                                {"weight_map", std::move(weight_map)}};
  write_json_file((fs::path(dir_) / kHfWeightsIndexFile).string(), index, 2);
}

void HfCheckpointWriter::remove_stale_files() const {
  std::set<std::string> current(shard_file_names_.begin(), shard_file_names_.end());
  if (shards_.size() > 1) current.insert(kHfWeightsIndexFile);
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir_, ec)) {
    const std::string name = item.path().filename().string();
    if (is_weight_file_name(name) && current.count(name) == 0) stale.push_back(item.path());
  }
  for (const fs::path& path : stale) {
    spdlog::info("{}: removing {} left by an earlier save", dir_, path.filename().string());
    fs::remove(path, ec);
    if (ec) throw Error(fmt::format("cannot remove stale '{}': {}", path.string(), ec.message()));
  }
}

}  // namespace veomni
