// safetensors reading (validated header, pread per tensor) and streaming writing (header first, then data).
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"

namespace veomni {

// The format is little-endian; we copy bytes straight between files and tensors.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// The same cap as the reference implementation: a larger "header" means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{DType::F32, "F32"}, {DType::BF16, "BF16"}, {DType::F16, "F16"},
                                     {DType::I32, "I32"}, {DType::I64, "I64"},   {DType::U8, "U8"},
                                     {DType::Bool, "BOOL"}};

std::string safetensors_errno_text() { return std::strerror(errno); }

uint64_t checked_nbytes(const std::string& path, const std::string& name, const Shape& shape, DType dtype) {
  uint64_t bytes = dtype_size(dtype);
  for (int64_t d : shape)
    VEOMNI_INPUT_CHECK(!__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes),
                       "{}: tensor '{}' has shape {} whose size overflows 64 bits", path, name, shape_str(shape));
  return bytes;
}

uint64_t non_negative_integer(const nlohmann::json& value, const std::string& path, const std::string& name,
                              const char* field) {
  VEOMNI_INPUT_CHECK(value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0),
                     "{}: tensor '{}': {} must hold non-negative integers, found {}", path, name, field, value.dump());
  return value.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& info) {
  VEOMNI_INPUT_CHECK(info.is_object(), "{}: tensor '{}': expected an object with dtype, shape, data_offsets", path,
                     name);
  for (const char* field : {"dtype", "shape", "data_offsets"})
    VEOMNI_INPUT_CHECK(info.contains(field), "{}: tensor '{}' has no '{}'", path, name, field);
  const auto& dtype = info["dtype"];
  const auto& shape = info["shape"];
  const auto& offsets = info["data_offsets"];
  VEOMNI_INPUT_CHECK(dtype.is_string(), "{}: tensor '{}': dtype must be a string, found {}", path, name, dtype.dump());
  VEOMNI_INPUT_CHECK(shape.is_array(), "{}: tensor '{}': shape must be an array, found {}", path, name, shape.dump());
  VEOMNI_INPUT_CHECK(offsets.is_array() && offsets.size() == 2,
                     "{}: tensor '{}': data_offsets must be [begin, end], found {}", path, name, offsets.dump());
  SafetensorsEntry entry;
  entry.name = name;
  try {
    entry.dtype = dtype_from_safetensors_name(dtype.get<std::string>());
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: tensor '{}': {}", path, name, e.what()));
  }
  for (const auto& d : shape) {
    const uint64_t size = non_negative_integer(d, path, name, "shape");
    VEOMNI_INPUT_CHECK(size <= static_cast<uint64_t>(INT64_MAX), "{}: tensor '{}': shape {} has a size beyond 2^63",
                       path, name, quoted_excerpt(shape.dump()));
    entry.shape.push_back(static_cast<int64_t>(size));
  }
  entry.begin = non_negative_integer(offsets[0], path, name, "data_offsets");
  entry.end = non_negative_integer(offsets[1], path, name, "data_offsets");
  VEOMNI_INPUT_CHECK(entry.begin <= entry.end, "{}: tensor '{}': data_offsets [{}, {}) end before they begin", path,
                     name, entry.begin, entry.end);
  const uint64_t expected = checked_nbytes(path, name, entry.shape, entry.dtype);
  VEOMNI_INPUT_CHECK(entry.nbytes() == expected,
                     "{}: tensor '{}' ({} {}) needs {} bytes but its data_offsets [{}, {}) span {}", path, name,
                     safetensors_dtype_name(entry.dtype), shape_str(entry.shape), expected, entry.begin, entry.end,
                     entry.nbytes());
  return entry;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const nlohmann::json& value) {
  VEOMNI_INPUT_CHECK(value.is_object(), "{}: __metadata__ must be an object of strings, found {}", path,
                     value.type_name());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    VEOMNI_INPUT_CHECK(item.is_string(), "{}: __metadata__ '{}' must be a string, found {}", path, key, item.dump());
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// Tensors must tile the data section exactly: sorted by offset, each begins where the previous ended.
void check_layout(const std::string& path, const std::vector<SafetensorsEntry>& entries, uint64_t data_bytes) {
  uint64_t expected_begin = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : entries) {
    VEOMNI_INPUT_CHECK(e.begin >= expected_begin, "{}: tensor '{}' at data_offsets [{}, {}) overlaps '{}' at [{}, {})",
                       path, e.name, e.begin, e.end, previous ? previous->name : "", previous ? previous->begin : 0,
                       expected_begin);
    VEOMNI_INPUT_CHECK(e.begin == expected_begin,
                       "{}: gap in the data section: bytes [{}, {}) before tensor '{}' belong to no tensor", path,
                       expected_begin, e.begin, e.name);
    expected_begin = e.end;
    previous = &e;
  }
  VEOMNI_INPUT_CHECK(expected_begin <= data_bytes,
                     "{}: truncated file: its tensors need {} bytes of data but only {} follow the header", path,
                     expected_begin, data_bytes);
  VEOMNI_INPUT_CHECK(expected_begin == data_bytes,
                     "{}: {} unexpected bytes after the last tensor (the data section holds {}, the tensors {})", path,
                     data_bytes - expected_begin, data_bytes, expected_begin);
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  VEOMNI_CHECK(false, "dtype {} has no safetensors name", dtype_name(dtype));
}

