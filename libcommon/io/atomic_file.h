// Atomic file writes: bytes go to "<path>.tmp-<pid>", are fsynced, renamed over <path>, and the directory is fsynced.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace veomni {

// "<path>.tmp-<pid>": the name a file has while it is being written.
std::string atomic_temp_path(const std::string& path);

// Writes one file atomically: readers see either the old file or the complete new one, never a partial file.
// Destroying the writer without commit() removes the temporary file (an exception mid-write leaves nothing behind).
class AtomicFileWriter {
 public:
  // Creates the temporary file; throws InputError naming the path when it cannot be created (missing directory,
  // no permission).
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends bytes; throws veomni::Error naming the path on an I/O failure (disk full, ...).
  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  AtomicFileWriter& operator<<(std::string_view text) {
    write(text);
    return *this;
  }

  // fsync, close, rename over the final path, fsync the directory. Writing after commit is an error.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }
  bool committed() const { return committed_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

// Replaces (or creates) path with exactly these bytes, atomically.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace veomni
