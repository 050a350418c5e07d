// Command-line frame shared by the tools (a header beside the tool folders): --version from the build, and CLI11's outcomes mapped to our exit codes.
#pragma once
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/tool.h"

namespace veomni {

// Adds --version (printing version_text(tool)) to app.
inline void add_version_flag(CLI::App& app, const std::string& tool) {
  app.set_version_flag("--version", version_text(tool));
}

// An integer option within [min, max], with messages that read "--seq-len: must be at least 1, got 0" (CLI11's
// own range check prints the bounds as doubles of 300 digits).
inline CLI::Validator integer_range(int64_t min, int64_t max) {
  const std::string description =
      max == INT64_MAX ? fmt::format("INT >= {}", min) : fmt::format("INT in [{}, {}]", min, max);
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return fmt::format("{} is too large (at most {})", text, max);
        if (ec != std::errc() || stop != end) return fmt::format("expected an integer, got '{}'", text);
        if (value < min) return fmt::format("must be at least {}, got {}", min, value);
        if (value > max) return fmt::format("must be at most {}, got {}", max, value);
        return {};
      },
      description);
}

// Parses the command line. Returns nothing when the tool should go on, else the exit code: 0 after --help or
// --version, 2 for a usage error (CLI11 prints the message).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }
  return std::nullopt;
}

}  // namespace veomni
