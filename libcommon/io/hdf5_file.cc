// Opening and creating HDF5 files, groups and datasets through the C API.
#include "io/hdf5_file.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/hdf5_detail.h"
#include "io/hdf5_object_header.h"

namespace veomni::h5 {

namespace {

std::string member_where(const std::string& where, const std::string& name) {
  // Files are named by their path; members get ":/a/b" appended.
  const bool is_file_root = where.find(":/") == std::string::npos;
  return is_file_root ? fmt::format("{}:/{}", where, name) : fmt::format("{}/{}", where, name);
}

herr_t collect_member(hid_t, const char* name, const H5L_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

// Before HDF5 opens a member, its object header is checked from the file's bytes (see detail::check_object_header).
// Only hard links are followed (a soft or external link could name any object or file).
void check_member_before_open(const Group& group, const std::string& name, const std::string& where) {
  H5L_info_t link;
  if (H5Lget_info(group.id(), name.c_str(), &link, H5P_DEFAULT) < 0) detail::throw_error(where, "cannot look up");
  if (link.type != H5L_TYPE_HARD) throw InputError(fmt::format("{}: a soft or external link", where));
  detail::RawFile file(group.id(), where);
  detail::check_object_header(file, link.u.address);
}

// Opens a direct member and checks that it is a group or a dataset as expected; returns the raw identifier.
hid_t open_member(const Group& group, const std::string& name, H5I_type_t expected, const char* kind) {
  const std::string where = member_where(group.where(), name);
  if (!group.contains(name)) throw InputError(fmt::format("{}: missing {} '{}'", group.where(), kind, name));
  check_member_before_open(group, name, where);
  Object object =
      detail::own(H5Oopen(group.id(), name.c_str(), H5P_DEFAULT), where, fmt::format("cannot open {}", kind));
  if (H5Iget_type(object.id()) != expected) throw InputError(fmt::format("{}: expected a {}", where, kind));
  return object.release();
}

std::vector<hsize_t> to_hsize(const Shape& shape) {
  std::vector<hsize_t> out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i)
    out[i] = shape[i] == kUnlimited ? H5S_UNLIMITED : static_cast<hsize_t>(shape[i]);
  return out;
}

Object creation_properties(const DatasetLayout& layout, const std::string& where) {
  Object plist = detail::own(H5Pcreate(H5P_DATASET_CREATE), where, "cannot create dataset properties");
  // No modification times in object headers: the same content gives the same file bytes.
  if (H5Pset_obj_track_times(plist.id(), false) < 0) detail::throw_error(where, "cannot set dataset properties");
  if (layout.chunk.empty()) return plist;
  VEOMNI_CHECK(layout.chunk.size() == layout.shape.size(), "{}: chunk rank {} for a rank-{} dataset", where,
               layout.chunk.size(), layout.shape.size());
  const std::vector<hsize_t> chunk = to_hsize(layout.chunk);
  bool ok = H5Pset_chunk(plist.id(), static_cast<int>(chunk.size()), chunk.data()) >= 0;
  if (ok && layout.checksum) ok = H5Pset_fletcher32(plist.id()) >= 0;
  if (ok && layout.shuffle) ok = H5Pset_shuffle(plist.id()) >= 0;
  if (ok && layout.deflate_level > 0) ok = H5Pset_deflate(plist.id(), static_cast<unsigned>(layout.deflate_level)) >= 0;
  if (!ok) detail::throw_error(where, "cannot set the chunk layout and filters");
  return plist;
}

}  // namespace

bool Group::contains(const std::string& name) const {
  auto guard = detail::lock();
  const htri_t exists = H5Lexists(id_, name.c_str(), H5P_DEFAULT);
  if (exists < 0) detail::throw_error(member_where(where_, name), "cannot look up");
  return exists > 0;
}

std::vector<std::string> Group::member_names() const {
  auto guard = detail::lock();
  std::vector<std::string> names;
  hsize_t index = 0;
  if (H5Literate(id_, H5_INDEX_NAME, H5_ITER_INC, &index, collect_member, &names) < 0)
    detail::throw_error(where_, "cannot list members");
  std::sort(names.begin(), names.end());
  return names;
}

Group Group::group(const std::string& name) const {
  auto guard = detail::lock();
  return Group(open_member(*this, name, H5I_GROUP, "group"), member_where(where_, name));
}

Group Group::create_group(const std::string& name) {
  const std::string where = member_where(where_, name);
  auto guard = detail::lock();
  Object plist = detail::own(H5Pcreate(H5P_GROUP_CREATE), where, "cannot create group properties");
  if (H5Pset_obj_track_times(plist.id(), false) < 0) detail::throw_error(where, "cannot set group properties");
  const hid_t id = H5Gcreate2(id_, name.c_str(), H5P_DEFAULT, plist.id(), H5P_DEFAULT);
  if (id < 0) detail::throw_write_error(id_, where, "cannot create group");
  return Group(id, where);
}

Dataset Group::dataset(const std::string& name) const {
  auto guard = detail::lock();
  return Dataset(open_member(*this, name, H5I_DATASET, "dataset"), member_where(where_, name));
}

Dataset Group::create_dataset(const std::string& name, const DatasetLayout& layout) {
  const std::string where = member_where(where_, name);
  auto guard = detail::lock();
  const std::vector<hsize_t> dims = to_hsize(layout.shape);
  const std::vector<hsize_t> max_dims = to_hsize(layout.max_shape.empty() ? layout.shape : layout.max_shape);
  VEOMNI_CHECK(dims.size() == max_dims.size(), "{}: shape and max_shape ranks differ", where);
  Object space = detail::own(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()), where,
                             "cannot create the dataspace");
  Object plist = creation_properties(layout, where);
  const hid_t id =
      H5Dcreate2(id_, name.c_str(), detail::file_type(layout.dtype), space.id(), H5P_DEFAULT, plist.id(), H5P_DEFAULT);
  if (id < 0) detail::throw_write_error(id_, where, "cannot create dataset");
  return Dataset(id, where);
}

