// Private to io/hdf5_*.cc: the HDF5 C headers, the library lock, error-stack capture and dtype mapping.
#pragma once
#include <cstdint>
#include <hdf5.h>

#include <mutex>
#include <string>

#include "core/dtype.h"

namespace veomni::h5::detail {

static_assert(sizeof(hid_t) == sizeof(int64_t), "io/hdf5_object.h stores hid_t as int64_t (HDF5 >= 1.10)");

// HDF5 may be built without thread safety: every call of ours goes through this one lock. Taking it also
// switches off HDF5's automatic error printing for the calling thread (the setting is per thread).
std::unique_lock<std::recursive_mutex> lock();

// Throws InputError "<where>: <what>: <HDF5's own explanation>" and clears HDF5's error stack.
[[noreturn]] void throw_error(const std::string& where, const std::string& what);

// Element types in memory (native) and in files (little-endian): bf16/f16 travel as u16, bool as u8.
hid_t memory_type(DType dtype);
hid_t file_type(DType dtype);

}  // namespace veomni::h5::detail
