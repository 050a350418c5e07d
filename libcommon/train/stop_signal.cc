// Async-signal-safe recording of SIGTERM / SIGINT: the handler only stores the signal number.
#include "train/stop_signal.h"

#include <csignal>

namespace veomni {

namespace {

volatile std::sig_atomic_t g_received = 0;

extern "C" void record_stop_signal(int signal) {
  if (g_received != 0) {  // the second request: no more waiting for the step to end
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_received = signal;
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls (MPI waits, file I/O) continue instead of failing with EINTR
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stop_signal_received() { return g_received; }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace veomni
