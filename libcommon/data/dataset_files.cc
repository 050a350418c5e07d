// Resolution of dataset paths (file, shard, directory, pattern) into the ordered list of shard files.
#include "data/dataset_files.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "data/dataset_format.h"

namespace fs = std::filesystem;

namespace veomni {

namespace {

bool is_regular(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path, ignored);
}

// Names in `directory` whose file name satisfies `keep`, sorted.
template <typename Predicate>
std::vector<std::string> files_in(const fs::path& directory, Predicate keep) {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory.empty() ? fs::path(".") : directory, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.find(".tmp-") == std::string::npos && keep(name))
      out.push_back((directory / name).string());
  }
  VEOMNI_INPUT_CHECK(!error, "{}: cannot list directory: {}", directory.string(), error.message());
  std::sort(out.begin(), out.end());
  return out;
}

// Every shard of the set that `shard` belongs to, in order; InputError naming the missing ones.
std::vector<std::string> complete_set(const ShardFileName& shard) {
  std::vector<std::string> paths, missing;
  for (int64_t k = 0; k < shard.count; ++k) {
    paths.push_back(shard_file_name(shard.stem, k, shard.count));
    if (!is_regular(paths.back())) missing.push_back(fs::path(paths.back()).filename().string());
  }
  VEOMNI_INPUT_CHECK(missing.empty(), "{}: incomplete dataset: {} of {} shards missing ({})",
                     shard_file_name(shard.stem, 0, shard.count), missing.size(), shard.count,
                     fmt::join(missing, ", "));
  return paths;
}

// The single set (or single plain file) among `files`; `what` names the search in errors.
std::vector<std::string> one_dataset_among(const std::vector<std::string>& files, const std::string& what) {
  VEOMNI_INPUT_CHECK(!files.empty(), "{}: no dataset file (*.h5) found", what);
  std::map<std::pair<std::string, int64_t>, ShardFileName> sets;
  std::vector<std::string> plain;
  for (const std::string& file : files) {
    if (auto shard = parse_shard_file_name(file))
      sets.emplace(std::make_pair(shard->stem, shard->count), *shard);
    else
      plain.push_back(file);
  }
  if (sets.size() == 1 && plain.empty()) return complete_set(sets.begin()->second);
  if (sets.empty() && plain.size() == 1) return plain;
  std::vector<std::string> found = plain;
  for (const auto& [key, shard] : sets) found.push_back(shard_file_name(shard.stem, 0, shard.count) + " (set)");
  throw InputError(fmt::format("{}: more than one dataset found ({}); name one of them", what, fmt::join(found, ", ")));
}

}  // namespace

bool wildcard_match(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> resolve_dataset_files(const std::string& path) {
  VEOMNI_INPUT_CHECK(!path.empty(), "empty dataset path");
  const fs::path given(path);
  const std::string file_name = given.filename().string();
  if (file_name.find_first_of("*?") != std::string::npos) {
    auto matching =
        files_in(given.parent_path(), [&](const std::string& name) { return wildcard_match(file_name, name); });
    return one_dataset_among(matching, path);
  }
  std::error_code ignored;
  if (fs::is_directory(given, ignored))
    return one_dataset_among(files_in(given, [](const std::string& name) { return name.ends_with(".h5"); }), path);
  if (is_regular(given)) {
    if (auto shard = parse_shard_file_name(path)) return complete_set(*shard);
    return {path};
  }
  if (path.ends_with(".h5")) {
    const std::string stem = file_name.substr(0, file_name.size() - 3);
    auto shards = files_in(given.parent_path(), [&](const std::string& name) {
      auto shard = parse_shard_file_name(name);
      return shard && shard->stem == stem;
    });
    if (!shards.empty()) return one_dataset_among(shards, path);
  }
  throw InputError(fmt::format("{}: no such file or directory", path));
}

}  // namespace veomni
