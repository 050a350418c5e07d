// RAII handle to one HDF5 object (file, group, dataset, ...) with its attributes; no HDF5 header needed.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace veomni::h5 {

// An HDF5 identifier (hid_t, a 64-bit integer since HDF5 1.10).
using Id = int64_t;

// Owns one identifier and closes it; `where` ("file.h5:/samples/input_ids") prefixes every error message.
// Every failure throws naming `where`, what was attempted and HDF5's own explanation: InputError for reads (the file
// is bad input), Error (exit 1) for writes that the system could not store (disk full, ...); after such a write
// failure the file's further writes are discarded, so that closing it cannot fail (see io/hdf5_detail.h).
class Object {
 public:
  Object() = default;
  Object(Id id, std::string where) : id_(id), where_(std::move(where)) {}
  ~Object();
  Object(Object&& other) noexcept;
  Object& operator=(Object&& other) noexcept;
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  Id id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  const std::string& where() const { return where_; }
  // Closes now and reports a failure (the destructor closes quietly). A file or dataset is flushed first.
  void close();
  // Gives up ownership: the caller closes the returned identifier.
  Id release() { return std::exchange(id_, -1); }

  bool has_attribute(const std::string& name) const;
  std::vector<std::string> attribute_names() const;
  // Setters replace an existing attribute of the same name. Strings are fixed-length, NUL-terminated UTF-8.
  void set_int_attribute(const std::string& name, int64_t value);
  void set_float_attribute(const std::string& name, double value);
  void set_string_attribute(const std::string& name, const std::string& value);
  // Getters accept any integer / float / string (fixed or variable length) scalar attribute.
  int64_t int_attribute(const std::string& name) const;
  double float_attribute(const std::string& name) const;
  std::string string_attribute(const std::string& name) const;

 protected:
  Id id_ = -1;
  std::string where_;
};

}  // namespace veomni::h5
