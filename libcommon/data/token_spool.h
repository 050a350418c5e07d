// An append-only file of fixed-size records (token ids, target flags) that is read back by position: what keeps
// veomni-preprocess's memory bounded whatever the input's size. The file is unlinked as soon as it is created, so
// nothing is left behind when the process ends, however it ends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace veomni {

class TokenSpool {
 public:
  // Creates an anonymous file in `directory` ("" or "." for the working directory).
  explicit TokenSpool(const std::string& directory);
  ~TokenSpool();
  TokenSpool(const TokenSpool&) = delete;
  TokenSpool& operator=(const TokenSpool&) = delete;

  void append(const void* data, size_t bytes);
  // Reads `bytes` at byte `offset` (all of them must have been appended).
  void read(uint64_t offset, void* data, size_t bytes) const;
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  std::string where_;  // for messages
  uint64_t size_ = 0;
};

}  // namespace veomni
