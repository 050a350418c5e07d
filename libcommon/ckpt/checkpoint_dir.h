// Where checkpoints live: <output_dir>/checkpoints/global_step_N, the `latest` pointer written last, listing the
// complete ones, rotation, and resolving what a load path (or "auto") means.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace veomni {

inline constexpr const char* kCheckpointsDirName = "checkpoints";
inline constexpr const char* kLatestFileName = "latest";
// train.checkpoint.load_path value that resumes from <output_dir>/checkpoints/latest when there is one.
inline constexpr const char* kAutoResume = "auto";

// <output_dir>/checkpoints
std::string checkpoints_dir(const std::string& output_dir);
// "global_step_12"
std::string checkpoint_dir_name(int64_t step);
// 12 for "global_step_12"; nullopt for anything else (temporary names included).
std::optional<int64_t> parse_checkpoint_dir_name(const std::string& name);

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
};
// The complete checkpoints (global_step_N directories holding metadata.json) in ascending step order.
std::vector<CheckpointEntry> list_checkpoints(const std::string& checkpoints_dir);

// The checkpoint directory `latest` names, or nullopt when there is no `latest`. A `latest` that does not name a
// global_step_N directory holding metadata.json is an InputError naming the file.
std::optional<std::string> read_latest(const std::string& checkpoints_dir);
// Points `latest` at global_step_<step>, atomically (this is what makes a save complete).
void write_latest(const std::string& checkpoints_dir, int64_t step);

// Removes the oldest complete checkpoints until `keep` remain (keep 0: none removed), never the one at
// protected_step. Each is first renamed to a temporary name, so a crash mid-removal leaves no partial checkpoint
// under a final name. Returns the removed directories.
std::vector<std::string> rotate_checkpoints(const std::string& checkpoints_dir, int64_t keep, int64_t protected_step);

// A path naming a checkpoint: the checkpoint directory itself (holding metadata.json), a checkpoints directory
// holding `latest`, or a run directory holding checkpoints/latest. Returns the checkpoint directory; InputError
// naming the path otherwise.
std::string resolve_checkpoint_path(const std::string& path);

// What train.checkpoint.load_path asks for: "" nothing; "auto" the checkpoint `latest` names under output_dir (or,
// without `latest`, the newest complete one; nullopt when there is none: a fresh start); anything else a path as
// for resolve_checkpoint_path (it must exist).
std::optional<std::string> find_resume_checkpoint(const std::string& load_path, const std::string& output_dir);

}  // namespace veomni
