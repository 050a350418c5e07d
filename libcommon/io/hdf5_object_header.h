// Private to io/hdf5_*.cc: HDF5 object headers read from the file's own bytes, every size checked, for what HDF5 1.10
// itself decodes unsafely from damaged files.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace veomni::h5::detail {

// Message types and padding of the HDF5 file format specification.
inline constexpr unsigned kAttributeMessage = 0x000C;
inline constexpr unsigned kSharedMessageFlag = 0x02;
inline uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// Little-endian unsigned integer of `width` bytes at `at` (callers have checked the bounds).
uint64_t decode_le(const uint8_t* at, size_t width);

// The bytes of the file holding an HDF5 object, with the superblock's field widths: every read is checked against
// the file size and throws InputError naming `where`.
class RawFile {
 public:
  RawFile(hid_t object, const std::string& where);
  // The file at `path` before HDF5 opens it, with the superblock's widths and base address.
  RawFile(const std::string& path, size_t address_bytes, size_t length_bytes, uint64_t base);

  size_t address_bytes() const { return address_bytes_; }
  size_t length_bytes() const { return length_bytes_; }
  const std::string& where() const { return where_; }
  // `length` bytes at HDF5 address `address` (relative to the superblock's base address); `what` names them in errors.
  std::vector<uint8_t> read(uint64_t address, uint64_t length, const char* what);

 private:
  void open_stream(const std::string& path);

  std::string where_;
  std::ifstream stream_;
  size_t address_bytes_ = 8;
  size_t length_bytes_ = 8;
  uint64_t base_ = 0;
  uint64_t size_ = 0;
};

// One header message: its type, flags and data.
struct HeaderMessage {
  unsigned type = 0;
  unsigned flags = 0;
  std::vector<uint8_t> data;
};

// The version of the object header at `address`: 1, or 2 for a header with the "OHDR" signature (HDF5 checks
// those against their checksum before decoding them).
int object_header_version(RawFile& file, uint64_t address);

// Calls `visit` on each message of the version-1 object header at `address` (first chunk and continuation
// chunks) until it returns false. Throws InputError when a message or chunk does not fit.
void for_each_header_message(RawFile& file, uint64_t address, const std::function<bool(const HeaderMessage&)>& visit);

// Refuses (InputError) an object whose version-1 header holds what HDF5 1.10 decodes without checking: an attribute
// message whose name, datatype, dataspace or value runs past the message (HDF5 then reads freed or foreign memory),
// or a chunk extent of 0 in the dataset layout (HDF5 divides by it). `address` is the object's header; version-2
// headers are left to HDF5, which checks them against their checksum first.
void check_object_header(RawFile& file, uint64_t address);

// Checks the root group's object header of the HDF5 file at `path` before HDF5 opens it: H5Fopen loads that header,
// and HDF5 1.10 allocates whatever size a damaged continuation message declares. A file without an HDF5 superblock
// is left to HDF5 to refuse.
void check_file_before_open(const std::string& path);

}  // namespace veomni::h5::detail
