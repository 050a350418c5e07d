// Streams one key's values into a growing HDF5 dataset along its variable axis, a whole chunk at a time.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/hdf5_dataset.h"

namespace veomni {

// Buffers appended blocks and writes only whole chunks (so HDF5 never re-reads and re-compresses a chunk);
// memory stays at about one chunk plus the largest block. The dataset's extent on the variable axis grows.
class ColumnAppender {
 public:
  // `shape` has -1 on `var_axis`; `chunk_length` is the chunk extent along that axis.
  ColumnAppender(h5::Dataset dataset, DType dtype, const Shape& shape, int var_axis, int64_t chunk_length);

  // A dense C-order block whose variable axis has `length` entries (the other axes as in `shape`).
  void append(const void* block, int64_t length);
  // Writes what is buffered, a partial last chunk included, and closes the dataset.
  void finish();
  int64_t length() const { return written_ + pending_; }

 private:
  void write_pending(int64_t count);

  h5::Dataset dataset_;
  DType dtype_;
  Shape shape_;
  int var_axis_;
  int64_t chunk_length_;
  size_t outer_ = 1;                           // elements before the variable axis (product of those dims)
  size_t inner_bytes_ = 0;                     // bytes of one step along the variable axis within one outer index
  std::vector<std::vector<uint8_t>> buffers_;  // one per outer index: pending_ steps each
  int64_t pending_ = 0;
  int64_t written_ = 0;
};

// Chunk extent along the variable axis for about `chunk_bytes` per chunk: large enough that tiny keys
// (offsets, grids) are not split into thousands of chunks, small enough that reading one sample
// decompresses little more than the sample.
int64_t chunk_length_for(const Shape& shape, int var_axis, DType dtype, size_t chunk_bytes);

}  // namespace veomni
