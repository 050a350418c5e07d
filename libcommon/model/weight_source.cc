// Weight sources: default row slicing, the in-memory map, and the adapter over HfCheckpointReader.
#include "model/weight_source.h"

#include "io/hf_checkpoint.h"

namespace veomni {

Tensor WeightSource::read_rows(const std::string& name, int64_t begin, int64_t end) const {
  return read(name).slice(begin, end).clone();
}

const Tensor& TensorMapSource::get(const std::string& name) const {
  auto it = tensors_.find(name);
  VEOMNI_INPUT_CHECK(it != tensors_.end(), "{}: no tensor named '{}'", origin_, name);
  return it->second;
}

HfCheckpointSource::HfCheckpointSource(const std::string& dir_or_file)
    : reader_(std::make_unique<HfCheckpointReader>(dir_or_file)) {}

HfCheckpointSource::~HfCheckpointSource() = default;

bool HfCheckpointSource::contains(const std::string& name) const { return reader_->contains(name); }

Shape HfCheckpointSource::shape(const std::string& name) const { return reader_->entry(name).shape; }

DType HfCheckpointSource::dtype(const std::string& name) const { return reader_->entry(name).dtype; }

Tensor HfCheckpointSource::read(const std::string& name) const { return reader_->read(name); }

void HfCheckpointSource::read_into(const std::string& name, Tensor& destination) const {
  reader_->read_into(name, destination);
}

Tensor HfCheckpointSource::read_rows(const std::string& name, int64_t begin, int64_t end) const {
  return reader_->read_rows(name, begin, end);
}

std::string HfCheckpointSource::origin() const { return reader_->source(); }

std::string HfCheckpointSource::file_of(const std::string& name) const { return reader_->file_of(name); }

}  // namespace veomni