DType dtype_from_safetensors_name(std::string_view name) {
  for (const DTypeName& d : kDTypeNames)
    if (name == d.name) return d.dtype;
  throw InputError(fmt::format("unsupported safetensors dtype '{}' (supported: F32, BF16, F16, I32, I64, U8, BOOL)",
                               name));
}

// ---- reader ----

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(fmt::format("cannot open '{}': {}", path_, safetensors_errno_text()));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw InputError(fmt::format("cannot stat '{}': {}", path_, safetensors_errno_text()));
    VEOMNI_INPUT_CHECK(S_ISREG(st.st_mode), "'{}' is not a regular file", path_);
    const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
    VEOMNI_INPUT_CHECK(file_bytes >= 8, "{}: not a safetensors file: {} bytes, too short for the 8-byte header length",
                       path_, file_bytes);
    uint64_t header_bytes = 0;
    read_bytes(0, &header_bytes, 8, "the header length");
    VEOMNI_INPUT_CHECK(header_bytes <= file_bytes - 8,
                       "{}: header length {} exceeds the {} bytes that follow it (truncated or not a safetensors file)",
                       path_, header_bytes, file_bytes - 8);
    VEOMNI_INPUT_CHECK(header_bytes <= kMaxHeaderBytes, "{}: header length {} exceeds the {}-byte limit", path_,
                       header_bytes, kMaxHeaderBytes);
    VEOMNI_INPUT_CHECK(header_bytes >= 2, "{}: header length {} is too small for a JSON object", path_, header_bytes);
    std::string header(header_bytes, '\0');
    read_bytes(8, header.data(), header_bytes, "the header");
    const nlohmann::json root = parse_json(header, path_ + " (safetensors header)");
    VEOMNI_INPUT_CHECK(root.is_object(), "{}: the safetensors header must be a JSON object, found {}", path_,
                       root.type_name());
    for (const auto& [name, info] : root.items()) {
      if (name == "__metadata__")
        metadata_ = parse_metadata(path_, info);
      else
        entries_.push_back(parse_entry(path_, name, info));
    }
    std::sort(entries_.begin(), entries_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
      return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
    });
    data_offset_ = 8 + header_bytes;
    check_layout(path_, entries_, file_bytes - data_offset_);
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const auto it = index_.find(name);
  VEOMNI_INPUT_CHECK(it != index_.end(), "{}: no tensor named '{}' ({} tensors in the file)", path_, name,
                     entries_.size());
  return entries_[it->second];
}

