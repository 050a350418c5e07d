// Sample and row assembly from the store, and best-fit-decreasing bin packing.
#include "data/text_preprocess_pack.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "data/batch.h"
#include "data/token_spool.h"

namespace veomni {

SampleStore::SampleStore(std::string spool_directory, size_t buffer_bytes)
    : spool_directory_(std::move(spool_directory)), buffer_bytes_(buffer_bytes) {}

SampleStore::~SampleStore() = default;

void SampleStore::add(const LabeledTokens& tokens) {
  VEOMNI_CHECK(tokens.ids.size() == tokens.trained.size(), "{} ids but {} target flags", tokens.ids.size(),
               tokens.trained.size());
  ids_.insert(ids_.end(), tokens.ids.begin(), tokens.ids.end());
  trained_.insert(trained_.end(), tokens.trained.begin(), tokens.trained.end());
  offsets_.push_back(offsets_.back() + static_cast<int64_t>(tokens.ids.size()));
  trained_tokens_ += tokens.trained_count();
  if (ids_.size() * (sizeof(int32_t) + 1) >= buffer_bytes_) spill();
}

// Whole samples only: a sample is either in the spool or in the buffer, never split.
void SampleStore::spill() {
  if (!id_spool_) {
    id_spool_ = std::make_unique<TokenSpool>(spool_directory_);
    flag_spool_ = std::make_unique<TokenSpool>(spool_directory_);
  }
  id_spool_->append(ids_.data(), ids_.size() * sizeof(int32_t));
  flag_spool_->append(trained_.data(), trained_.size());
  spooled_tokens_ += static_cast<int64_t>(ids_.size());
  ids_.clear();
  trained_.clear();
}

void SampleStore::read_tokens(int64_t index, int32_t* ids, uint8_t* trained) const {
  const int64_t begin = offsets_[index], len = length(index);
  if (begin >= spooled_tokens_) {
    const auto at = static_cast<size_t>(begin - spooled_tokens_);
    std::copy_n(ids_.begin() + static_cast<std::ptrdiff_t>(at), len, ids);
    std::copy_n(trained_.begin() + static_cast<std::ptrdiff_t>(at), len, trained);
    return;
  }
  id_spool_->read(static_cast<uint64_t>(begin) * sizeof(int32_t), ids, static_cast<size_t>(len) * sizeof(int32_t));
  flag_spool_->read(static_cast<uint64_t>(begin), trained, static_cast<size_t>(len));
}

Sample SampleStore::sample(int64_t index) const { return packed_row({index}, length(index), 0); }

LabeledTokens SampleStore::tokens(int64_t index) const {
  LabeledTokens out;
  out.ids.resize(static_cast<size_t>(length(index)));
  out.trained.resize(out.ids.size());
  read_tokens(index, out.ids.data(), out.trained.data());
  return out;
}

Sample SampleStore::packed_row(const std::vector<int64_t>& members, int64_t row_length, int32_t pad_id) const {
  Tensor ids = Tensor::empty({row_length}, DType::I64);
  Tensor labels = Tensor::empty({row_length}, DType::I64);
  Tensor mask = Tensor::empty({row_length}, DType::I64);
  Tensor positions = Tensor::empty({row_length}, DType::I64);
  int64_t* id = ids.data<int64_t>();
  int64_t* label = labels.data<int64_t>();
  int64_t* attend = mask.data<int64_t>();
  int64_t* pos = positions.data<int64_t>();
  int64_t at = 0;
  std::vector<int32_t> member_ids;
  std::vector<uint8_t> member_trained;
  for (size_t k = 0; k < members.size(); ++k) {
    const int64_t len = length(members[k]);
    VEOMNI_CHECK(at + len <= row_length, "row of {} tokens overflows at sample {}", row_length, members[k]);
    member_ids.resize(static_cast<size_t>(len));
    member_trained.resize(static_cast<size_t>(len));
    read_tokens(members[k], member_ids.data(), member_trained.data());
    for (int64_t i = 0; i < len; ++i) {
      const int32_t token = member_ids[static_cast<size_t>(i)];
      id[at + i] = token;
      label[at + i] = member_trained[static_cast<size_t>(i)] ? token : kIgnoreIndex;
      attend[at + i] = 1;
      pos[at + i] = i;
    }
    if (k > 0 && len > 0) label[at] = kIgnoreIndex;
    at += len;
  }
  for (int64_t i = 0; at + i < row_length; ++i) {
    id[at + i] = pad_id;
    label[at + i] = kIgnoreIndex;
    attend[at + i] = 0;
    pos[at + i] = i;
  }
  return Sample{{"attention_mask", mask}, {"input_ids", ids}, {"labels", labels}, {"position_ids", positions}};
}

std::vector<std::vector<int64_t>> pack_best_fit(const SampleStore& store, int64_t row_length) {
  std::vector<int64_t> order(static_cast<size_t>(store.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return store.length(a) > store.length(b); });
  std::vector<std::vector<int64_t>> rows;
  std::set<std::pair<int64_t, int64_t>> open;  // (room left, row index)
  for (int64_t index : order) {
    const int64_t len = store.length(index);
    VEOMNI_CHECK(len <= row_length, "sample {} has {} tokens, more than a row of {}", index, len, row_length);
    auto it = open.lower_bound({len, -1});
    int64_t row = 0, room = 0;
    if (it == open.end()) {
      row = static_cast<int64_t>(rows.size());
      rows.emplace_back();
      room = row_length;
    } else {
      std::tie(room, row) = *it;
      open.erase(it);
    }
    rows[static_cast<size_t>(row)].push_back(index);
    if (room - len > 0) open.insert({room - len, row});
  }
  for (auto& row : rows) std::sort(row.begin(), row.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return rows;
}

}  // namespace veomni
