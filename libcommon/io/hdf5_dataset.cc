// HDF5 dataset access: extent, element-type checks, hyperslab reads and writes.
#include "io/hdf5_dataset.h"

#include "core/error.h"
#include "io/hdf5_detail.h"

namespace veomni::h5 {

namespace {

Object own(hid_t id, const std::string& where, const std::string& what) {
  if (id < 0) detail::throw_error(where, what);
  return Object(id, where);
}

std::vector<hsize_t> to_hsize(const Shape& shape) { return std::vector<hsize_t>(shape.begin(), shape.end()); }

// The file dataspace with the block [offset, offset + count) selected, plus the matching memory dataspace.
struct Selection {
  Object file_space;
  Object memory_space;
};

Selection select_block(const Dataset& dataset, const Shape& offset, const Shape& count) {
  const Shape extent = dataset.shape();
  VEOMNI_CHECK(offset.size() == extent.size() && count.size() == extent.size(),
               "{}: block of rank {} for a rank-{} dataset", dataset.where(), count.size(), extent.size());
  for (size_t axis = 0; axis < extent.size(); ++axis)
    if (offset[axis] < 0 || count[axis] < 0 || offset[axis] + count[axis] > extent[axis])
      throw InputError(fmt::format("{}: block at {} of {} lies outside the dataset's extent {}", dataset.where(),
                                   shape_str(offset), shape_str(count), shape_str(extent)));
  Selection selection{own(H5Dget_space(dataset.id()), dataset.where(), "cannot read the dataspace"), Object()};
  const std::vector<hsize_t> start = to_hsize(offset), block = to_hsize(count);
  if (H5Sselect_hyperslab(selection.file_space.id(), H5S_SELECT_SET, start.data(), nullptr, block.data(), nullptr) < 0)
    detail::throw_error(dataset.where(), "cannot select a block");
  selection.memory_space = own(H5Screate_simple(static_cast<int>(block.size()), block.data(), nullptr), dataset.where(),
                               "cannot create the memory dataspace");
  return selection;
}

struct StoredType {
  H5T_class_t type_class;
  size_t size;
  H5T_sign_t sign;
};

StoredType stored_type(const Dataset& dataset) {
  Object type = own(H5Dget_type(dataset.id()), dataset.where(), "cannot read the element type");
  const H5T_class_t type_class = H5Tget_class(type.id());
  return {type_class, H5Tget_size(type.id()), type_class == H5T_INTEGER ? H5Tget_sign(type.id()) : H5T_SGN_ERROR};
}

}  // namespace

Shape Dataset::shape() const {
  auto guard = detail::lock();
  Object space = own(H5Dget_space(id_), where_, "cannot read the dataspace");
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) detail::throw_error(where_, "cannot read the rank");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr) < 0)
    detail::throw_error(where_, "cannot read the extent");
  return Shape(dims.begin(), dims.end());
}

Shape Dataset::chunk() const {
  auto guard = detail::lock();
  Object plist = own(H5Dget_create_plist(id_), where_, "cannot read the creation properties");
  if (H5Pget_layout(plist.id()) != H5D_CHUNKED) return {};
  std::vector<hsize_t> dims(32);
  const int rank = H5Pget_chunk(plist.id(), static_cast<int>(dims.size()), dims.data());
  if (rank < 0) detail::throw_error(where_, "cannot read the chunk extent");
  return Shape(dims.begin(), dims.begin() + rank);
}

bool Dataset::stores(DType dtype) const {
  auto guard = detail::lock();
  const StoredType type = stored_type(*this);
  switch (dtype) {
    case DType::F32: return type.type_class == H5T_FLOAT && type.size == 4;
    case DType::BF16:
    case DType::F16: return type.type_class == H5T_INTEGER && type.size == 2 && type.sign == H5T_SGN_NONE;
    case DType::I32: return type.type_class == H5T_INTEGER && type.size == 4 && type.sign == H5T_SGN_2;
    case DType::I64: return type.type_class == H5T_INTEGER && type.size == 8 && type.sign == H5T_SGN_2;
    case DType::U8:
    case DType::Bool: return type.type_class == H5T_INTEGER && type.size == 1 && type.sign == H5T_SGN_NONE;
  }
  return false;
}

std::string Dataset::stored_type_name() const {
  auto guard = detail::lock();
  const StoredType type = stored_type(*this);
  switch (type.type_class) {
    case H5T_INTEGER: return fmt::format("{}{}", type.sign == H5T_SGN_NONE ? "u" : "i", type.size * 8);
    case H5T_FLOAT: return fmt::format("f{}", type.size * 8);
    case H5T_STRING: return "string";
    default: return fmt::format("HDF5 type class {}", static_cast<int>(type.type_class));
  }
}

void Dataset::resize(const Shape& shape) {
  auto guard = detail::lock();
  const std::vector<hsize_t> dims = to_hsize(shape);
  if (H5Dset_extent(id_, dims.data()) < 0)
    detail::throw_write_error(id_, where_, fmt::format("cannot resize to {}", shape_str(shape)));
}

void Dataset::write(const void* data, DType dtype, const Shape& offset, const Shape& count) {
  if (shape_numel(count) == 0) return;
  auto guard = detail::lock();
  Selection selection = select_block(*this, offset, count);
  if (H5Dwrite(id_, detail::memory_type(dtype), selection.memory_space.id(), selection.file_space.id(), H5P_DEFAULT,
               data) < 0)
    detail::throw_write_error(id_, where_,
                              fmt::format("cannot write {} elements at {}", shape_str(count), shape_str(offset)));
}

void Dataset::read(void* data, DType dtype, const Shape& offset, const Shape& count) const {
  if (shape_numel(count) == 0) return;
  auto guard = detail::lock();
  Selection selection = select_block(*this, offset, count);
  if (H5Dread(id_, detail::memory_type(dtype), selection.memory_space.id(), selection.file_space.id(), H5P_DEFAULT,
              data) < 0)
    detail::throw_error(where_, fmt::format("cannot read {} elements at {}", shape_str(count), shape_str(offset)));
}

Tensor Dataset::read_all(DType dtype) const {
  const Shape extent = shape();
  Tensor tensor = Tensor::empty(extent, dtype);
  read(tensor.raw_data(), dtype, Shape(extent.size(), 0), extent);
  return tensor;
}

}  // namespace veomni::h5
