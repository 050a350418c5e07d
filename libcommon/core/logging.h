// spdlog setup shared by every tool: rank-aware prefixes, only rank 0 prints unless asked.
#pragma once
#include <spdlog/spdlog.h>

#include <string>

namespace veomni {

struct LogOptions {
  std::string tool;            // e.g. "veomni-train"
  int rank = 0;
  int world_size = 1;
  bool all_ranks = false;      // --log-all-ranks
  std::string level = "info";  // trace, debug, info, warn, error, off
};

// Installs the default logger (stderr). Non-zero ranks log only warnings and errors unless all_ranks.
void init_logging(const LogOptions& options);

}  // namespace veomni
