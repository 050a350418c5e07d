// Finds the file(s) of a dataset from what the user gave: a file, one shard, a directory or a pattern.
#pragma once
#include <string>
#include <vector>

namespace veomni {

// The files of the dataset named by `path`, shard 0 first:
//   - a file named "<stem>-NNNNN-of-MMMMM.h5": every shard of that set (InputError if one is missing);
//   - any other existing file: that file alone;
//   - a directory: the one set or the one .h5 file inside (InputError if there are several or none);
//   - a pattern with '*' or '?' in its file name (e.g. "train-*-of-*.h5"): the one set it matches;
//   - "<stem>.h5" that does not exist while "<stem>-00000-of-MMMMM.h5" does: that set (what
//     ShardedDatasetWriter writes for "<stem>.h5").
// Temporary files ("*.tmp-<pid>") are never picked up.
std::vector<std::string> resolve_dataset_files(const std::string& path);

// Shell-style match of a file name: '*' any run of characters, '?' one character.
bool wildcard_match(const std::string& pattern, const std::string& name);

}  // namespace veomni
