// Tensor storage, views, copies and conversions.
#include "core/tensor.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "core/float_element.h"

namespace veomni {

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    VEOMNI_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
    VEOMNI_CHECK(!__builtin_mul_overflow(n, d, &n), "shape {} has more elements than 64 bits count", shape_str(shape));
  }
  return n;
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  data_ = device_allocator(device.type).allocate(bytes, device.index);
}

Storage::Storage(void* external, size_t bytes, Device device)
    : data_(external), bytes_(bytes), device_(device), owned_(false) {}

Storage::~Storage() {
  if (owned_ && data_) device_allocator(device_.type).deallocate(data_, bytes_, device_.index);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  size_t bytes = 0;
  VEOMNI_CHECK(!__builtin_mul_overflow(static_cast<size_t>(shape_numel(shape)), dtype_size(dtype), &bytes),
               "shape {} of {} has more bytes than 64 bits count", shape_str(shape), dtype_name(dtype));
  t.storage_ = std::make_shared<Storage>(bytes, device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(data, static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  return t;
}

int64_t Tensor::dim(int axis) const {
  const int n = ndim();
  const int a = axis < 0 ? axis + n : axis;
  VEOMNI_CHECK(a >= 0 && a < n, "axis {} out of range for tensor {}", axis, describe());
  return shape_[a];
}

void* Tensor::raw_data() const {
  VEOMNI_CHECK(storage_, "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

Tensor Tensor::view(const Shape& shape) const {
  Shape resolved = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      VEOMNI_CHECK(infer < 0, "view {} has more than one -1", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= resolved[i];
    }
  }
  if (infer >= 0) {
    VEOMNI_CHECK(known > 0 && numel() % known == 0, "cannot view {} as {}", describe(), shape_str(shape));
    resolved[infer] = numel() / known;
  }
  VEOMNI_CHECK(shape_numel(resolved) == numel(), "cannot view {} as {}", describe(), shape_str(shape));
  Tensor t = *this;
  t.shape_ = resolved;
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  VEOMNI_CHECK(ndim() >= 1, "slice of a scalar tensor");
  VEOMNI_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice [{}, {}) out of range for {}", begin, end,
               describe());
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.offset_bytes_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::join_rows(const std::vector<Tensor>& parts) {
  if (parts.empty() || !parts[0].defined() || parts[0].ndim() < 1) return {};
  const Tensor& first = parts[0];
  Tensor joined = first;
  size_t next_offset = first.offset_bytes_ + first.nbytes();
  for (size_t i = 1; i < parts.size(); ++i) {
    const Tensor& part = parts[i];
    const bool same_rows = part.ndim() == first.ndim() &&
                           std::equal(part.shape_.begin() + 1, part.shape_.end(), first.shape_.begin() + 1);
    if (part.storage_ != first.storage_ || part.dtype_ != first.dtype_ || part.offset_bytes_ != next_offset ||
        !same_rows)
      return {};
    joined.shape_[0] += part.shape_[0];
    next_offset += part.nbytes();
  }
  return joined;
}

Tensor Tensor::select(int64_t index) const {
  Tensor t = slice(index, index + 1);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::clone() const { return to(device()); }

Tensor Tensor::to(Device target) const {
  Tensor t = empty(shape_, dtype_, target);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  VEOMNI_CHECK(src.numel() == numel() && src.dtype() == dtype_, "copy {} into {}", src.describe(), describe());
  const Device dst_device = device();
  const Device src_device = src.device();
  DeviceAllocator& alloc =
      device_allocator(dst_device.is_cuda() || src_device.is_cuda() ? DeviceType::CUDA : DeviceType::CPU);
  alloc.copy(raw_data(), dst_device, src.raw_data(), src_device, nbytes());
}

void Tensor::zero_() {
  if (numel() == 0) return;
  device_allocator(device().type).fill_zero(raw_data(), nbytes(), device().index);
}

double Tensor::item_as_double(int64_t i) const {
  VEOMNI_CHECK(is_cpu(), "item_as_double on {}", describe());
  VEOMNI_CHECK(i >= 0 && i < numel(), "index {} out of range for {}", i, describe());
  const void* p = raw_data();
  switch (dtype_) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::BF16: return bf16_to_float(static_cast<const bf16*>(p)[i]);
    case DType::F16: return f16_to_float(static_cast<const f16*>(p)[i]);
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::U8: return static_cast<const uint8_t*>(p)[i];
    case DType::Bool: return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
  }
  return 0;
}

std::vector<float> Tensor::to_float_vector() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = static_cast<float>(item_as_double(i));
  return out;
}

namespace {

// out[i] = in[i] between floating types, through float: what the generic loop computes through double (every f16
// and bf16 value is a float, and a float's trip through double is exact), without its per-element dispatch.
template <typename From, typename To>
void convert_floats(const void* in, void* out, int64_t n) {
  const From* src = static_cast<const From*>(in);
  To* dst = static_cast<To*>(out);
  for (int64_t i = 0; i < n; ++i) dst[i] = from_float<To>(to_float(src[i]));
}

template <typename From>
bool convert_from_float_type(const void* in, DType to, void* out, int64_t n) {
  switch (to) {
    case DType::F32: convert_floats<From, float>(in, out, n); return true;
    case DType::BF16: convert_floats<From, bf16>(in, out, n); return true;
    case DType::F16: convert_floats<From, f16>(in, out, n); return true;
    default: return false;
  }
}

// The floating-to-floating conversions (loading weights, checkpoint moments); false for any other pair.
bool convert_float_types(const void* in, DType from, void* out, DType to, int64_t n) {
  switch (from) {
    case DType::F32: return convert_from_float_type<float>(in, to, out, n);
    case DType::BF16: return convert_from_float_type<bf16>(in, to, out, n);
    case DType::F16: return convert_from_float_type<f16>(in, to, out, n);
    default: return false;
  }
}

}  // namespace

Tensor Tensor::to_dtype(DType target) const {
  VEOMNI_CHECK(is_cpu(), "to_dtype on {} (convert on the device backend)", describe());
  if (target == dtype_) return clone();
  Tensor out = empty(shape_, target);
  out.convert_from(*this);
  return out;
}

void Tensor::convert_from(const Tensor& src) {
  VEOMNI_CHECK(is_cpu() && src.is_cpu() && numel() == src.numel(), "convert {} into {} (CPU only, equal sizes)",
               src.describe(), describe());
  const int64_t n = numel();
  void* q = raw_data();
  if (src.dtype() == dtype_) {
    if (n > 0) std::memcpy(q, src.raw_data(), nbytes());
    return;
  }
  if (convert_float_types(src.raw_data(), src.dtype(), q, dtype_, n)) return;
  for (int64_t i = 0; i < n; ++i) {
    const double v = src.item_as_double(i);
    switch (dtype_) {
      case DType::F32: static_cast<float*>(q)[i] = static_cast<float>(v); break;
      case DType::BF16: static_cast<bf16*>(q)[i] = float_to_bf16(static_cast<float>(v)); break;
      case DType::F16: static_cast<f16*>(q)[i] = float_to_f16(static_cast<float>(v)); break;
      case DType::I32: static_cast<int32_t*>(q)[i] = static_cast<int32_t>(v); break;
      case DType::I64: static_cast<int64_t*>(q)[i] = static_cast<int64_t>(v); break;
      case DType::U8: static_cast<uint8_t*>(q)[i] = static_cast<uint8_t>(v); break;
      case DType::Bool: static_cast<uint8_t*>(q)[i] = v != 0.0; break;
    }
  }
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_str(shape_), device().str());
}

}  // namespace veomni
