// Bounded reader of variable-length string attributes: the attribute message and the global heap walked by hand.
#include "io/hdf5_vlen_string.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/hdf5_detail.h"
#include "io/hdf5_object_header.h"

namespace veomni::h5::detail {

namespace {

constexpr int kVariableLengthClass = 9;
constexpr int kVariableLengthStringType = 1;
// HDF5 writes collections of 4 KiB and more; a string attribute's collection far beyond that is not ours.
constexpr uint64_t kMaxHeapCollectionBytes = 16ull << 20;

// Where the string lives: its length, and object `index` of the global heap collection at `collection`.
struct HeapReference {
  uint64_t length = 0;
  uint64_t collection = 0;
  uint64_t index = 0;
};

// Decodes one attribute message; returns whether it is the attribute `name` (then `reference` is filled in).
bool match_attribute(const std::vector<uint8_t>& message, const std::string& name, const RawFile& file,
                     HeapReference& reference) {
  const std::string& where = file.where();
  if (message.size() < 8) return false;
  const int version = message[0];
  if (version < 1 || version > 3) return false;
  const uint64_t name_size = decode_le(&message[2], 2), type_size = decode_le(&message[4], 2),
                 space_size = decode_le(&message[6], 2);
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
  const uint64_t element_size = decode_le(type + 4, 4);
  const uint64_t reference_size = 4 + file.address_bytes() + 4;
  if ((type[0] & 0x0F) != kVariableLengthClass || (type[1] & 0x0F) != kVariableLengthStringType ||
      element_size != reference_size)
    throw InputError(fmt::format("{}: the attribute's stored type is not a variable-length string", where));
  at += padded(type_size) + padded(space_size);
  if (at + reference_size > message.size())
    throw InputError(fmt::format("{}: the attribute's value is truncated", where));
  reference.length = decode_le(&message[at], 4);
  reference.collection = decode_le(&message[at + 4], file.address_bytes());
  reference.index = decode_le(&message[at + 4 + file.address_bytes()], 4);
  return true;
}

// The attribute's message in the object header at `address`.
HeapReference find_attribute(RawFile& file, uint64_t address, const std::string& name) {
  const int version = object_header_version(file, address);
  if (version != 1)
    throw InputError(fmt::format("{}: a variable-length string in an object header of version {} is not read "
                                 "(veomni writes fixed-length strings; rewrite the file with a current veomni)",
                                 file.where(), version));
  HeapReference reference;
  bool found = false;
  for_each_header_message(file, address, [&](const HeaderMessage& message) {
    if (message.type == kAttributeMessage && (message.flags & kSharedMessageFlag) == 0)
      found = match_attribute(message.data, name, file, reference);
    return !found;
  });
  if (!found)
    throw InputError(fmt::format("{}: a variable-length string attribute outside the object header (dense attribute "
                                 "storage) is not read (rewrite the file with a current veomni)",
                                 file.where()));
  return reference;
}

// Object `reference.index` of the global heap collection, with the collection's and every object's size checked.
std::string read_heap_object(RawFile& file, const HeapReference& reference) {
  const std::string& where = file.where();
  const uint64_t header_bytes = align8(8 + file.length_bytes()), object_header_bytes = 8 + file.length_bytes();
  const std::vector<uint8_t> header = file.read(reference.collection, header_bytes, "global heap collection");
  if (std::memcmp(header.data(), "GCOL", 4) != 0 || header[4] != 1)
    throw InputError(fmt::format("{}: the string's global heap collection at address {} is damaged (no GCOL "
                                 "signature of version 1)",
                                 where, reference.collection));
  const uint64_t size = decode_le(&header[8], file.length_bytes());
  if (size < header_bytes || size > kMaxHeapCollectionBytes)
    throw InputError(fmt::format("{}: the string's global heap collection declares {} bytes (a damaged file?)",
                                 where, size));
  const std::vector<uint8_t> heap = file.read(reference.collection, size, "global heap collection");
  for (uint64_t at = header_bytes; at + object_header_bytes <= size;) {
    const uint64_t index = decode_le(&heap[at], 2), object_size = decode_le(&heap[at + 8], file.length_bytes());
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
  H5O_info_t info;
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError(fmt::format("{}: cannot locate the object header", where));
  }
  RawFile file(object, where);
  const HeapReference reference = find_attribute(file, info.addr, name);
  if (reference.length > kMaxStringAttributeBytes)
    throw InputError(fmt::format("{}: the string is {} bytes long (at most {}; a damaged file?)", where,
                                 reference.length, kMaxStringAttributeBytes));
  if (reference.length == 0) return "";
  return read_heap_object(file, reference);
}

}  // namespace veomni::h5::detail
