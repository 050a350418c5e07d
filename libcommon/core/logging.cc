// Default spdlog logger: "[time] [tool] [rank r] message" on stderr.
#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace veomni {

void init_logging(const LogOptions& options) {
  auto logger = spdlog::stderr_color_mt(options.tool.empty() ? "veomni" : options.tool);
  std::string pattern = "[%H:%M:%S] ";
  if (options.world_size > 1) pattern += fmt::format("[rank {}] ", options.rank);
  pattern += "%^%v%$";
  logger->set_pattern(pattern);
  const auto level = spdlog::level::from_str(options.level);
  VEOMNI_INPUT_CHECK(level != spdlog::level::off || options.level == "off",
                     "unknown log level '{}' (trace, debug, info, warn, error, off)", options.level);
  logger->set_level(options.rank == 0 || options.all_ranks ? level : std::max(level, spdlog::level::warn));
  spdlog::set_default_logger(logger);
}

}  // namespace veomni
