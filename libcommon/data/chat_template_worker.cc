// Starting, feeding and stopping the chat-template worker: fork/exec with three pipes, poll-driven reads and writes
// so neither side can block the other, and a clear error when the process is missing or dies.
#include "data/chat_template_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "core/error.h"

#ifndef VEOMNI_CHAT_TEMPLATE_WORKER_DEFAULT
#define VEOMNI_CHAT_TEMPLATE_WORKER_DEFAULT ""
#endif
#ifndef VEOMNI_NODE_MODULES_DEFAULT
#define VEOMNI_NODE_MODULES_DEFAULT ""
#endif

namespace veomni {

namespace {

namespace fs = std::filesystem;

constexpr const char* kHint =
    "veomni-preprocess --chat-template model needs Debian's nodejs and @huggingface/jinja (scripts/setup.sh "
    "installs it into .cache/node_modules); VEOMNI_NODE, VEOMNI_CHAT_TEMPLATE_WORKER and VEOMNI_NODE_MODULES "
    "point elsewhere";
constexpr size_t kStderrTail = 4000;

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

// <bin>/../share/veomni/<name> when it exists (an installed tree, or the build tree's copy), else `fallback`.
std::string beside_executable(const std::string& name, const std::string& fallback) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path candidate = exe.parent_path().parent_path() / "share" / "veomni" / name;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return fallback;
}

void make_pipe(int fds[2]) {
  VEOMNI_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "pipe2: {}", std::strerror(errno));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string exit_description(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "stopped";
}

}  // namespace

ChatTemplateWorkerPaths default_chat_template_worker_paths() {
  ChatTemplateWorkerPaths paths;
  paths.node = env_or("VEOMNI_NODE", "node");
  paths.script = env_or("VEOMNI_CHAT_TEMPLATE_WORKER",
                        beside_executable("chat_template_worker.mjs", VEOMNI_CHAT_TEMPLATE_WORKER_DEFAULT));
  paths.node_modules = env_or("VEOMNI_NODE_MODULES", beside_executable("node_modules", VEOMNI_NODE_MODULES_DEFAULT));
  return paths;
}

