// Private to io/hdf5_*.cc: the HDF5 C headers, the library lock, error-stack capture and dtype mapping.
#pragma once
#include <cstdint>
#include <hdf5.h>

#include <mutex>
#include <string>

#include "core/dtype.h"
#include "io/hdf5_object.h"

namespace veomni::h5::detail {

static_assert(sizeof(hid_t) == sizeof(int64_t), "io/hdf5_object.h stores hid_t as int64_t (HDF5 >= 1.10)");

// HDF5 may be built without thread safety: every call of ours goes through this one lock. Taking it also
// switches off HDF5's automatic error printing for the calling thread (the setting is per thread), and the first
// time HDF5's exit handler (see the .cc file).
std::unique_lock<std::recursive_mutex> lock();

// Throws InputError "<where>: <what>: <HDF5's own explanation>" and clears HDF5's error stack (reading: the file
// is bad input).
[[noreturn]] void throw_error(const std::string& where, const std::string& what);
// Takes ownership of identifier `id` returned by an HDF5 call, or throws as throw_error when the call failed (id < 0).
Object own(hid_t id, const std::string& where, const std::string& what);
// HDF5's explanation of the failure on its error stack ("... : No space left on device"), clearing the stack;
// `system_errno` receives the failed system call's errno when the stack names one (else 0).
std::string describe_error_stack(int* system_errno = nullptr);
// Whether errno says the system could not store the data (disk full, quota, file size limit, I/O error): a failure of
// the environment (exit 1), not of the user's input.
bool is_storage_failure(int system_errno);

// A failed write to the file holding `id` (object, or the file itself): the file cannot be completed, so its further
// writes are discarded (discard_file_writes) and Error (exit 1, an I/O failure, like a failed write(2)) is thrown
// with HDF5's explanation.
[[noreturn]] void throw_write_error(hid_t id, const std::string& where, const std::string& what);
// Points the descriptor of the file holding `id` at an anonymous memory file: later flushes and the close then
// succeed without touching the disk. Needed because HDF5 1.10 frees a file whose close failed (a flush hit a full
// disk) but keeps its identifier registered, and its exit handler (H5_term_library) then crashes on it. The file
// on disk is left incomplete; writers remove their temporary file. Only for the default (sec2) file driver.
void discard_file_writes(hid_t id);

// The longest string attribute read (ours are names and versions): a longer one is a damaged file.
constexpr uint64_t kMaxStringAttributeBytes = 64 * 1024;

// Element types in memory (native) and in files (little-endian): bf16/f16 travel as u16, bool as u8.
hid_t memory_type(DType dtype);
hid_t file_type(DType dtype);

}  // namespace veomni::h5::detail
