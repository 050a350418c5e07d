// Temporary directories renamed into place, fsync of files and directories, cleanup after killed writers.
#include "ckpt/staged_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// "out/" and "out" name the same directory; the temporary one must sit beside it, not inside.
std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}' to sync it: {}", path, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int saved_errno = errno;
  ::close(fd);
  // Some file systems cannot sync a directory (EINVAL); the renames are still atomic there.
  if (rc != 0 && saved_errno != EINVAL && saved_errno != EROFS)
    throw Error(fmt::format("cannot sync '{}': {}", path, std::strerror(saved_errno)));
}

bool is_temporary_name(const std::string& name) { return name.find(".tmp-") != std::string::npos; }

int remove_temporaries(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  int removed = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!is_temporary_name(entry.path().filename().string())) continue;
    std::error_code remove_error;
    fs::remove_all(entry.path(), remove_error);
    if (!remove_error) ++removed;
  }
  return removed;
}

void replace_directory(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::string aside;
  if (fs::exists(to, ec)) {
    aside = fmt::format("{}.old", atomic_temp_path(to));
    fs::rename(to, aside, ec);
    if (ec) throw Error(fmt::format("cannot move '{}' aside to '{}': {}", to, aside, ec.message()));
  }
  fs::rename(from, to, ec);
  if (ec) throw Error(fmt::format("cannot rename '{}' to '{}': {}", from, to, ec.message()));
  fsync_path(parent_of(to));
  if (!aside.empty()) fs::remove_all(aside, ec);  // a leftover is a temporary name, cleaned up later
}

StagedDirectory::StagedDirectory(std::string final_path, bool overwrite)
    : final_path_(without_trailing_slashes(std::move(final_path))), temp_path_(atomic_temp_path(final_path_)) {
  VEOMNI_INPUT_CHECK(!final_path_.empty() && final_path_ != "/", "'{}' cannot be an output directory", final_path_);
  std::error_code ec;
  if (fs::exists(final_path_, ec)) {
    VEOMNI_INPUT_CHECK(fs::is_directory(final_path_, ec), "'{}' exists and is not a directory", final_path_);
    VEOMNI_INPUT_CHECK(overwrite || fs::is_empty(final_path_, ec),
                       "'{}' exists and is not empty (hint: --overwrite replaces it)", final_path_);
  }
  const std::string parent = parent_of(final_path_);
  VEOMNI_INPUT_CHECK(fs::is_directory(parent, ec), "cannot write '{}': directory '{}' does not exist", final_path_,
                     parent);
  fs::remove_all(temp_path_, ec);
  fs::create_directory(temp_path_, ec);
  VEOMNI_INPUT_CHECK(!ec, "cannot create '{}': {}", temp_path_, ec.message());
}

StagedDirectory::~StagedDirectory() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_path_, ec);
}

std::string StagedDirectory::file(const std::string& name) const { return (fs::path(temp_path_) / name).string(); }

void StagedDirectory::commit() {
  VEOMNI_CHECK(!committed_, "'{}' committed twice", final_path_);
  for (const fs::directory_entry& entry : fs::directory_iterator(temp_path_))
    if (entry.is_regular_file()) fsync_path(entry.path().string());
  fsync_path(temp_path_);
  replace_directory(temp_path_, final_path_);
  committed_ = true;
}

}  // namespace veomni