ChatTemplateWorker::ChatTemplateWorker(const ChatTemplateWorkerPaths& paths, const std::string& template_text,
                                       const nlohmann::ordered_json& globals) {
  VEOMNI_INPUT_CHECK(!paths.script.empty() && fs::exists(paths.script),
                     "the chat template worker script '{}' does not exist ({})", paths.script, kHint);
  int in[2], out[2], err[2], exec_status[2];
  make_pipe(in);
  make_pipe(out);
  make_pipe(err);
  make_pipe(exec_status);
  const std::vector<std::string> args = {paths.node, paths.script, paths.node_modules};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_ = ::fork();
  VEOMNI_CHECK(pid_ >= 0, "fork: {}", std::strerror(errno));
  if (pid_ == 0) {
    // The child: only async-signal-safe calls until exec.
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    const int code = errno;
    [[maybe_unused]] const ssize_t n = ::write(exec_status[1], &code, sizeof code);
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(exec_status[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  errors_from_child_ = err[0];
  int exec_errno = 0;
  const ssize_t got = ::read(exec_status[0], &exec_errno, sizeof exec_errno);
  ::close(exec_status[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    stop();
    throw InputError(fmt::format("cannot run '{}' for the chat template: {} ({})", paths.node,
                                 std::strerror(exec_errno), kHint));
  }
  ::fcntl(to_child_, F_SETFL, ::fcntl(to_child_, F_GETFL) | O_NONBLOCK);

  nlohmann::ordered_json init = {{"template", template_text}, {"globals", globals}};
  const nlohmann::ordered_json reply = exchange(init, "the chat template");
  if (reply.contains("fatal")) {
    const std::string message = reply["fatal"].get<std::string>();
    stop();
    throw InputError(fmt::format("the chat template cannot be used: {} ({})", message, kHint));
  }
  generation_blocks_ = reply.value("generation", false);
}

ChatTemplateWorker::~ChatTemplateWorker() { stop(); }

void ChatTemplateWorker::stop() {
  close_fd(to_child_);  // end of input: the worker leaves its read loop and exits
  close_fd(from_child_);
  close_fd(errors_from_child_);
  if (pid_ <= 0) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
}

void ChatTemplateWorker::fail(const std::string& what, const std::string& reason) {
  close_fd(to_child_);
  // What the worker said on its way out (node prints a template's exception or its own crash there).
  while (errors_from_child_ >= 0) {
    pollfd fd{errors_from_child_, POLLIN, 0};
    char buffer[4096];
    const ssize_t n = ::poll(&fd, 1, 1000) > 0 ? ::read(errors_from_child_, buffer, sizeof buffer) : 0;
    if (n <= 0) break;
    stderr_tail_.append(buffer, static_cast<size_t>(n));
  }
  if (stderr_tail_.size() > kStderrTail) stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
  std::string ended = reason;
  if (pid_ > 0) {
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    pid_t done = 0;
    while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (done == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      if (ended.empty()) ended = "stopped answering";
    } else if (ended.empty()) {
      ended = exit_description(status);
    }
    pid_ = -1;
  }
  stop();
  throw InputError(fmt::format("the chat template worker {} while rendering {}{}{} ({})", ended, what,
                               stderr_tail_.empty() ? "" : ": ", stderr_tail_, kHint));
}

void ChatTemplateWorker::write_all(const std::string& bytes, const std::string& what) {
  // A worker that died leaves a pipe without reader: block SIGPIPE here and take EPIPE instead.
  sigset_t pipe_signal, previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  size_t done = 0;
  bool broken = false;
  while (done < bytes.size() && !broken) {
    pollfd fds[2] = {{to_child_, POLLOUT, 0}, {errors_from_child_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      broken = true;
      break;
    }
    if (errors_from_child_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
      char buffer[4096];
      const ssize_t n = ::read(errors_from_child_, buffer, sizeof buffer);
      if (n > 0) stderr_tail_.append(buffer, static_cast<size_t>(n));
      if (n == 0) close_fd(errors_from_child_);
      if (stderr_tail_.size() > kStderrTail) stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
    }
    if (fds[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
      const ssize_t n = ::write(to_child_, bytes.data() + done, bytes.size() - done);
      if (n > 0)
        done += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        broken = true;
    }
  }
  timespec zero{0, 0};
  while (sigtimedwait(&pipe_signal, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (broken) fail(what, "");
}

std::string ChatTemplateWorker::read_line(const std::string& what) {
  for (;;) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return line;
    }
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {errors_from_child_, POLLIN, 0}};
    if (::poll(fds, errors_from_child_ >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      fail(what, fmt::format("could not be polled ({})", std::strerror(errno)));
    }
    char buffer[65536];
    if (errors_from_child_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
      const ssize_t n = ::read(errors_from_child_, buffer, sizeof buffer);
      if (n > 0) {
        stderr_tail_.append(buffer, static_cast<size_t>(n));
        if (stderr_tail_.size() > kStderrTail) stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
      } else if (n == 0) {
        close_fd(errors_from_child_);
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(from_child_, buffer, sizeof buffer);
      if (n > 0)
        pending_.append(buffer, static_cast<size_t>(n));
      else if (n == 0)
        fail(what, "");
    }
  }
}

nlohmann::ordered_json ChatTemplateWorker::exchange(const nlohmann::ordered_json& request, const std::string& what) {
  VEOMNI_CHECK(pid_ > 0, "the chat template worker is not running");
  // Invalid UTF-8 cannot reach here (records are checked), so dump() does not throw.
  write_all(request.dump() + "\n", what);
  const std::string line = read_line(what);
  nlohmann::ordered_json reply = nlohmann::ordered_json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object())
    fail(what, fmt::format("answered something that is not a JSON object ('{}')", line.substr(0, 200)));
  return reply;
}

}  // namespace veomni
