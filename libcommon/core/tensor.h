// Tensor: dtype, shape, device and shared storage; always contiguous (views are reshapes and dim-0 slices).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace veomni {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);
int64_t shape_numel(const Shape& shape);

// Owns raw bytes on one device; freed when the last Tensor that views it goes away.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  // Wraps memory owned elsewhere (not freed here).
  Storage(void* external, size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool owned_ = true;
};

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // Wraps caller-owned memory: the caller keeps it alive as long as the tensor.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device = Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <typename T>
  static Tensor full(const Shape& shape, T value);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int axis) const;  // negative axes count from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_cpu() const { return device().is_cpu(); }

  void* raw_data() const;
  template <typename T>
  T* data() const {
    VEOMNI_CHECK(DTypeOf<T>::value == dtype_, "tensor holds {}, accessed as {}", dtype_name(dtype_),
                 dtype_name(DTypeOf<T>::value));
    return static_cast<T*>(raw_data());
  }

  // Same storage, new shape with the same element count (one -1 is inferred).
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along dim 0, sharing storage.
  Tensor slice(int64_t begin, int64_t end) const;
  // Row i along dim 0 with that dim dropped.
  Tensor select(int64_t index) const;
  // The parts as one tensor of their rows, [sum of dim 0, ...], sharing their storage, when they lie one right after
  // the other in one storage with one dtype and the same trailing dims (rows of one buffer); else undefined.
  static Tensor join_rows(const std::vector<Tensor>& parts);

  Tensor clone() const;
  Tensor to(Device device) const;
  // Converts element type (CPU only); same dtype returns a clone.
  Tensor to_dtype(DType dtype) const;
  // This CPU tensor's elements = src's (CPU, the same element count, any dtype) converted as to_dtype converts them.
  void convert_from(const Tensor& src);
  void copy_from(const Tensor& src);  // shapes (numel) and dtypes must match
  void zero_();
  // Element i as a double, whatever the dtype (CPU only; slow; for tests and small reads).
  double item_as_double(int64_t flat_index = 0) const;
  std::vector<float> to_float_vector() const;  // CPU only

  std::string describe() const;  // "f32[2, 3] cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  VEOMNI_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "{} values for shape {}", values.size(),
               shape_str(shape));
  Tensor t = empty(shape, DTypeOf<T>::value);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
Tensor Tensor::full(const Shape& shape, T value) {
  Tensor t = empty(shape, DTypeOf<T>::value);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = value;
  return t;
}

}  // namespace veomni