void SafetensorsReader::read_bytes(uint64_t offset, void* destination, uint64_t bytes, const std::string& what) const {
  char* out = static_cast<char*>(destination);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, out, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: cannot read {}: {}", path_, what, safetensors_errno_text()));
    VEOMNI_INPUT_CHECK(n > 0, "{}: file ended while reading {} (was it truncated after it was opened?)", path_, what);
    out += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
}

Tensor SafetensorsReader::read(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  Tensor tensor = Tensor::empty(e.shape, e.dtype);
  read_bytes(data_offset_ + e.begin, tensor.raw_data(), e.nbytes(), fmt::format("tensor '{}'", name));
  return tensor;
}

Tensor SafetensorsReader::read_rows(const std::string& name, int64_t row_begin, int64_t row_end) const {
  const SafetensorsEntry& e = entry(name);
  VEOMNI_CHECK(!e.shape.empty(), "{}: tensor '{}' is a scalar, it has no rows", path_, name);
  VEOMNI_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= e.shape[0],
               "{}: rows [{}, {}) of tensor '{}' with shape {}", path_, row_begin, row_end, name, shape_str(e.shape));
  Shape shape = e.shape;
  shape[0] = row_end - row_begin;
  Tensor tensor = Tensor::empty(shape, e.dtype);
  const uint64_t row_bytes = e.shape[0] == 0 ? 0 : e.nbytes() / static_cast<uint64_t>(e.shape[0]);
  read_bytes(data_offset_ + e.begin + static_cast<uint64_t>(row_begin) * row_bytes, tensor.raw_data(),
             tensor.nbytes(), fmt::format("rows [{}, {}) of tensor '{}'", row_begin, row_end, name));
  return tensor;
}

void SafetensorsReader::read_into(const std::string& name, Tensor& destination) const {
  const SafetensorsEntry& e = entry(name);
  VEOMNI_CHECK(destination.dtype() == e.dtype && destination.nbytes() == e.nbytes(),
               "{}: tensor '{}' is {} {}, destination is {}", path_, name, safetensors_dtype_name(e.dtype),
               shape_str(e.shape), destination.describe());
  if (!destination.is_cpu()) {
    destination.copy_from(read(name));
    return;
  }
  read_bytes(data_offset_ + e.begin, destination.raw_data(), e.nbytes(), fmt::format("tensor '{}'", name));
}

// ---- writer ----

SafetensorsWriter::SafetensorsWriter(std::string path, std::map<std::string, std::string> metadata)
    : path_(std::move(path)), metadata_(std::move(metadata)) {}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::declare(const std::string& name, DType dtype, const Shape& shape) {
  VEOMNI_CHECK(!file_ && !finished_, "{}: tensor '{}' declared after writing started", path_, name);
  VEOMNI_CHECK(!name.empty() && name != "__metadata__", "{}: invalid tensor name '{}'", path_, name);
  VEOMNI_CHECK(index_.count(name) == 0, "{}: tensor '{}' declared twice", path_, name);
  for (int64_t d : shape) VEOMNI_CHECK(d >= 0, "{}: tensor '{}' has negative shape {}", path_, name, shape_str(shape));
  SafetensorsEntry entry{name, dtype, shape, 0, 0};
  entry.begin = entries_.empty() ? 0 : entries_.back().end;
  entry.end = entry.begin + static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  index_.emplace(name, entries_.size());
  entries_.push_back(std::move(entry));
}

