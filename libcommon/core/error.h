// Errors with context (file, line, key, rank) and the exit codes tools return for them.
#pragma once
#include <spdlog/fmt/fmt.h>

#include <stdexcept>
#include <string>

namespace veomni {

// Exit codes every tool shares (samtools-style: scripts can trust them).
enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,  // a check or a run failed (misaligned metrics, NaN loss, ...)
  kExitBadInput = 2,     // bad usage, bad config, bad or missing input file
};

// Base of every error we throw; carries the exit code the tool should return.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitCheckFailed)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// The user's input is wrong (file, config key, flag): exit 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what, kExitBadInput) {}
};

namespace detail {
[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace veomni

// Internal invariant: names the source file and line (llm.c style). Throws veomni::Error.
#define VEOMNI_CHECK(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::veomni::detail::throw_check_failure(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

// Bad user input: throws veomni::InputError with the formatted message (callers name file/key/line).
#define VEOMNI_INPUT_CHECK(cond, ...)                                  \
  do {                                                                 \
    if (!(cond)) [[unlikely]]                                          \
      throw ::veomni::InputError(::fmt::format(__VA_ARGS__));          \
  } while (0)
