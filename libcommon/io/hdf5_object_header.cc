// Bounded reading of HDF5 object headers (version 1) from the file's bytes, and the checks of their messages.
#include "io/hdf5_object_header.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"

namespace veomni::h5::detail {

namespace {

// Sizes and message types of the HDF5 file format specification.
constexpr uint64_t kObjectHeaderPrefixBytes = 16;
constexpr uint64_t kMessageHeaderBytes = 8;
constexpr unsigned kLayoutMessage = 0x0008;
constexpr unsigned kContinuationMessage = 0x0010;
constexpr unsigned kSymbolTableMessage = 0x0011;
constexpr unsigned kChunkedLayout = 2;
constexpr unsigned kMaxLayoutAxes = 33;  // HDF5's 32 axes, plus the element size axis of older layouts
// An object header chunk holds at most 64 KiB; a few chunks are all that any object of ours needs.
constexpr size_t kMaxHeaderChunks = 64;

bool valid_width(size_t n) { return n == 2 || n == 4 || n == 8; }

// Chunk extents of a layout message (each `width` bytes from `at`), refused when one is 0.
void check_chunk_extents(const HeaderMessage& layout, size_t at, unsigned axes, size_t width,
                         const std::string& where) {
  if (axes == 0 || axes > kMaxLayoutAxes || width == 0 || width > 8 || at + axes * width > layout.data.size())
    throw InputError(fmt::format("{}: the dataset's chunk layout is damaged ({} axes)", where, axes));
  for (unsigned axis = 0; axis < axes; ++axis)
    if (decode_le(&layout.data[at + axis * width], width) == 0)
      throw InputError(fmt::format("{}: the dataset's chunks are 0 elements long along axis {} (a damaged file?)",
                                   where, axis));
}

void check_layout_message(const HeaderMessage& message, const RawFile& file) {
  const std::string& where = file.where();
  const std::vector<uint8_t>& d = message.data;
  if (d.size() < 3) throw InputError(fmt::format("{}: the dataset's layout message is truncated", where));
  const unsigned version = d[0];
  if (version <= 2) {
    // version, axes, class, 5 reserved bytes, the address (not for compact data), 4-byte extents
    if (d[2] == kChunkedLayout) check_chunk_extents(message, 8 + file.address_bytes(), d[1], 4, where);
  } else if (version == 3) {
    // version, class, then for chunks: axes, address, 4-byte extents (the last one the element size)
    if (d[1] == kChunkedLayout) check_chunk_extents(message, 3 + file.address_bytes(), d[2], 4, where);
  } else if (version == 4) {
    // version, class, then for chunks: flags, axes, bytes per extent, extents
    if (d[1] == kChunkedLayout) {
      if (d.size() < 5) throw InputError(fmt::format("{}: the dataset's layout message is truncated", where));
      check_chunk_extents(message, 5, d[3], d[4], where);
    }
  } else {
    throw InputError(fmt::format("{}: the dataset's layout message has unknown version {}", where, version));
  }
}

// Elements of an attribute's dataspace message (versions 1 and 2), or nullopt when it does not decode.
std::optional<uint64_t> dataspace_elements(const uint8_t* space, uint64_t size, size_t length_bytes) {
  if (size < 4) return std::nullopt;
  const unsigned version = space[0], rank = space[1];
  if ((version != 1 && version != 2) || rank > 32) return std::nullopt;
  if (version == 2 && space[3] == 2) return 0;  // the null dataspace
  const uint64_t dims_at = version == 1 ? 8 : 4;
  if (dims_at + uint64_t{rank} * length_bytes > size) return std::nullopt;
  uint64_t elements = 1;
  for (unsigned axis = 0; axis < rank; ++axis)
    if (__builtin_mul_overflow(elements, decode_le(space + dims_at + axis * length_bytes, length_bytes), &elements))
      return std::nullopt;
  return elements;
}

// "<file> attribute '<name>'" when the message's name is readable text, else "<file> attribute message".
std::string attribute_where(const std::string& file, const std::vector<uint8_t>& d, uint64_t name_at,
                            uint64_t name_size) {
  if (name_size < 2 || name_size > 256 || name_at + name_size > d.size()) return file + " attribute message";
  std::string name(reinterpret_cast<const char*>(&d[name_at]), name_size - 1);
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return file + " attribute message";
  return fmt::format("{} attribute '{}'", file, name);
}

// A number's datatype (fixed-point class 0, floating-point class 1): its bits must lie inside its element, which
// HDF5's conversions assume when they walk the bits (a damaged precision or offset reads past the value).
void check_number_layout(const std::vector<uint8_t>& d, uint64_t type_at, uint64_t type_size, unsigned type_class,
                         uint64_t element_bytes, const std::string& where) {
  if (type_class != 0 && type_class != 1) return;
  const uint64_t properties = type_class == 0 ? 4 : 12;
  const auto damaged = [&where] {
    return InputError(fmt::format("{}: its number type is damaged (bits outside the element; a damaged file?)", where));
  };
  if (type_size < 8 + properties || element_bytes == 0 || element_bytes > 16) throw damaged();
  const uint8_t* p = &d[type_at + 8];
  const uint64_t bits = 8 * element_bytes, offset = decode_le(p, 2), precision = decode_le(p + 2, 2);
  if (precision == 0 || offset + precision > bits) throw damaged();
  if (type_class == 1 && (uint64_t{p[4]} + p[5] > precision || uint64_t{p[6]} + p[7] > precision)) throw damaged();
}

// An attribute message's parts (name, datatype, dataspace, value) must each lie inside the message.
void check_attribute_message(const HeaderMessage& message, const RawFile& file) {
  const std::vector<uint8_t>& d = message.data;
  const unsigned version = d.empty() ? 0 : d[0];
  if (version < 1 || version > 3 || d.size() < 8)
    throw InputError(fmt::format("{}: an attribute message is damaged (version {})", file.where(), version));
  const auto padded = [version](uint64_t n) { return version == 1 ? align8(n) : n; };
  const uint64_t name_size = decode_le(&d[2], 2), type_size = decode_le(&d[4], 2), space_size = decode_le(&d[6], 2);
  const uint64_t name_at = version == 3 ? 9 : 8, type_at = name_at + padded(name_size);
  const std::string where = attribute_where(file.where(), d, name_at, name_size);
  const uint64_t space_at = type_at + padded(type_size), value_at = space_at + padded(space_size);
  // HDF5 copies the name up to its NUL, wherever that is: it must end the name's bytes.
  if (name_size == 0 || name_at + name_size > d.size() || d[name_at + name_size - 1] != 0)
    throw InputError(fmt::format("{}: an attribute's name is not terminated inside its header message (a damaged "
                                 "file?)",
                                 file.where()));
  if (value_at > d.size() || type_size < 8)
    throw InputError(fmt::format("{}: its header message declares a name, datatype or dataspace larger than itself "
                                 "(a damaged file?)",
                                 where));
  if (version >= 2 && (d[1] & 0x03) != 0) return;  // a shared datatype or dataspace: its size is not stored here
  // Numbers and strings only: HDF5 decodes the member names of compound and enum types unchecked.
  const unsigned type_class = d[type_at] & 0x0F;
  if (type_class != 0 && type_class != 1 && type_class != 3 && type_class != 9)
    throw InputError(fmt::format("{}: of HDF5 type class {} (veomni reads numbers and strings)", where, type_class));
  const uint64_t element_bytes = decode_le(&d[type_at + 4], 4);
  check_number_layout(d, type_at, type_size, type_class, element_bytes, where);
  const std::optional<uint64_t> elements = dataspace_elements(&d[space_at], space_size, file.length_bytes());
  uint64_t value_bytes = 0;
  if (!elements || __builtin_mul_overflow(*elements, element_bytes, &value_bytes) || value_bytes > d.size() - value_at)
    throw InputError(fmt::format("{}: its value runs past its header message (a damaged file?)", where));
}

// A group's symbol table message names its local heap (the link names): HDF5 1.10 allocates the heap's declared
// data size before reading it, so the heap's header and data segment must lie inside the file.
void check_symbol_table_message(const HeaderMessage& message, RawFile& file) {
  const size_t address_bytes = file.address_bytes(), length_bytes = file.length_bytes();
  if (message.data.size() < 2 * address_bytes)
    throw InputError(fmt::format("{}: the group's symbol table message is truncated", file.where()));
  const uint64_t heap = decode_le(message.data.data() + address_bytes, address_bytes);
  const std::vector<uint8_t> header = file.read(heap, 8 + 2 * length_bytes + address_bytes, "group's local heap");
  if (std::memcmp(header.data(), "HEAP", 4) != 0)
    throw InputError(fmt::format("{}: the group's local heap is damaged (no HEAP signature)", file.where()));
  const uint64_t size = decode_le(&header[8], length_bytes);
  const uint64_t data = decode_le(&header[8 + 2 * length_bytes], address_bytes);
  file.read(data, 0, "group's local heap data");  // its start within the file...
  uint64_t end = 0;                               // ...and its end
  if (__builtin_add_overflow(data, size, &end)) end = UINT64_MAX;
  file.read(end, 0, "end of the group's local heap data");
}

}  // namespace

uint64_t decode_le(const uint8_t* at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= static_cast<uint64_t>(at[i]) << (8 * i);
  return value;
}

RawFile::RawFile(hid_t object, const std::string& where) : where_(where) {
  const hid_t file = H5Iget_file_id(object);
  if (file < 0) throw InputError(fmt::format("{}: cannot find the file of the object", where));
  const hid_t plist = H5Fget_create_plist(file);
  hsize_t userblock = 0;
  const bool ok = plist >= 0 && H5Pget_sizes(plist, &address_bytes_, &length_bytes_) >= 0 &&
                  H5Pget_userblock(plist, &userblock) >= 0;
  std::string path;
  const ssize_t name_size = H5Fget_name(file, nullptr, 0);
  if (name_size > 0) {
    path.resize(static_cast<size_t>(name_size) + 1);
    H5Fget_name(file, path.data(), path.size());
    path.resize(static_cast<size_t>(name_size));
  }
  // The file's own bytes are read below: buffered writes of a file open for writing must be there first.
  unsigned intent = 0;
  if (H5Fget_intent(file, &intent) >= 0 && (intent & H5F_ACC_RDWR) != 0) H5Fflush(file, H5F_SCOPE_LOCAL);
  if (plist >= 0) H5Pclose(plist);
  H5Fclose(file);
  H5Eclear2(H5E_DEFAULT);
  if (!ok || name_size <= 0 || !valid_width(address_bytes_) || !valid_width(length_bytes_))
    throw InputError(fmt::format("{}: cannot read the file's superblock layout", where));
  base_ = userblock;
  open_stream(path);
}

RawFile::RawFile(const std::string& path, size_t address_bytes, size_t length_bytes, uint64_t base)
    : where_(path), address_bytes_(address_bytes), length_bytes_(length_bytes), base_(base) {
  if (!valid_width(address_bytes_) || !valid_width(length_bytes_))
    throw InputError(fmt::format("{}: the superblock declares {}-byte addresses and {}-byte lengths (a damaged file?)",
                                 path, address_bytes_, length_bytes_));
  open_stream(path);
}

void RawFile::open_stream(const std::string& path) {
  stream_.open(path, std::ios::binary);
  if (!stream_) throw InputError(fmt::format("{}: cannot open the file to check its bytes", where_));
  stream_.seekg(0, std::ios::end);
  size_ = static_cast<uint64_t>(stream_.tellg());
}

std::vector<uint8_t> RawFile::read(uint64_t address, uint64_t length, const char* what) {
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

int object_header_version(RawFile& file, uint64_t address) {
  const std::vector<uint8_t> prefix = file.read(address, 4, "object header");
  if (std::memcmp(prefix.data(), "OHDR", 4) == 0) return 2;
  return prefix[0];
}

void for_each_header_message(RawFile& file, uint64_t address, const std::function<bool(const HeaderMessage&)>& visit) {
  const std::vector<uint8_t> prefix = file.read(address, kObjectHeaderPrefixBytes, "object header");
  if (prefix[0] != 1)
    throw InputError(fmt::format("{}: object header of version {} where version 1 was expected", file.where(),
                                 prefix[0]));
  std::vector<std::pair<uint64_t, uint64_t>> chunks{{address + kObjectHeaderPrefixBytes, decode_le(&prefix[8], 4)}};
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (c >= kMaxHeaderChunks) throw InputError(fmt::format("{}: the object header has too many chunks", file.where()));
    const std::vector<uint8_t> chunk = file.read(chunks[c].first, chunks[c].second, "object header chunk");
    for (uint64_t at = 0; at + kMessageHeaderBytes <= chunk.size();) {
      HeaderMessage message;
      message.type = static_cast<unsigned>(decode_le(&chunk[at], 2));
      message.flags = chunk[at + 4];
      const uint64_t size = decode_le(&chunk[at + 2], 2), data = at + kMessageHeaderBytes;
      if (data + size > chunk.size())
        throw InputError(fmt::format("{}: a header message runs past its object header chunk", file.where()));
      message.data.assign(chunk.begin() + static_cast<std::ptrdiff_t>(data),
                          chunk.begin() + static_cast<std::ptrdiff_t>(data + size));
      // HDF5 decodes a continuation message's address and length whatever size the message declares.
      if (message.type == kContinuationMessage && size < file.address_bytes() + file.length_bytes())
        throw InputError(fmt::format("{}: a continuation message of {} bytes is too short", file.where(), size));
      if (message.type == kContinuationMessage)
        chunks.emplace_back(decode_le(message.data.data(), file.address_bytes()),
                            decode_le(message.data.data() + file.address_bytes(), file.length_bytes()));
      if (!visit(message)) return;
      at = data + size;
    }
  }
}

void check_object_header(RawFile& file, uint64_t address) {
  if (object_header_version(file, address) == 2) return;
  for_each_header_message(file, address, [&](const HeaderMessage& message) {
    if (message.type == kLayoutMessage) check_layout_message(message, file);
    if (message.type == kSymbolTableMessage) check_symbol_table_message(message, file);
    if (message.type == kAttributeMessage && (message.flags & kSharedMessageFlag) == 0)
      check_attribute_message(message, file);
    return true;
  });
}

void check_file_before_open(const std::string& path) {
  static const char kSignature[] = "\x89HDF\r\n\x1a\n";
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const uint64_t size = in ? static_cast<uint64_t>(in.tellg()) : 0;
  // HDF5 looks for the superblock at 0, 512, 1024, 2048, ... (after a user block).
  for (uint64_t at = 0; at + 16 <= size; at = at == 0 ? 512 : at * 2) {
    std::vector<uint8_t> block(std::min<uint64_t>(size - at, 96));
    in.seekg(static_cast<std::streamoff>(at));
    if (!in.read(reinterpret_cast<char*>(block.data()), static_cast<std::streamsize>(block.size()))) return;
    if (std::memcmp(block.data(), kSignature, 8) != 0) continue;
    const unsigned version = block[8];
    // Versions 0 and 1: widths at bytes 13 and 14, then four addresses and the root entry (name offset, header);
    // versions 2 and 3: widths at 9 and 10, then base, extension and end-of-file addresses, the root header.
    const size_t address_bytes = version <= 1 ? block[13] : block[9];
    const size_t length_bytes = version <= 1 ? block[14] : block[10];
    if (!valid_width(address_bytes)) return;  // HDF5 refuses it itself
    const size_t root_at = version == 0 ? 24 + 5 * address_bytes
                           : version == 1 ? 28 + 5 * address_bytes
                                          : 11 + 3 * address_bytes;
    if (version > 3 || root_at + address_bytes > block.size()) return;
    RawFile file(path, address_bytes, length_bytes, at);
    check_object_header(file, decode_le(&block[root_at], address_bytes));
    return;
  }
}

}  // namespace veomni::h5::detail
