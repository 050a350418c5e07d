// Directories that appear complete or not at all: written under "<name>.tmp-<pid>", synced, renamed into place.
#pragma once
#include <string>

namespace veomni {

// fsync of a file or a directory, so that its bytes (or the renames inside it) survive a crash. File systems that
// cannot sync directories are tolerated; any other failure throws Error naming the path.
void fsync_path(const std::string& path);

// True for names our writers give to work in progress ("x.tmp-123", "x.tmp-123.h5"): never a finished result.
bool is_temporary_name(const std::string& name);

// Removes the entries of `dir` left behind by killed writers (temporary names). Returns how many were removed.
int remove_temporaries(const std::string& dir);

// Renames `from` over `to` durably. An existing `to` is first moved aside to a temporary name and removed after the
// rename, so that a crash at any point leaves either the old or the new directory under `to`, plus at most a
// temporary one.
void replace_directory(const std::string& from, const std::string& to);

// A directory written in one piece: files go into temp_path(); commit() syncs it and renames it to the final path.
// Destroying it without commit() removes the temporary directory, so an error leaves nothing under the final name.
class StagedDirectory {
 public:
  // Creates "<final_path>.tmp-<pid>" (the parent must exist). With overwrite false an existing non-empty
  // final_path is an InputError (hint: the tool's --overwrite flag).
  StagedDirectory(std::string final_path, bool overwrite);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const std::string& temp_path() const { return temp_path_; }
  const std::string& final_path() const { return final_path_; }
  // "<temp_path>/<name>".
  std::string file(const std::string& name) const;
  void commit();

 private:
  std::string final_path_;
  std::string temp_path_;
  bool committed_ = false;
};

}  // namespace veomni
