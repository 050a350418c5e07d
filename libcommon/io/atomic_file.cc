// Temp-file + fsync + rename writes, so that a crash never leaves a half-written file under the final name.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace veomni {

namespace {

std::string errno_text() { return std::strerror(errno); }

// The rename is only durable once the directory entry itself reaches the disk.
void fsync_parent_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open directory '{}' to sync it: {}", dir, errno_text()));
  const int rc = ::fsync(fd);
  const int saved_errno = errno;
  ::close(fd);
  // Some file systems (and /proc-like mounts) cannot sync directories; the data itself is already synced.
  if (rc != 0 && saved_errno != EINVAL && saved_errno != EROFS)
    throw Error(fmt::format("cannot sync directory '{}': {}", dir, std::strerror(saved_errno)));
}

}  // namespace

std::string atomic_temp_path(const std::string& path) { return fmt::format("{}.tmp-{}", path, ::getpid()); }

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), temp_path_(atomic_temp_path(path_)) {
  VEOMNI_INPUT_CHECK(!path_.empty(), "cannot write a file with an empty path");
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InputError(fmt::format("cannot create '{}' (writing '{}'): {}", temp_path_, path_, errno_text()));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  VEOMNI_CHECK(!committed_ && fd_ >= 0, "write to '{}' after commit", path_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("cannot write '{}': {}", temp_path_, errno_text()));
    p += n;
    bytes -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFileWriter::commit() {
  VEOMNI_CHECK(!committed_ && fd_ >= 0, "'{}' committed twice", path_);
  if (::fsync(fd_) != 0) throw Error(fmt::format("cannot sync '{}': {}", temp_path_, errno_text()));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw Error(fmt::format("cannot close '{}': {}", temp_path_, errno_text()));
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", temp_path_, path_, errno_text()));
  committed_ = true;
  fsync_parent_directory(path_);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFileWriter writer(path);
  writer.write(bytes);
  writer.commit();
}

}  // namespace veomni
