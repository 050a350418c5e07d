// Shared helpers of the fuzz targets: quiet logging, fuzzer bytes as a file, and the one error a reader may throw.
#pragma once
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace veomni::fuzz {

// Bad input must end as an InputError; any other exception escapes to the fuzzer and counts as a finding.
template <class Body>
void expect_input_errors_only(Body&& body) {
  try {
    body();
  } catch (const InputError&) {
  }
}

// The fuzzer's bytes as text (readers of text formats take string_view).
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A per-process scratch directory (parallel fuzzing jobs must not share files); logging off so that readers'
// warnings do not flood the fuzzer's output.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    spdlog::set_level(spdlog::level::off);
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp ? tmp : "/tmp") / ("veomni-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes the bytes to `name` under the scratch directory and returns its path (readers of binary formats open files).
inline std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace veomni::fuzz
