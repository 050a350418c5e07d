// The datasets a run trains on: data.train_path alone, or the sources of data.datasets read as one concatenated
// index space (source 0's samples first). Sample indices in batch plans are indices of that space.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset_reader.h"
#include "data/mix_plan.h"
#include "train/data_sources.h"
#include "train/train_config.h"

namespace veomni {

class TrainSources {
 public:
  // Opens every dataset. With data.datasets every source must be the same kind as the first (dataset kind and key
  // schema): an InputError names the file that differs and both key lists.
  explicit TrainSources(const DataArgs& data);

  // True for data.datasets (even with a single entry) or VeOmni's multisource file in data.train_path: sources are
  // named and mixed by weight.
  bool mixed() const { return mixed_; }
  size_t size() const { return specs_.size(); }
  const DataSourceSpec& spec(size_t source) const { return specs_[source]; }
  const DatasetReader& reader(size_t source) const { return *readers_[source]; }
  // The first source: what key checks read (every source has its keys).
  const DatasetReader& first() const { return *readers_.front(); }

  int64_t num_samples() const { return first_index_.back(); }
  // Tokens of each sample of the concatenated space.
  std::vector<int64_t> lengths() const;
  // The mix the batch plan draws from (empty for data.train_path).
  std::vector<MixSource> mix() const;
  size_t source_of(int64_t index) const;
  int64_t local_index(int64_t index) const { return index - first_index_[source_of(index)]; }
  Sample read(int64_t index) const;
  int64_t sequence_length(int64_t index) const;
  // "<path> sample <local index>", for messages.
  std::string context(int64_t index) const;
  // "a.h5 (math, weight 0.7, 1000 samples), b.h5 (...)" or the one path.
  std::string describe() const;

 private:
  void check_same_kind(size_t source) const;

  bool mixed_ = false;
  std::vector<DataSourceSpec> specs_;
  std::vector<std::unique_ptr<DatasetReader>> readers_;
  std::vector<int64_t> first_index_;  // size() + 1 entries
};

}  // namespace veomni
