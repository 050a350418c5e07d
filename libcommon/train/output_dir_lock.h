// One run per output directory: the checks of train.checkpoint.output_dir made before anything is written, and the
// advisory lock (output_dir/.veomni.lock) that rank 0 holds for the whole run.
#pragma once
#include <string>

namespace veomni {

inline constexpr const char* kOutputDirLockFile = ".veomni.lock";

// Holds an exclusive flock on <output_dir>/.veomni.lock until destroyed (or the process ends: the kernel drops the
// lock of a dead process, so a lock file left by a crashed run is simply taken over). The file records the
// holder's host and pid for the message a second run gets.
class OutputDirLock {
 public:
  // Checks `output_dir` (not a file, no file among its parents, a path the file system accepts, writable), creates
  // it and takes the lock. InputError naming train.checkpoint.output_dir: for each of those problems, and when
  // another live process holds the lock (naming its host and pid).
  explicit OutputDirLock(const std::string& output_dir);
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace veomni
