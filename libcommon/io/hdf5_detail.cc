// HDF5 lock, error-stack capture, write-failure handling and dtype mapping shared by the io/hdf5_* wrappers.
#include "io/hdf5_detail.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace veomni::h5::detail {

namespace {

struct StackWalk {
  std::vector<std::string> lines;
};

bool contains_ignoring_case(const std::string& text, const std::string& part) {
  const auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(text).find(lower(part)) != std::string::npos;
}

herr_t collect_entry(unsigned /*position*/, const H5E_error2_t* entry, void* client) {
  auto* walk = static_cast<StackWalk*>(client);
  std::string line = entry->desc ? entry->desc : "";
  char minor[256] = {0};
  if (H5Eget_msg(entry->min_num, nullptr, minor, sizeof minor) > 0 && !contains_ignoring_case(line, minor))
    line += line.empty() ? minor : std::string(" (") + minor + ")";
  if (!line.empty() && (walk->lines.empty() || walk->lines.back() != line)) walk->lines.push_back(line);
  return 0;
}

// A failed system call deep in HDF5 shows as "file write failed: time = ..., errno = 28, error message = '...'":
// the operating system's reason, when one is there, says it better than the rest of that line.
int system_errno_of(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) {
    const size_t at = line.find("errno = ");
    if (at == std::string::npos) continue;
    const int code = std::atoi(line.c_str() + at + 8);
    if (code > 0) return code;
  }
  return 0;
}

}  // namespace

// The outermost entry says what the API call failed to do, the innermost why; the middle is HDF5 internals.
std::string describe_error_stack(int* system_errno) {
  StackWalk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_entry, &walk);
  H5Eclear2(H5E_DEFAULT);
  const int code = system_errno_of(walk.lines);
  if (system_errno) *system_errno = code;
  if (walk.lines.empty()) return "HDF5 reported no detail";
  if (code > 0) return fmt::format("{}: {} (errno {})", walk.lines.front(), std::strerror(code), code);
  if (walk.lines.size() == 1) return walk.lines.front();
  return walk.lines.front() + ": " + walk.lines.back();
}

std::unique_lock<std::recursive_mutex> lock() {
  // Before HDF5's first call: no exit handler. Every file we open is closed by its owner before exit, so
  // H5_term_library would find only identifiers whose close failed, which HDF5 1.10 leaves pointing at freed
  // memory (a write to a full disk, when its writes could not be discarded: the limit of ulimit -f applies to the
  // memory file too); it crashed on them (SIGSEGV at exit).
  static const bool no_exit_handler = H5dont_atexit() >= 0;
  static_cast<void>(no_exit_handler);
  static std::recursive_mutex mutex;
  thread_local bool quiet = false;
  std::unique_lock<std::recursive_mutex> guard(mutex);
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
  return guard;
}

bool is_storage_failure(int system_errno) {
  return system_errno == ENOSPC || system_errno == EDQUOT || system_errno == EFBIG || system_errno == EIO;
}

void throw_error(const std::string& where, const std::string& what) {
  throw InputError(fmt::format("{}: {}: {}", where, what, describe_error_stack()));
}

void throw_write_error(hid_t id, const std::string& where, const std::string& what) {
  const std::string reason = describe_error_stack();
  discard_file_writes(id);
  throw Error(fmt::format("{}: {}: {}", where, what, reason));
}

void discard_file_writes(hid_t id) {
  const hid_t file = H5Iget_file_id(id);  // a new reference to the file, closed below
  if (file < 0) {
    H5Eclear2(H5E_DEFAULT);
    return;
  }
  const hid_t access = H5Fget_access_plist(file);
  void* handle = nullptr;
  if (access >= 0 && H5Pget_driver(access) == H5FD_SEC2 && H5Fget_vfd_handle(file, access, &handle) >= 0 && handle) {
    const int memory_file = ::memfd_create("veomni-discarded-hdf5", MFD_CLOEXEC);
    if (memory_file >= 0) {
      ::dup2(memory_file, *static_cast<int*>(handle));
      ::close(memory_file);
    }
  }
  if (access >= 0) H5Pclose(access);
  H5Fclose(file);
  H5Eclear2(H5E_DEFAULT);
}

hid_t memory_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return H5T_NATIVE_FLOAT;
    case DType::BF16:
    case DType::F16: return H5T_NATIVE_UINT16;
    case DType::I32: return H5T_NATIVE_INT32;
    case DType::I64: return H5T_NATIVE_INT64;
    case DType::U8:
    case DType::Bool: return H5T_NATIVE_UINT8;
  }
  VEOMNI_CHECK(false, "unknown dtype {}", static_cast<int>(dtype));
}

hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return H5T_IEEE_F32LE;
    case DType::BF16:
    case DType::F16: return H5T_STD_U16LE;
    case DType::I32: return H5T_STD_I32LE;
    case DType::I64: return H5T_STD_I64LE;
    case DType::U8:
    case DType::Bool: return H5T_STD_U8LE;
  }
  VEOMNI_CHECK(false, "unknown dtype {}", static_cast<int>(dtype));
}

Object own(hid_t id, const std::string& where, const std::string& what) {
  if (id < 0) detail::throw_error(where, what);
  return Object(id, where);
}

}  // namespace veomni::h5::detail
