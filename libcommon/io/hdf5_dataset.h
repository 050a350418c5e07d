// RAII HDF5 dataset: shape, chunked/compressed creation layout, hyperslab reads and writes of typed elements.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/hdf5_object.h"

namespace veomni::h5 {

inline constexpr int64_t kUnlimited = -1;

// How a new dataset is laid out in the file.
struct DatasetLayout {
  DType dtype = DType::F32;  // bf16/f16 are stored as u16 bits, bool as u8 (HDF5 has no such types)
  Shape shape;               // initial extent
  Shape max_shape;           // per axis: a size or kUnlimited; empty = same as shape
  Shape chunk;               // chunk extent per axis; empty = contiguous (then no compression either)
  int deflate_level = 0;     // 0 = no compression, 1..9 gzip
  bool shuffle = false;      // byte shuffle before deflate (helps integers and floats compress)
  bool checksum = false;     // fletcher32 per chunk: corrupt bytes are reported instead of read
};

class Dataset : public Object {
 public:
  using Object::Object;

  Shape shape() const;
  // Chunk extent per axis (empty for contiguous storage).
  Shape chunk() const;
  // True when the stored element type holds `dtype`'s storage type exactly (same class, size and sign).
  bool stores(DType dtype) const;
  // The stored element type as a short name for messages ("u16", "f64", "string", ...).
  std::string stored_type_name() const;

  // Grows (or shrinks) an extendible dataset.
  void resize(const Shape& shape);
  // Copies a dense C-order block of `count` elements at `offset` between memory and the file.
  void write(const void* data, DType dtype, const Shape& offset, const Shape& count);
  void read(void* data, DType dtype, const Shape& offset, const Shape& count) const;
  // Reads the whole dataset into a new tensor of `dtype`.
  Tensor read_all(DType dtype) const;
};

}  // namespace veomni::h5