File File::create(const std::string& path) {
  auto guard = detail::lock();
  Object plist = detail::own(H5Pcreate(H5P_FILE_CREATE), path, "cannot create file properties");
  if (H5Pset_obj_track_times(plist.id(), false) < 0) detail::throw_error(path, "cannot set file properties");
  std::error_code ignored;
  const bool existed = std::filesystem::exists(path, ignored);
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, plist.id(), H5P_DEFAULT);
  if (id < 0) {
    int system_errno = 0;
    const std::string reason = detail::describe_error_stack(&system_errno);
    const std::string message = fmt::format("{}: cannot create HDF5 file: {}", path, reason);
    // HDF5 may have created the file before its first write failed: leave nothing behind.
    if (!existed) std::filesystem::remove(path, ignored);
    if (detail::is_storage_failure(system_errno)) throw Error(message);
    throw InputError(message);
  }
  File file;
  file.id_ = id;
  file.where_ = path;
  return file;
}

File File::open(const std::string& path, FileMode mode) {
  if (!std::filesystem::exists(path)) throw InputError(fmt::format("{}: no such file", path));
  auto guard = detail::lock();
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError(fmt::format("{}: not an HDF5 file (no HDF5 signature)", path));
  }
  // The root group's header, checked like every member's before HDF5 loads it.
  detail::check_file_before_open(path);
  const hid_t id = H5Fopen(path.c_str(), mode == FileMode::Read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
  if (id < 0) detail::throw_error(path, "cannot open HDF5 file (truncated or damaged?)");
  File file;
  file.id_ = id;
  file.where_ = path;
  return file;
}

void File::flush() {
  auto guard = detail::lock();
  if (H5Fflush(id_, H5F_SCOPE_GLOBAL) < 0) detail::throw_write_error(id_, where_, "cannot flush");
}

}  // namespace veomni::h5
