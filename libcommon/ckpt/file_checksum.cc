// File checksums: 1 MiB reads, eight bytes per step.
#include "ckpt/file_checksum.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace veomni {

namespace {

constexpr uint64_t kPrime = 0x100000001b3ull;
constexpr uint64_t kOffset = 0xcbf29ce484222325ull;
constexpr const char* kChecksumPrefix = "fnv1a64w:";

// Fills `size` bytes unless the file ends first (a short read mid-file would shift the words otherwise).
size_t read_block(int fd, unsigned char* data, size_t size, const std::string& path) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace

uint64_t file_checksum(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open to check it: {}", path, std::strerror(errno)));
  std::vector<unsigned char> buffer(size_t{1} << 20);
  uint64_t hash = kOffset, length = 0;
  try {
    for (;;) {
      const size_t bytes = read_block(fd, buffer.data(), buffer.size(), path);
      if (bytes == 0) break;
      std::memset(buffer.data() + bytes, 0, (8 - bytes % 8) % 8);  // only the last block can be partial
      for (size_t i = 0; i < bytes; i += 8) {
        uint64_t word;
        std::memcpy(&word, buffer.data() + i, sizeof word);
        hash = (hash ^ word) * kPrime;
      }
      length += bytes;
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return (hash ^ length) * kPrime;
}

std::string format_checksum(uint64_t checksum) { return fmt::format("{}{:016x}", kChecksumPrefix, checksum); }

std::optional<uint64_t> parse_checksum(const std::string& text) {
  const std::string_view prefix = kChecksumPrefix;
  if (text.size() != prefix.size() + 16 || text.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  uint64_t value = 0;
  for (char c : text.substr(prefix.size())) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return value;
}

}  // namespace veomni
