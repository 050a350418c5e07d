// HDF5 lock, error-stack capture and dtype mapping shared by the io/hdf5_* wrappers.
#include "io/hdf5_detail.h"

#include <cctype>
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

// The outermost entry says what the API call failed to do, the innermost why; the middle is HDF5 internals.
std::string describe_error_stack() {
  StackWalk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_entry, &walk);
  H5Eclear2(H5E_DEFAULT);
  if (walk.lines.empty()) return "HDF5 reported no detail";
  if (walk.lines.size() == 1) return walk.lines.front();
  return walk.lines.front() + ": " + walk.lines.back();
}

}  // namespace

std::unique_lock<std::recursive_mutex> lock() {
  static std::recursive_mutex mutex;
  thread_local bool quiet = false;
  std::unique_lock<std::recursive_mutex> guard(mutex);
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
  return guard;
}

void throw_error(const std::string& where, const std::string& what) {
  throw InputError(fmt::format("{}: {}: {}", where, what, describe_error_stack()));
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

}  // namespace veomni::h5::detail
