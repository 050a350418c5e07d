// Opening the sources, checking they are of one kind, and mapping concatenated indices to (source, sample).
#include "train/train_sources.h"

#include <spdlog/fmt/ranges.h>

#include <algorithm>

#include "core/error.h"

namespace veomni {

namespace {

std::vector<std::string> key_descriptions(const DatasetReader& reader) {
  std::vector<std::string> keys;
  for (const KeyInfo& key : reader.keys()) keys.push_back(key.name + " " + key.describe());
  return keys;
}

}  // namespace

TrainSources::TrainSources(const DataArgs& data)
    : mixed_(!data.datasets.empty() || is_multisource_file(data.train_path)) {
  if (!data.datasets.empty()) specs_ = parse_data_sources(data.datasets);
  else if (mixed_) specs_ = read_multisource_file(data.train_path);
  else specs_ = {{data.train_path, 1.0, ""}};
  first_index_.push_back(0);
  for (size_t s = 0; s < specs_.size(); ++s) {
    readers_.push_back(std::make_unique<DatasetReader>(specs_[s].path));
    first_index_.push_back(first_index_.back() + readers_.back()->num_samples());
    check_same_kind(s);
    VEOMNI_INPUT_CHECK(specs_[s].weight == 0 || readers_.back()->num_samples() > 0,
                       "{}: data.datasets[{}] ({}) has weight {} but no sample", specs_[s].path, s, specs_[s].name,
                       specs_[s].weight);
  }
}

void TrainSources::check_same_kind(size_t source) const {
  if (source == 0) return;
  const DatasetReader& first = *readers_.front();
  const DatasetReader& other = *readers_[source];
  VEOMNI_INPUT_CHECK(other.info().kind == first.info().kind,
                     "{}: data.datasets[{}] is a '{}' dataset but data.datasets[0] ({}) is '{}': every source must be "
                     "the same kind of dataset",
                     specs_[source].path, source, other.info().kind, specs_[0].path, first.info().kind);
  VEOMNI_INPUT_CHECK(other.keys() == first.keys(),
                     "{}: data.datasets[{}] has keys [{}] but data.datasets[0] ({}) has [{}]: every source must be the "
                     "same kind of dataset (the same objective keys and modality; hint: preprocess them alike)",
                     specs_[source].path, source, fmt::join(key_descriptions(other), ", "), specs_[0].path,
                     fmt::join(key_descriptions(first), ", "));
}

std::vector<int64_t> TrainSources::lengths() const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples()));
  for (const auto& reader : readers_)
    for (int64_t i = 0; i < reader->num_samples(); ++i) out.push_back(reader->sequence_length(i));
  return out;
}

std::vector<MixSource> TrainSources::mix() const {
  std::vector<MixSource> mix;
  if (!mixed_) return mix;
  for (size_t s = 0; s < specs_.size(); ++s) mix.push_back({readers_[s]->num_samples(), specs_[s].weight});
  return mix;
}

size_t TrainSources::source_of(int64_t index) const {
  VEOMNI_CHECK(index >= 0 && index < num_samples(), "sample {} of {}", index, num_samples());
  const auto after = std::upper_bound(first_index_.begin(), first_index_.end(), index);
  return static_cast<size_t>(after - first_index_.begin()) - 1;
}

Sample TrainSources::read(int64_t index) const { return readers_[source_of(index)]->read(local_index(index)); }

int64_t TrainSources::sequence_length(int64_t index) const {
  return readers_[source_of(index)]->sequence_length(local_index(index));
}

std::string TrainSources::context(int64_t index) const {
  return fmt::format("{} sample {}", specs_[source_of(index)].path, local_index(index));
}

std::string TrainSources::describe() const {
  if (!mixed_) return specs_.front().path;
  std::vector<std::string> parts;
  for (size_t s = 0; s < specs_.size(); ++s)
    parts.push_back(fmt::format("{} ({}, weight {:g}, {} samples)", specs_[s].path, specs_[s].name, specs_[s].weight,
                                readers_[s]->num_samples()));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace veomni