std::string SafetensorsWriter::header_text() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  for (const SafetensorsEntry& e : entries_)
    header[e.name] = {
        {"dtype", safetensors_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string text = header.dump();
  // Padding the header to a multiple of 8 keeps the data section 8-byte aligned for readers that map the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

uint64_t SafetensorsWriter::header_bytes() const { return header_text().size(); }

uint64_t SafetensorsWriter::file_bytes() const {
  return 8 + header_bytes() + (entries_.empty() ? 0 : entries_.back().end);
}

void SafetensorsWriter::start_data() {
  const std::string header = header_text();
  file_ = std::make_unique<AtomicFileWriter>(path_);
  const uint64_t header_length = header.size();
  file_->write(&header_length, sizeof header_length);
  file_->write(header);
}

SafetensorsEntry& SafetensorsWriter::current_entry(const std::string& name) {
  VEOMNI_CHECK(!finished_, "{}: write of '{}' after finish()", path_, name);
  VEOMNI_CHECK(next_entry_ < entries_.size(), "{}: write of '{}' but every declared tensor is written", path_, name);
  VEOMNI_CHECK(entries_[next_entry_].name == name, "{}: write of '{}' but the next declared tensor is '{}'", path_,
               name, entries_[next_entry_].name);
  if (!file_) start_data();
  return entries_[next_entry_];
}

void SafetensorsWriter::write(const std::string& name, const Tensor& tensor) {
  const SafetensorsEntry& e = current_entry(name);
  VEOMNI_CHECK(written_in_entry_ == 0, "{}: tensor '{}' written whole after some of its rows", path_, name);
  VEOMNI_CHECK(tensor.dtype() == e.dtype && tensor.shape() == e.shape, "{}: tensor '{}' declared {} {}, written {}",
               path_, name, safetensors_dtype_name(e.dtype), shape_str(e.shape), tensor.describe());
  if (e.shape.empty()) {  // a scalar has no rows to stream
    const Tensor cpu = tensor.is_cpu() ? tensor : tensor.to(Device::cpu());
    file_->write(cpu.raw_data(), cpu.nbytes());
    ++next_entry_;
    return;
  }
  write_rows(name, tensor);
}

void SafetensorsWriter::write_rows(const std::string& name, const Tensor& rows) {
  const SafetensorsEntry& e = current_entry(name);
  VEOMNI_CHECK(!e.shape.empty(), "{}: tensor '{}' is a scalar: write it whole", path_, name);
  const bool trailing_match = rows.ndim() == static_cast<int>(e.shape.size()) &&
                              std::equal(e.shape.begin() + 1, e.shape.end(), rows.shape().begin() + 1);
  VEOMNI_CHECK(rows.dtype() == e.dtype && trailing_match, "{}: rows of tensor '{}' ({} {}) given as {}", path_, name,
               safetensors_dtype_name(e.dtype), shape_str(e.shape), rows.describe());
  VEOMNI_CHECK(written_in_entry_ + rows.nbytes() <= e.nbytes(), "{}: more rows than tensor '{}' {} holds", path_,
               name, shape_str(e.shape));
  if (rows.nbytes() > 0) {
    const Tensor cpu = rows.is_cpu() ? rows : rows.to(Device::cpu());
    file_->write(cpu.raw_data(), cpu.nbytes());
  }
  written_in_entry_ += rows.nbytes();
  if (written_in_entry_ == e.nbytes()) {
    ++next_entry_;
    written_in_entry_ = 0;
  }
}

void SafetensorsWriter::finish() {
  VEOMNI_CHECK(!finished_, "{}: finish() called twice", path_);
  VEOMNI_CHECK(next_entry_ == entries_.size() && written_in_entry_ == 0,
               "{}: finish() before tensor '{}' was written in full ({} of {} tensors done)", path_,
               next_entry_ < entries_.size() ? entries_[next_entry_].name : "", next_entry_, entries_.size());
  if (!file_) start_data();
  file_->commit();
  finished_ = true;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter writer(path, metadata);
  for (const auto& [name, tensor] : tensors) writer.declare(name, tensor.dtype(), tensor.shape());
  for (const auto& [name, tensor] : tensors) writer.write(name, tensor);
  writer.finish();
}

}  // namespace veomni
