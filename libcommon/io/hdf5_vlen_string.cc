// Bounded reader of variable-length string attributes: object header (version 1) and global heap walked by hand.
#include "io/hdf5_vlen_string.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "io/hdf5_detail.h"

namespace veomni::h5::detail {

namespace {

// Header message types and sizes of the HDF5 file format specification (version 1 object headers).
constexpr uint16_t kAttributeMessage = 0x000C;
constexpr uint16_t kContinuationMessage = 0x0010;
constexpr uint8_t kSharedMessageFlag = 0x02;
constexpr uint64_t kObjectHeaderPrefixBytes = 16;
constexpr uint64_t kMessageHeaderBytes = 8;
constexpr int kVariableLengthClass = 9;
constexpr int kVariableLengthStringType = 1;
// An object header is at most 64 KiB per chunk; a few chunks are all that attributes ever need.
constexpr int kMaxHeaderChunks = 64;
// HDF5 writes collections of 4 KiB and more; a string attribute's collection far beyond that is not ours.
constexpr uint64_t kMaxHeapCollectionBytes = 16ull << 20;

uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// Little-endian unsigned integer of `width` bytes at `at` (callers have checked the bounds).
uint64_t decode(const uint8_t* at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= static_cast<uint64_t>(at[i]) << (8 * i);
  return value;
}

// The file's bytes, read on demand with every range checked against the file size.
class FileBytes {
 public:
  FileBytes(const std::string& path, uint64_t base, const std::string& where)
      : stream_(path, std::ios::binary), base_(base), where_(where) {
    if (!stream_) throw InputError(fmt::format("{}: cannot reopen the file to read the string", where_));
    stream_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(stream_.tellg());
  }

  // `length` bytes at HDF5 address `address` (relative to the superblock's base address).
  std::vector<uint8_t> read(uint64_t address, uint64_t length, const char* what) {
    uint64_t at = 0, end = 0;
    if (__builtin_add_overflow(address, base_, &at) || __builtin_add_overflow(at, length, &end) || end > size_)
      throw InputError(fmt::format("{}: the {} ({} bytes at address {}) lies beyond the end of the file ({} bytes)",
                                   where_, what, length, address, size_));
    std::vector<uint8_t> bytes(length);
    stream_.seekg(static_cast<std::streamoff>(at));
    if (!stream_.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(length)))
      throw InputError(fmt::format("{}: cannot read the {} at address {}", where_, what, address));
    return bytes;
  }

 private:
  std::ifstream stream_;
  uint64_t base_;
  uint64_t size_ = 0;
  const std::string& where_;
};

// The superblock's field widths, and the file: what every address and length below is decoded with.
struct Layout {
  size_t address_bytes = 8;
  size_t length_bytes = 8;
  uint64_t base = 0;
  std::string path;
};

Layout file_layout(hid_t object, const std::string& where) {
  Layout layout;
  const hid_t file = H5Iget_file_id(object);
  if (file < 0) throw InputError(fmt::format("{}: cannot find the file of the attribute", where));
  const hid_t plist = H5Fget_create_plist(file);
  hsize_t userblock = 0;
  const bool ok = plist >= 0 && H5Pget_sizes(plist, &layout.address_bytes, &layout.length_bytes) >= 0 &&
                  H5Pget_userblock(plist, &userblock) >= 0;
  const ssize_t name_size = H5Fget_name(file, nullptr, 0);
  if (name_size > 0) {
    layout.path.resize(static_cast<size_t>(name_size) + 1);
    H5Fget_name(file, layout.path.data(), layout.path.size());
    layout.path.resize(static_cast<size_t>(name_size));
  }
  if (plist >= 0) H5Pclose(plist);
  H5Fclose(file);
  H5Eclear2(H5E_DEFAULT);
  const auto width_ok = [](size_t n) { return n == 2 || n == 4 || n == 8; };
  if (!ok || name_size <= 0 || !width_ok(layout.address_bytes) || !width_ok(layout.length_bytes))
    throw InputError(fmt::format("{}: cannot read the file's superblock layout", where));
  layout.base = userblock;
  return layout;
}

// Where the string lives: its length, and object `index` of the global heap collection at `collection`.
struct HeapReference {
  uint64_t length = 0;
  uint64_t collection = 0;
  uint64_t index = 0;
};

// Decodes one attribute message; returns whether it is the attribute `name` (then `reference` is filled in).
bool match_attribute(const std::vector<uint8_t>& message, const std::string& name, const Layout& layout,
                     const std::string& where, HeapReference& reference) {
  if (message.size() < 8) return false;
  const int version = message[0];
  if (version < 1 || version > 3) return false;
  const uint64_t name_size = decode(&message[2], 2), type_size = decode(&message[4], 2),
                 space_size = decode(&message[6], 2);
  const auto padded = [version](uint64_t n) { return version == 1 ? align8(n) : n; };
  uint64_t at = version == 3 ? 9 : 8;
  if (name_size == 0 || at + padded(name_size) > message.size()) return false;
  const std::string stored_name(reinterpret_cast<const char*>(&message[at]), name_size - 1);
  if (stored_name != name) return false;
  at += padded(name_size);
  // Version 2 and 3 flag a datatype or dataspace shared with another object: not the form our writers use.
  if (version >= 2 && (message[1] & 0x03) != 0)
    throw InputError(fmt::format("{}: a string attribute with a shared datatype or dataspace is not read", where));
  if (at + padded(type_size) + padded(space_size) > message.size() || type_size < 8)
    throw InputError(fmt::format("{}: the attribute's header message is truncated", where));
  const uint8_t* type = &message[at];
  const uint64_t element_size = decode(type + 4, 4);
  const uint64_t reference_size = 4 + layout.address_bytes + 4;
  if ((type[0] & 0x0F) != kVariableLengthClass || (type[1] & 0x0F) != kVariableLengthStringType ||
      element_size != reference_size)
    throw InputError(fmt::format("{}: the attribute's stored type is not a variable-length string", where));
  at += padded(type_size) + padded(space_size);
  if (at + reference_size > message.size())
    throw InputError(fmt::format("{}: the attribute's value is truncated", where));
  reference.length = decode(&message[at], 4);
  reference.collection = decode(&message[at + 4], layout.address_bytes);
  reference.index = decode(&message[at + 4 + layout.address_bytes], 4);
  return true;
}

// Walks the version-1 object header at `address` (its first chunk and continuation chunks) for the attribute.
HeapReference find_attribute(FileBytes& file, uint64_t address, const std::string& name, const Layout& layout,
                             const std::string& where) {
  const std::vector<uint8_t> prefix = file.read(address, kObjectHeaderPrefixBytes, "object header");
  if (prefix[0] != 1)
    throw InputError(fmt::format("{}: a variable-length string in an object header of version {} is not read "
                                 "(veomni writes fixed-length strings; rewrite the file with a current veomni)",
                                 where, prefix[0]));
  std::vector<std::pair<uint64_t, uint64_t>> chunks{{address + kObjectHeaderPrefixBytes, decode(&prefix[8], 4)}};
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (c >= kMaxHeaderChunks) throw InputError(fmt::format("{}: the object header has too many chunks", where));
    const std::vector<uint8_t> chunk = file.read(chunks[c].first, chunks[c].second, "object header chunk");
    for (uint64_t at = 0; at + kMessageHeaderBytes <= chunk.size();) {
      const uint64_t type = decode(&chunk[at], 2), size = decode(&chunk[at + 2], 2);
      const uint8_t flags = chunk[at + 4];
      const uint64_t data = at + kMessageHeaderBytes;
      if (data + size > chunk.size())
        throw InputError(fmt::format("{}: a header message runs past its object header chunk", where));
      const std::vector<uint8_t> message(chunk.begin() + static_cast<std::ptrdiff_t>(data),
                                         chunk.begin() + static_cast<std::ptrdiff_t>(data + size));
      if (type == kContinuationMessage && size >= layout.address_bytes + layout.length_bytes) {
        chunks.emplace_back(decode(message.data(), layout.address_bytes),
                            decode(message.data() + layout.address_bytes, layout.length_bytes));
      } else if (type == kAttributeMessage && (flags & kSharedMessageFlag) == 0) {
        HeapReference reference;
        if (match_attribute(message, name, layout, where, reference)) return reference;
      }
      at = data + size;
    }
  }
  throw InputError(fmt::format("{}: a variable-length string attribute outside the object header (dense attribute "
                               "storage) is not read (rewrite the file with a current veomni)",
                               where));
}

