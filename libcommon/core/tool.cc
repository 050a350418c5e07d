// Exception-to-exit-code mapping shared by the tools, with MPI-wide abort on error.
#include "core/tool.h"

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "core/error.h"
#include "veomni/version.h"

namespace veomni {

namespace {

// The running tool's name, for abort_run's message ("veomni" outside run_tool, e.g. in tests).
std::string& tool_name() {
  static std::string name = "veomni";
  return name;
}

[[noreturn]] void abort_peers_if_needed(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int size = 1;
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized && !finalized && size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  if (initialized && !finalized) MPI_Finalize();
  std::exit(code);
}

int world_rank() {
  int initialized = 0, finalized = 0, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void report(const std::string& tool, const char* what) {
  int initialized = 0, size = 1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1)
    std::fprintf(stderr, "%s: error (rank %d): %s\n", tool.c_str(), world_rank(), what);
  else
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), what);
}

}  // namespace

int run_tool(const std::string& tool, const std::function<int()>& body) {
  tool_name() = tool;
  try {
    return body();
  } catch (const Error& e) {
    report(tool, e.what());
    abort_peers_if_needed(e.exit_code());
  } catch (const std::exception& e) {
    report(tool, e.what());
    abort_peers_if_needed(kExitCheckFailed);
  }
}

void abort_run(const std::string& message, int code) {
  report(tool_name(), message.c_str());
  abort_peers_if_needed(code);
}

void abort_process(const std::string& message, int code) {
  report(tool_name(), message.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

std::string version_text(const std::string& tool) {
#ifdef VEOMNI_WITH_CUDA
  const char* backends = "cpu, cuda";
#else
  const char* backends = "cpu";
#endif
  return fmt::format("{} {} (backends: {})", tool, kVersion, backends);
}

}  // namespace veomni
