// The common frame of every veomni-* executable: runs its body, maps exceptions to exit codes, aborts MPI peers.
#pragma once
#include <functional>
#include <string>

namespace veomni {

// Runs body() and returns the process exit code: the body's own, or 2 for InputError, 1 for other errors.
// The error is printed on stderr as "<tool>: error: <message>". When MPI is initialised with more than one
// rank, an error on any rank calls MPI_Abort so that no peer hangs in a collective.
int run_tool(const std::string& tool, const std::function<int()>& body);

// "veomni-x 0.1.0" plus the build's optional backends, for --version.
std::string version_text(const std::string& tool);

}  // namespace veomni
