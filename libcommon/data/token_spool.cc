// TokenSpool over POSIX file descriptors: open, unlink, write and pread with retries on partial transfers.
#include "data/token_spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace veomni {

TokenSpool::TokenSpool(const std::string& directory) {
  const std::filesystem::path dir = directory.empty() ? std::filesystem::path(".") : std::filesystem::path(directory);
  for (int attempt = 0; fd_ < 0; ++attempt) {
    where_ = (dir / fmt::format(".veomni-spool-{}-{}", ::getpid(), attempt)).string();
    fd_ = ::open(where_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0 && (errno != EEXIST || attempt > 100))
      throw InputError(fmt::format("cannot create the temporary file {}: {} (the tokenized samples wait there until "
                                   "the dataset is written; hint: make the output's directory writable)",
                                   where_, std::strerror(errno)));
  }
  ::unlink(where_.c_str());  // anonymous from now on: the space is freed when the descriptor closes
}

TokenSpool::~TokenSpool() {
  if (fd_ >= 0) ::close(fd_);
}

void TokenSpool::append(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(size_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(fmt::format("cannot write the temporary file {} at byte {}: {} (hint: free disk space beside the "
                              "output; it needs about 5 bytes per token)",
                              where_, size_, n < 0 ? std::strerror(errno) : "no progress"));
    p += n;
    bytes -= static_cast<size_t>(n);
    size_ += static_cast<uint64_t>(n);
  }
}

void TokenSpool::read(uint64_t offset, void* data, size_t bytes) const {
  VEOMNI_CHECK(offset + bytes <= size_, "spool read of {} bytes at {} past its end {}", bytes, offset, size_);
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(fmt::format("cannot read the temporary file {} at byte {}: {}", where_, offset,
                              n < 0 ? std::strerror(errno) : "unexpected end"));
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace veomni
