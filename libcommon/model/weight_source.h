// Where HuggingFace-named weights come from: an abstract source, an in-memory map, and a HF checkpoint directory.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace veomni {

class HfCheckpointReader;

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool contains(const std::string& name) const = 0;
  // Throws InputError naming the source and the tensor when absent.
  virtual Shape shape(const std::string& name) const = 0;
  virtual DType dtype(const std::string& name) const = 0;
  // A CPU tensor in the stored dtype.
  virtual Tensor read(const std::string& name) const = 0;
  // The tensor into `destination`: a CPU tensor of its dtype and element count (a loader's reused buffer, or the
  // parameter itself), so that no new memory is touched; the default reads and copies.
  virtual void read_into(const std::string& name, Tensor& destination) const { destination.copy_from(read(name)); }
  // Rows [begin, end) along dim 0 (an expert-parallel slice); the default reads the whole tensor and slices it.
  virtual Tensor read_rows(const std::string& name, int64_t begin, int64_t end) const;
  // Names the source in error messages (a path, "in-memory weights", ...).
  virtual std::string origin() const = 0;
  // Names the file holding tensor `name` in error messages (the source itself unless it has several files).
  virtual std::string file_of(const std::string& /*name*/) const { return origin(); }
};

// Tensors held in memory under their HF names (tests, conversions).
class TensorMapSource final : public WeightSource {
 public:
  explicit TensorMapSource(std::map<std::string, Tensor> tensors, std::string origin = "in-memory weights")
      : tensors_(std::move(tensors)), origin_(std::move(origin)) {}

  bool contains(const std::string& name) const override { return tensors_.count(name) != 0; }
  Shape shape(const std::string& name) const override { return get(name).shape(); }
  DType dtype(const std::string& name) const override { return get(name).dtype(); }
  Tensor read(const std::string& name) const override { return get(name).to(Device::cpu()); }
  std::string origin() const override { return origin_; }

 private:
  const Tensor& get(const std::string& name) const;

  std::map<std::string, Tensor> tensors_;
  std::string origin_;
};

// A HuggingFace model directory (or one .safetensors file) read through io/hf_checkpoint.h.
class HfCheckpointSource final : public WeightSource {
 public:
  explicit HfCheckpointSource(const std::string& dir_or_file);
  ~HfCheckpointSource() override;

  bool contains(const std::string& name) const override;
  Shape shape(const std::string& name) const override;
  DType dtype(const std::string& name) const override;
  Tensor read(const std::string& name) const override;
  void read_into(const std::string& name, Tensor& destination) const override;
  Tensor read_rows(const std::string& name, int64_t begin, int64_t end) const override;
  std::string origin() const override;
  std::string file_of(const std::string& name) const override;

 private:
  std::unique_ptr<HfCheckpointReader> reader_;
};

}  // namespace veomni
