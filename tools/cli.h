// Command-line frame shared by the tools (a header beside the tool folders): --version from the build, and CLI11's outcomes mapped to our exit codes.
#pragma once
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "core/error.h"
#include "core/tool.h"

namespace veomni {

// Adds --version (printing version_text(tool)) to app.
inline void add_version_flag(CLI::App& app, const std::string& tool) {
  app.set_version_flag("--version", version_text(tool));
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