// Object `reference.index` of the global heap collection, with the collection's and every object's size checked.
std::string read_heap_object(FileBytes& file, const HeapReference& reference, const Layout& layout,
                             const std::string& where) {
  const uint64_t header_bytes = align8(8 + layout.length_bytes), object_header_bytes = 8 + layout.length_bytes;
  const std::vector<uint8_t> header = file.read(reference.collection, header_bytes, "global heap collection");
  if (std::memcmp(header.data(), "GCOL", 4) != 0 || header[4] != 1)
    throw InputError(fmt::format("{}: the string's global heap collection at address {} is damaged (no GCOL "
                                 "signature of version 1)",
                                 where, reference.collection));
  const uint64_t size = decode(&header[8], layout.length_bytes);
  if (size < header_bytes || size > kMaxHeapCollectionBytes)
    throw InputError(fmt::format("{}: the string's global heap collection declares {} bytes (a damaged file?)",
                                 where, size));
  const std::vector<uint8_t> heap = file.read(reference.collection, size, "global heap collection");
  for (uint64_t at = header_bytes; at + object_header_bytes <= size;) {
    const uint64_t index = decode(&heap[at], 2), object_size = decode(&heap[at + 8], layout.length_bytes);
    if (index == 0) break;  // the free space: no object follows
    const uint64_t data = at + object_header_bytes;
    if (object_size > size - data || align8(object_size) > size - data)
      throw InputError(fmt::format("{}: an object of the string's global heap collection runs past the collection "
                                   "(a damaged file?)",
                                   where));
    if (index == reference.index) {
      if (object_size != reference.length)
        throw InputError(fmt::format("{}: the string holds {} bytes in the global heap but its attribute says {} "
                                     "(a damaged file?)",
                                     where, object_size, reference.length));
      return std::string(reinterpret_cast<const char*>(&heap[data]), object_size);
    }
    at = data + align8(object_size);
  }
  throw InputError(fmt::format("{}: the string's global heap collection has no object {} (a damaged file?)", where,
                               reference.index));
}

}  // namespace

std::string read_vlen_string_attribute(hid_t object, const std::string& name, const std::string& where) {
  const Layout layout = file_layout(object, where);
  H5O_info_t info;
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError(fmt::format("{}: cannot locate the object header", where));
  }
  // The file's own bytes are read below: buffered writes of a file open for writing must be there first.
  if (H5Fflush(object, H5F_SCOPE_LOCAL) < 0) H5Eclear2(H5E_DEFAULT);
  FileBytes file(layout.path, layout.base, where);
  const HeapReference reference = find_attribute(file, info.addr, name, layout, where);
  if (reference.length > kMaxStringAttributeBytes)
    throw InputError(fmt::format("{}: the string is {} bytes long (at most {}; a damaged file?)", where,
                                 reference.length, kMaxStringAttributeBytes));
  if (reference.length == 0) return "";
  return read_heap_object(file, reference, layout, where);
}

}  // namespace veomni::h5::detail
