// Up-front checks of the output directory and its advisory lock file (flock, with the holder's host and pid).
#include "train/output_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

constexpr const char* kKey = "train.checkpoint.output_dir";
// Room left under output_dir for the longest name a run writes there
// (checkpoints/global_step_<19 digits>.tmp-<pid>/rank-00000-of-00000.h5.tmp-<pid>).
constexpr size_t kRoomForRunFiles = 128;

void check_path_length(const fs::path& dir) {
  for (const fs::path& part : dir) {
    const std::string name = part.string();
    VEOMNI_INPUT_CHECK(name.size() <= NAME_MAX,
                       "{} '{}...': its component '{}...' has {} characters, more than a file name may have ({})",
                       kKey, dir.string().substr(0, 60), name.substr(0, 40), name.size(), NAME_MAX);
  }
  const size_t length = fs::absolute(dir).string().size();
  VEOMNI_INPUT_CHECK(length + kRoomForRunFiles < PATH_MAX,
                     "{} '{}...' is {} characters long: with the run's files under it the paths pass the limit of "
                     "{} (hint: a shorter output_dir)",
                     kKey, dir.string().substr(0, 60), length, PATH_MAX);
}

// The nearest existing ancestor must be a directory (mkdir would fail with a bare "Not a directory").
void check_not_under_a_file(const fs::path& dir) {
  std::error_code ec;
  VEOMNI_INPUT_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec),
                     "{} '{}' exists and is not a directory (hint: remove it or choose another output_dir)", kKey,
                     dir.string());
  for (fs::path parent = fs::absolute(dir).parent_path(); !parent.empty(); parent = parent.parent_path()) {
    if (fs::exists(parent, ec)) {
      VEOMNI_INPUT_CHECK(fs::is_directory(parent, ec), "{} '{}' lies under '{}', which is a file, not a directory",
                         kKey, dir.string(), parent.string());
      return;
    }
    if (parent == parent.root_path()) return;
  }
}

std::string lock_host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

// "host H pid P" written by the holder; shown as is (trimmed) to the run that finds the directory taken.
std::string read_holder(int fd) {
  char text[512] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string holder = n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  for (char& c : holder)
    if (c == '\n') c = ',';
  return holder.empty() ? std::string("a process that has not yet written its host and pid") : holder;
}

void write_holder(int fd, const std::string& path) {
  const std::string text = "host " + lock_host_name() + "\npid " + std::to_string(::getpid()) + "\n";
  const bool ok = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, text.data(), text.size(), 0) ==
                                                 static_cast<ssize_t>(text.size());
  if (!ok) throw Error(fmt::format("{}: cannot record this run's host and pid: {}", path, std::strerror(errno)));
}

}  // namespace

OutputDirLock::OutputDirLock(const std::string& output_dir) {
  VEOMNI_INPUT_CHECK(!output_dir.empty(), "{} is empty", kKey);
  const fs::path dir(output_dir);
  check_path_length(dir);
  check_not_under_a_file(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  VEOMNI_INPUT_CHECK(!ec, "{} '{}' cannot be created: {}", kKey, output_dir, ec.message());
  path_ = (dir / kOutputDirLockFile).string();
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  VEOMNI_INPUT_CHECK(fd_ >= 0, "{} '{}' is not writable: cannot create {}: {}", kKey, output_dir, path_,
                     std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    VEOMNI_INPUT_CHECK(error != EWOULDBLOCK,
                       "{} '{}' is in use by another run ({}; lock file {}): one run per output_dir (hint: wait for "
                       "it to end, or choose another output_dir)",
                       kKey, output_dir, holder, path_);
    throw InputError(fmt::format("{} '{}': cannot lock {}: {}", kKey, output_dir, path_, std::strerror(error)));
  }
  write_holder(fd_, path_);
}

OutputDirLock::~OutputDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock; the file stays (removing it would race a new holder)
}

}  // namespace veomni
