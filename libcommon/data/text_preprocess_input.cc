// Block-wise JSONL reading (whole lines only, numbered) and whole-file JSON arrays.
#include "data/text_preprocess_input.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/json_file.h"

namespace veomni {

namespace {

bool only_spaces(std::string_view line) { return line.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

RecordReader::RecordReader(std::vector<std::string> paths, size_t block_bytes, size_t max_line_bytes)
    : paths_(std::move(paths)), records_in_(paths_.size(), 0), block_bytes_(block_bytes),
      max_line_bytes_(max_line_bytes) {
  VEOMNI_INPUT_CHECK(!paths_.empty(), "no input given");
  for (const std::string& path : paths_) {
    std::error_code ec;
    if (path == "-" || !std::filesystem::is_regular_file(path, ec)) {
      bytes_total_ = 0;
      break;
    }
    bytes_total_ += std::filesystem::file_size(path, ec);
  }
}

RecordReader::~RecordReader() {
  if (file_ && owns_file_) std::fclose(file_);
}

std::string RecordReader::location(const RecordRef& record) const {
  const std::string& path = paths_[record.file] == "-" ? std::string("<stdin>") : paths_[record.file];
  if (record.value) return fmt::format("{}: element {}", path, record.number);
  return fmt::format("{}:{}", path, record.number);
}

void RecordReader::check_line_length(size_t bytes, int64_t line) const {
  const std::string& path = paths_[current_] == "-" ? std::string("<stdin>") : paths_[current_];
  VEOMNI_INPUT_CHECK(bytes <= max_line_bytes_,
                     "{}:{}: the line is longer than {} bytes (not JSONL? --max-line-bytes raises the limit)", path,
                     line, max_line_bytes_);
}

// Reads up to block_bytes into buffer_; false when the file is exhausted.
bool RecordReader::read_more() {
  if (eof_) return false;
  const size_t old = buffer_.size();
  buffer_.resize(old + block_bytes_);
  const size_t got = std::fread(buffer_.data() + old, 1, block_bytes_, file_);
  buffer_.resize(old + got);
  bytes_read_ += got;
  if (got < block_bytes_) {
    VEOMNI_INPUT_CHECK(!std::ferror(file_), "{}: read error: {}", paths_[current_], std::strerror(errno));
    eof_ = true;
  }
  return got > 0;
}

bool RecordReader::open_next_file() {
  if (opened_) {
    if (file_ && owns_file_) std::fclose(file_);
    file_ = nullptr;
    ++current_;
  }
  opened_ = true;
  if (current_ >= paths_.size()) return false;
  const std::string& path = paths_[current_];
  owns_file_ = path != "-";
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!owns_file_ || !std::filesystem::is_directory(path, ec),
                     "{}: is a directory, expected a JSONL or JSON file", path);
  file_ = owns_file_ ? std::fopen(path.c_str(), "rb") : stdin;
  VEOMNI_INPUT_CHECK(file_ != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
  eof_ = false;
  is_array_ = false;
  buffer_.clear();
  next_line_ = 1;
  array_ = nullptr;
  next_element_ = 0;
  // The first non-space byte tells a JSON array from JSONL.
  while (read_more()) {
    const size_t first = buffer_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) continue;
    if (buffer_[first] == '[') read_json_array(std::move(buffer_));
    break;
  }
  return true;
}

void RecordReader::read_json_array(std::string head) {
  buffer_.clear();
  while (read_more()) {
  }
  head += buffer_;
  buffer_.clear();
  const std::string& path = paths_[current_];
  array_ = parse_json(head, path == "-" ? "<stdin>" : path);
  is_array_ = true;
}

bool RecordReader::next_block(std::vector<RecordRef>& out) {
  out.clear();
  while (out.empty()) {
    if (!opened_ || (is_array_ ? next_element_ >= array_.size() : buffer_.empty() && eof_)) {
      if (!open_next_file()) return false;
      continue;
    }
    if (is_array_) {
      for (size_t taken = 0; next_element_ < array_.size() && taken < 4096; ++taken, ++next_element_)
        out.push_back(RecordRef{current_, static_cast<int64_t>(next_element_), {}, &array_[next_element_]});
    } else {
      if (!eof_ && (buffer_.size() < block_bytes_ || buffer_.find('\n') == std::string::npos)) read_more();
      // Whole lines only: the unfinished last line waits for more bytes (a line longer than a block keeps
      // growing the buffer), unless the file has ended.
      size_t cut = buffer_.size();
      if (!eof_) {
        cut = buffer_.rfind('\n');
        if (cut == std::string::npos) {
          check_line_length(buffer_.size(), next_line_);
          continue;
        }
        ++cut;
      }
      block_.assign(buffer_, 0, cut);
      buffer_.erase(0, cut);
      std::string_view rest = block_;
      while (!rest.empty()) {
        const size_t end = rest.find('\n');
        std::string_view line = rest.substr(0, end);
        check_line_length(line.size(), next_line_);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!only_spaces(line)) out.push_back(RecordRef{current_, next_line_, line, nullptr});
        ++next_line_;
      }
    }
    records_in_[current_] += static_cast<int64_t>(out.size());
  }
  return true;
}

RecordProgress::RecordProgress(const RecordReader& reader)
    : reader_(reader), meter_(static_cast<double>(reader.bytes_total()) / 1e6, std::chrono::seconds(2)) {}

void RecordProgress::update(int64_t records, int64_t kept) {
  if (!meter_.due(static_cast<double>(reader_.bytes_read()) / 1e6)) return;
  const std::string eta = meter_.seconds_left() >= 0 ? fmt::format(", {:.0f}% of {:.1f} MB, about {:.0f} s left",
                                                                   100 * meter_.fraction(), meter_.total(),
                                                                   meter_.seconds_left())
                                                     : std::string();
  spdlog::info("read {} records ({} kept), {:.0f} samples/s, {:.1f} MB/s{}", records, kept,
               records / meter_.seconds(), meter_.rate(), eta);
}

void check_no_empty_input(const RecordReader& reader, bool skip_bad) {
  for (size_t f = 0; f < reader.num_files(); ++f) {
    if (reader.records_in(f) > 0) continue;
    const std::string path = reader.path(f) == "-" ? "<stdin>" : reader.path(f);
    if (!skip_bad) throw InputError(fmt::format("{}: no records (the file is empty)", path));
    spdlog::warn("{}: no records (the file is empty)", path);
  }
}

}  // namespace veomni
