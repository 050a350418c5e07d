// Checkpoint directory naming, the `latest` pointer, listing, rotation and load-path resolution.
#include "ckpt/checkpoint_dir.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "ckpt/checkpoint_metadata.h"
#include "ckpt/staged_directory.h"
#include "io/atomic_file.h"
#include "io/json_file.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStepPrefix = "global_step_";

bool is_complete_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kCheckpointMetadataFile, ec);
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

}  // namespace

std::string checkpoints_dir(const std::string& output_dir) {
  return (fs::path(output_dir) / kCheckpointsDirName).string();
}

std::string checkpoint_dir_name(int64_t step) { return fmt::format("{}{}", kStepPrefix, step); }

std::optional<int64_t> parse_checkpoint_dir_name(const std::string& name) {
  if (name.size() <= kStepPrefix.size() || name.compare(0, kStepPrefix.size(), kStepPrefix) != 0) return std::nullopt;
  const std::string digits = name.substr(kStepPrefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::optional<int64_t> step = parse_checkpoint_dir_name(entry.path().filename().string());
    if (step && entry.is_directory() && is_complete_checkpoint(entry.path()))
      out.push_back({*step, entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

std::optional<std::string> read_latest(const std::string& dir) {
  const fs::path latest = fs::path(dir) / kLatestFileName;
  std::error_code ec;
  if (!fs::exists(latest, ec)) return std::nullopt;
  const std::string name = trimmed(read_text_file(latest.string()));
  VEOMNI_INPUT_CHECK(parse_checkpoint_dir_name(name).has_value(),
                     "{}: expected a checkpoint directory name like global_step_100, found '{}'", latest.string(),
                     name.substr(0, 80));
  const fs::path target = fs::path(dir) / name;
  VEOMNI_INPUT_CHECK(is_complete_checkpoint(target),
                     "{}: names '{}', which is not a complete checkpoint (no {}); pass "
                     "train.checkpoint.load_path=<dir>/global_step_N to choose one",
                     latest.string(), target.string(), kCheckpointMetadataFile);
  return target.string();
}

void write_latest(const std::string& dir, int64_t step) {
  write_file_atomic((fs::path(dir) / kLatestFileName).string(), checkpoint_dir_name(step) + "\n");
}

std::vector<std::string> rotate_checkpoints(const std::string& dir, int64_t keep, int64_t protected_step) {
  std::vector<std::string> removed;
  if (keep <= 0) return removed;
  std::vector<CheckpointEntry> all = list_checkpoints(dir);
  auto excess = static_cast<int64_t>(all.size()) - keep;
  for (const CheckpointEntry& entry : all) {
    if (excess <= 0) break;
    if (entry.step == protected_step) continue;
    const std::string doomed = atomic_temp_path(entry.path) + ".old";
    std::error_code ec;
    fs::rename(entry.path, doomed, ec);
    if (ec) throw Error(fmt::format("cannot remove old checkpoint '{}': {}", entry.path, ec.message()));
    fs::remove_all(doomed, ec);
    removed.push_back(entry.path);
    --excess;
  }
  if (!removed.empty()) fsync_path(dir);
  return removed;
}

std::string resolve_checkpoint_path(const std::string& path) {
  std::error_code ec;
  VEOMNI_INPUT_CHECK(fs::exists(path, ec), "checkpoint '{}' does not exist", path);
  VEOMNI_INPUT_CHECK(fs::is_directory(path, ec), "checkpoint '{}' is not a directory", path);
  if (fs::exists(fs::path(path) / kCheckpointMetadataFile, ec)) return path;
  for (const fs::path& dir : {fs::path(path), fs::path(path) / kCheckpointsDirName})
    if (std::optional<std::string> latest = read_latest(dir.string())) return *latest;
  throw InputError(fmt::format("'{}' is not a checkpoint: it holds no {}, no {} and no {}/{} (an interrupted save "
                               "leaves only a .tmp- directory)",
                               path, kCheckpointMetadataFile, kLatestFileName, kCheckpointsDirName, kLatestFileName));
}

std::optional<std::string> find_resume_checkpoint(const std::string& load_path, const std::string& output_dir) {
  if (load_path.empty()) return std::nullopt;
  if (load_path != kAutoResume) return resolve_checkpoint_path(load_path);
  const std::string dir = checkpoints_dir(output_dir);
  if (std::optional<std::string> latest = read_latest(dir)) return latest;
  // A crash between the first checkpoint's rename and its `latest` leaves a complete checkpoint without a pointer.
  const std::vector<CheckpointEntry> all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().path;
}

}  // namespace veomni
