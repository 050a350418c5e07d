// The common frame of every veomni-* executable: runs its body, maps exceptions to exit codes, aborts MPI peers.
#pragma once
#include <functional>
#include <string>

namespace veomni {

// Runs body() and returns the process exit code: the body's own, or 2 for InputError, 1 for other errors.
// The error is printed on stderr as "<tool>: error: <message>". When MPI is initialised with more than one
// rank, an error on any rank calls MPI_Abort so that no peer hangs in a collective.
int run_tool(const std::string& tool, const std::function<int()>& body);

// Prints the error as run_tool does and ends the process (and every MPI peer) with `code` at once, without unwinding:
// for failures found where unwinding could wait on a peer that no longer answers (a collective that timed out).
[[noreturn]] void abort_run(const std::string& message, int code);
// The same from a thread that may not call MPI (MPI_THREAD_FUNNELED): prints the error and ends this process at
// once (_Exit); under mpirun the launcher then ends the other ranks.
[[noreturn]] void abort_process(const std::string& message, int code);

// "veomni-x 0.1.0" plus the build's optional backends, for --version.
std::string version_text(const std::string& tool);

}  // namespace veomni
