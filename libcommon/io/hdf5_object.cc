// Closing HDF5 identifiers and reading/writing scalar attributes.
#include "io/hdf5_object.h"

#include <utility>

#include "core/error.h"
#include "io/hdf5_detail.h"
#include "io/hdf5_vlen_string.h"

namespace veomni::h5 {

namespace {

// A file open for writing is flushed before it is closed: when the flush fails (disk full) its remaining writes
// are discarded, so that H5Fclose cannot fail (see detail::discard_file_writes). Returns whether the flush
// succeeded, leaving HDF5's explanation in `reason` when not.
bool flush_before_close(hid_t file, std::string& reason) {
  unsigned intent = 0;
  if (H5Fget_intent(file, &intent) < 0 || (intent & H5F_ACC_RDWR) == 0) {
    H5Eclear2(H5E_DEFAULT);
    return true;
  }
  if (H5Fflush(file, H5F_SCOPE_LOCAL) >= 0) return true;
  reason = detail::describe_error_stack();
  detail::discard_file_writes(file);
  return false;
}

herr_t close_id(hid_t id) {
  switch (H5Iget_type(id)) {
    case H5I_FILE: return H5Fclose(id);
    case H5I_GROUP: return H5Gclose(id);
    case H5I_DATASET: return H5Dclose(id);
    case H5I_DATASPACE: return H5Sclose(id);
    case H5I_DATATYPE: return H5Tclose(id);
    case H5I_ATTR: return H5Aclose(id);
    case H5I_GENPROP_LST: return H5Pclose(id);
    default: return H5Idec_ref(id);
  }
}

std::string attribute_where(const std::string& where, const std::string& name) {
  return fmt::format("{} attribute '{}'", where, name);
}

Object open_attribute(const Object& object, const std::string& name, H5T_class_t expected_class, const char* kind) {
  const std::string where = attribute_where(object.where(), name);
  auto guard = detail::lock();
  const htri_t exists = H5Aexists_by_name(object.id(), ".", name.c_str(), H5P_DEFAULT);
  if (exists < 0) detail::throw_error(where, "cannot look up the attribute");
  if (exists == 0) throw InputError(fmt::format("{}: missing", where));
  Object attribute =
      detail::own(H5Aopen_by_name(object.id(), ".", name.c_str(), H5P_DEFAULT, H5P_DEFAULT), where, "cannot open");
  Object type = detail::own(H5Aget_type(attribute.id()), where, "cannot read the type");
  Object space = detail::own(H5Aget_space(attribute.id()), where, "cannot read the shape");
  if (H5Tget_class(type.id()) != expected_class || H5Sget_simple_extent_npoints(space.id()) != 1)
    throw InputError(fmt::format("{}: expected a scalar {}", where, kind));
  return attribute;
}

void write_attribute(const Object& object, const std::string& name, hid_t type, const void* value) {
  const std::string where = attribute_where(object.where(), name);
  auto guard = detail::lock();
  const htri_t exists = H5Aexists_by_name(object.id(), ".", name.c_str(), H5P_DEFAULT);
  if (exists > 0 && H5Adelete_by_name(object.id(), ".", name.c_str(), H5P_DEFAULT) < 0)
    detail::throw_write_error(object.id(), where, "cannot replace the attribute");
  Object space = detail::own(H5Screate(H5S_SCALAR), where, "cannot create a scalar space");
  const hid_t created =
      H5Acreate_by_name(object.id(), ".", name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (created < 0) detail::throw_write_error(object.id(), where, "cannot create");
  Object attribute(created, where);
  if (H5Awrite(attribute.id(), type, value) < 0) detail::throw_write_error(object.id(), where, "cannot write");
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}

}  // namespace

Object::~Object() {
  if (id_ < 0) return;
  auto guard = detail::lock();
  std::string ignored;
  if (H5Iget_type(id_) == H5I_FILE) flush_before_close(id_, ignored);
  close_id(id_);
  H5Eclear2(H5E_DEFAULT);
}

Object::Object(Object&& other) noexcept : id_(std::exchange(other.id_, -1)), where_(std::move(other.where_)) {}

Object& Object::operator=(Object&& other) noexcept {
  if (this != &other) {
    Object old(std::move(*this));
    id_ = std::exchange(other.id_, -1);
    where_ = std::move(other.where_);
  }
  return *this;
}

void Object::close() {
  if (id_ < 0) return;
  auto guard = detail::lock();
  const hid_t id = std::exchange(id_, -1);
  // Flushed first so that a failure is reported while the identifier is still good (see flush_before_close).
  std::string reason;
  bool written = true;
  const H5I_type_t type = H5Iget_type(id);
  if (type == H5I_FILE) {
    written = flush_before_close(id, reason);
  } else if (type == H5I_DATASET && H5Dflush(id) < 0) {
    reason = detail::describe_error_stack();
    detail::discard_file_writes(id);
    written = false;
  }
  if (close_id(id) < 0 && written) {
    reason = detail::describe_error_stack();
    written = false;
  }
  if (!written) throw Error(fmt::format("{}: cannot close (data may not have been written): {}", where_, reason));
}

bool Object::has_attribute(const std::string& name) const {
  auto guard = detail::lock();
  const htri_t exists = H5Aexists_by_name(id_, ".", name.c_str(), H5P_DEFAULT);
  if (exists < 0) detail::throw_error(attribute_where(where_, name), "cannot look up the attribute");
  return exists > 0;
}

std::vector<std::string> Object::attribute_names() const {
  auto guard = detail::lock();
  std::vector<std::string> names;
  hsize_t index = 0;
  if (H5Aiterate_by_name(id_, ".", H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &names, H5P_DEFAULT) < 0)
    detail::throw_error(where_, "cannot list attributes");
  return names;
}

void Object::set_int_attribute(const std::string& name, int64_t value) {
  auto guard = detail::lock();
  write_attribute(*this, name, H5T_STD_I64LE, &value);
}

void Object::set_float_attribute(const std::string& name, double value) {
  auto guard = detail::lock();
  write_attribute(*this, name, H5T_IEEE_F64LE, &value);
}

void Object::set_string_attribute(const std::string& name, const std::string& value) {
  auto guard = detail::lock();
  // Fixed-length, NUL-terminated: reading it back never needs HDF5's variable-length (global heap) reader.
  Object type = detail::own(H5Tcopy(H5T_C_S1), where_, "cannot create a string type");
  if (H5Tset_size(type.id(), value.size() + 1) < 0 || H5Tset_strpad(type.id(), H5T_STR_NULLTERM) < 0 ||
      H5Tset_cset(type.id(), H5T_CSET_UTF8) < 0)
    detail::throw_error(attribute_where(where_, name), "cannot create a string type");
  write_attribute(*this, name, type.id(), value.c_str());
}

int64_t Object::int_attribute(const std::string& name) const {
  auto guard = detail::lock();
  Object attribute = open_attribute(*this, name, H5T_INTEGER, "integer");
  int64_t value = 0;
  if (H5Aread(attribute.id(), H5T_NATIVE_INT64, &value) < 0)
    detail::throw_error(attribute_where(where_, name), "cannot read");
  return value;
}

double Object::float_attribute(const std::string& name) const {
  auto guard = detail::lock();
  Object attribute = open_attribute(*this, name, H5T_FLOAT, "float");
  double value = 0;
  if (H5Aread(attribute.id(), H5T_NATIVE_DOUBLE, &value) < 0)
    detail::throw_error(attribute_where(where_, name), "cannot read");
  return value;
}

std::string Object::string_attribute(const std::string& name) const {
  const std::string where = attribute_where(where_, name);
  auto guard = detail::lock();
  Object attribute = open_attribute(*this, name, H5T_STRING, "string");
  Object type = detail::own(H5Aget_type(attribute.id()), where, "cannot read the type");
  const htri_t variable = H5Tis_variable_str(type.id());
  if (variable < 0) detail::throw_error(where, "cannot read the type");
  // Older veomni wrote variable-length strings; HDF5's own reader of those is unsafe on damaged files.
  if (variable > 0) return detail::read_vlen_string_attribute(id_, name, where);
  // Fixed-length: the stored bytes, cut at the first NUL (HDF5 pads with NULs or spaces).
  const size_t size = H5Tget_size(type.id());
  if (size == 0 || size > detail::kMaxStringAttributeBytes)
    throw InputError(fmt::format("{}: a string of {} bytes (at most {}; a damaged file?)", where, size,
                                 detail::kMaxStringAttributeBytes));
  if (H5Aget_storage_size(attribute.id()) != size)
    throw InputError(fmt::format("{}: stores {} bytes for a string of {} (a damaged file?)", where,
                                 H5Aget_storage_size(attribute.id()), size));
  std::string value(size, '\0');
  if (H5Aread(attribute.id(), type.id(), value.data()) < 0) detail::throw_error(where, "cannot read");
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  if (H5Tget_strpad(type.id()) == H5T_STR_SPACEPAD) value.erase(value.find_last_not_of(' ') + 1);
  return value;
}

}  // namespace veomni::h5
