// HDF5 dataset access: extent, element-type checks, hyperslab reads and writes.
#include "io/hdf5_dataset.h"

#include "core/error.h"
#include "io/hdf5_detail.h"

namespace veomni::h5 {

namespace {

std::vector<hsize_t> block_dims(const Shape& shape) { return std::vector<hsize_t>(shape.begin(), shape.end()); }

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
  Selection selection{detail::own(H5Dget_space(dataset.id()), dataset.where(), "cannot read the dataspace"), Object()};
  const std::vector<hsize_t> start = block_dims(offset), block = block_dims(count);
  if (H5Sselect_hyperslab(selection.file_space.id(), H5S_SELECT_SET, start.data(), nullptr, block.data(), nullptr) < 0)
    detail::throw_error(dataset.where(), "cannot select a block");
  selection.memory_space = detail::own(H5Screate_simple(static_cast<int>(block.size()), block.data(), nullptr),
                                       dataset.where(), "cannot create the memory dataspace");
  return selection;
}

struct StoredType {
  H5T_class_t type_class;
  size_t size;
  H5T_sign_t sign;
};

StoredType stored_type(const Dataset& dataset) {
  Object type = detail::own(H5Dget_type(dataset.id()), dataset.where(), "cannot read the element type");
  const H5T_class_t type_class = H5Tget_class(type.id());
  return {type_class, H5Tget_size(type.id()), type_class == H5T_INTEGER ? H5Tget_sign(type.id()) : H5T_SGN_ERROR};
}

// A chunk of a damaged file may declare billions of elements: HDF5 would allocate its buffer before reading it.
constexpr uint64_t kMaxChunkBytes = uint64_t{256} << 20;

// Before HDF5 reads a dataset of an untrusted file: numbers only (no variable-length, reference or compound
// elements, whose conversions read the global heap or nested types), chunks of a sane size, and only the filters our
// writers use (HDF5's decoders of the others are not meant for hostile input).
void check_readable_storage(const Dataset& dataset) {
  const StoredType type = stored_type(dataset);
  if ((type.type_class != H5T_INTEGER && type.type_class != H5T_FLOAT) || type.size == 0 || type.size > 8)
    throw InputError(fmt::format("{}: stores {} elements, not numbers", dataset.where(), dataset.stored_type_name()));
  Object plist = detail::own(H5Dget_create_plist(dataset.id()), dataset.where(), "cannot read the creation properties");
  if (H5Pget_layout(plist.id()) == H5D_CHUNKED) {
    uint64_t bytes = type.size;
    for (int64_t extent : dataset.chunk())
      if (extent <= 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(extent), &bytes) || bytes > kMaxChunkBytes)
        throw InputError(fmt::format("{}: chunks of {} are larger than {} MiB (a damaged file?)", dataset.where(),
                                     shape_str(dataset.chunk()), kMaxChunkBytes >> 20));
  }
  const int filters = H5Pget_nfilters(plist.id());
  if (filters < 0) detail::throw_error(dataset.where(), "cannot read the filters");
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    size_t values = 0;
    char name[64] = {0};
    const H5Z_filter_t filter = H5Pget_filter2(plist.id(), static_cast<unsigned>(i), &flags, &values, nullptr,
                                               sizeof name, name, &config);
    if (filter != H5Z_FILTER_DEFLATE && filter != H5Z_FILTER_SHUFFLE && filter != H5Z_FILTER_FLETCHER32) {
      H5Eclear2(H5E_DEFAULT);
      throw InputError(fmt::format("{}: compressed with HDF5 filter {} ('{}'); veomni reads deflate, shuffle and "
                                   "fletcher32 only",
                                   dataset.where(), static_cast<int>(filter), name));
    }
  }
}

}  // namespace

Shape Dataset::shape() const {
  auto guard = detail::lock();
  Object space = detail::own(H5Dget_space(id_), where_, "cannot read the dataspace");
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) detail::throw_error(where_, "cannot read the rank");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr) < 0)
    detail::throw_error(where_, "cannot read the extent");
  return Shape(dims.begin(), dims.end());
}

Shape Dataset::chunk() const {
  auto guard = detail::lock();
  Object plist = detail::own(H5Dget_create_plist(id_), where_, "cannot read the creation properties");
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
  const std::vector<hsize_t> dims = block_dims(shape);
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
  check_readable_storage(*this);
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
