// Chunk-aligned streaming writes of one dataset key.
#include "data/dataset_column.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace veomni {

namespace {

size_t product(const Shape& shape, size_t begin, size_t end) {
  size_t n = 1;
  for (size_t axis = begin; axis < end; ++axis) n *= static_cast<size_t>(shape[axis]);
  return n;
}

}  // namespace

ColumnAppender::ColumnAppender(h5::Dataset dataset, DType dtype, const Shape& shape, int var_axis, int64_t chunk_length)
    : dataset_(std::move(dataset)), dtype_(dtype), shape_(shape), var_axis_(var_axis), chunk_length_(chunk_length) {
  const auto axis = static_cast<size_t>(var_axis);
  outer_ = product(shape, 0, axis);
  inner_bytes_ = product(shape, axis + 1, shape.size()) * dtype_size(dtype);
  buffers_.resize(outer_);
}

void ColumnAppender::append(const void* block, int64_t length) {
  const size_t step_bytes = static_cast<size_t>(length) * inner_bytes_;
  const auto* bytes = static_cast<const uint8_t*>(block);
  for (size_t o = 0; o < outer_; ++o)
    buffers_[o].insert(buffers_[o].end(), bytes + o * step_bytes, bytes + (o + 1) * step_bytes);
  pending_ += length;
  if (pending_ >= chunk_length_) write_pending(pending_ / chunk_length_ * chunk_length_);
}

void ColumnAppender::finish() {
  write_pending(pending_);
  dataset_.close();
}

void ColumnAppender::write_pending(int64_t count) {
  if (count == 0) return;
  const size_t take = static_cast<size_t>(count) * inner_bytes_;
  std::vector<uint8_t> joined;
  const void* source = buffers_[0].data();
  if (outer_ > 1) {
    joined.reserve(take * outer_);
    for (const auto& buffer : buffers_)
      joined.insert(joined.end(), buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(take));
    source = joined.data();
  }
  Shape extent = shape_, offset(shape_.size(), 0), count_shape = shape_;
  extent[static_cast<size_t>(var_axis_)] = written_ + count;
  offset[static_cast<size_t>(var_axis_)] = written_;
  count_shape[static_cast<size_t>(var_axis_)] = count;
  dataset_.resize(extent);
  dataset_.write(source, dtype_, offset, count_shape);
  for (auto& buffer : buffers_) buffer.erase(buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(take));
  written_ += count;
  pending_ -= count;
}

int64_t chunk_length_for(const Shape& shape, int var_axis, DType dtype, size_t chunk_bytes) {
  size_t step_bytes = dtype_size(dtype);
  for (size_t axis = 0; axis < shape.size(); ++axis)
    if (static_cast<int>(axis) != var_axis) step_bytes *= static_cast<size_t>(shape[axis]);
  return std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / std::max<size_t>(step_bytes, 1)));
}

}  // namespace veomni
