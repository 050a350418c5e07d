// SIGTERM / SIGINT as a request to stop at the next step boundary (with a checkpoint), as clusters preempt jobs.
#pragma once

namespace veomni {

// Installs handlers for SIGTERM and SIGINT that only record the signal; a second one restores the default action
// and re-raises it, so a repeated Ctrl-C still ends the process at once. Until installed, both keep their default.
void install_stop_signal_handlers();
// The signal received since installation (SIGTERM or SIGINT), 0 when none.
int stop_signal_received();
// "SIGTERM", "SIGINT", ...
const char* stop_signal_name(int signal);

}  // namespace veomni
