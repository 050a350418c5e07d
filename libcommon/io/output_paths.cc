// Output-path checks shared by the tools that write files from input files.
#include "io/output_paths.h"

#include <sys/stat.h>

#include <filesystem>

#include "core/error.h"

namespace veomni {

namespace {

bool same_file(const std::string& a, const std::string& b) {
  if (std::filesystem::path(a).lexically_normal() == std::filesystem::path(b).lexically_normal()) return true;
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

}  // namespace

void check_outputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs, bool overwrite,
                   const std::string& out_flag) {
  for (const std::string& out : outputs) {
    for (const std::string& in : inputs)
      VEOMNI_INPUT_CHECK(in == "-" || !same_file(out, in), "{} '{}' is the input '{}': writing it would destroy it",
                         out_flag, out, in);
    std::error_code ec;
    VEOMNI_INPUT_CHECK(overwrite || !std::filesystem::exists(std::filesystem::symlink_status(out, ec)),
                       "{} '{}' exists (hint: --overwrite replaces it)", out_flag, out);
  }
}

}  // namespace veomni
