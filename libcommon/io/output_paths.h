// Checks before a tool writes its output files: never over one of its own inputs, and an existing file only when
// the user asked for it (--overwrite).
#pragma once
#include <string>
#include <vector>

namespace veomni {

// InputError when an output is one of the inputs (the same path, or the same file by device and inode: a link or
// another spelling), or exists while overwrite is false (hint: --overwrite). "-" (stdin) is not a file and is
// passed over. `out_flag` names the option in messages, e.g. "--out".
void check_outputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs, bool overwrite,
                   const std::string& out_flag);

}  // namespace veomni
