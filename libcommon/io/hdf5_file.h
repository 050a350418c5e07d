// RAII HDF5 files and groups: open/create, members, datasets; HDF5's own headers stay in the .cc files.
#pragma once
#include <string>
#include <vector>

#include "io/hdf5_dataset.h"
#include "io/hdf5_object.h"

namespace veomni::h5 {

class Group : public Object {
 public:
  using Object::Object;

  // Direct members only ("samples", not "samples/input_ids").
  bool contains(const std::string& name) const;
  std::vector<std::string> member_names() const;  // sorted by name
  Group group(const std::string& name) const;
  Group create_group(const std::string& name);
  Dataset dataset(const std::string& name) const;
  Dataset create_dataset(const std::string& name, const DatasetLayout& layout);
};

enum class FileMode { Read, ReadWrite };

// A file is also its root group.
class File : public Group {
 public:
  File() = default;
  // Creates (or truncates) `path`.
  static File create(const std::string& path);
  static File open(const std::string& path, FileMode mode = FileMode::Read);

  const std::string& path() const { return where_; }
  // Writes HDF5's buffers to the operating system (durability needs an fsync after close).
  void flush();
};

}  // namespace veomni::h5
