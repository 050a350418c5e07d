// Formats internal check failures with their source location.
#include "core/error.h"

namespace veomni::detail {

void throw_check_failure(const char* file, int line, const char* condition, const std::string& message) {
  throw Error(fmt::format("{}:{}: check failed: {}{}{}", file, line, condition, message.empty() ? "" : ": ", message));
}

}  // namespace veomni::detail
