// Score records: a rank's slice of the per-token values mapped onto its samples, and records turned into keys.
#include "train/score_records.h"

#include "core/error.h"
#include "data/dataset_objective_keys.h"

namespace veomni {

namespace {

constexpr int64_t kRecordHeader = 2;  // label tokens, chosen_length

Tensor f32_values(const double* values, int64_t count) {
  Tensor out = Tensor::empty({count}, DType::F32);
  float* o = out.data<float>();
  for (int64_t i = 0; i < count; ++i) o[i] = static_cast<float>(values[i]);
  return out;
}

Tensor f32_scalar(double value) { return f32_values(&value, 1); }

Tensor i64_scalar(int64_t value) { return Tensor::from_vector(std::vector<int64_t>{value}, {1}); }

// The per-token values of a slot: entry j belongs to predicting labels[j], which packed row position
// row_offset + j - 1 predicts (the targets are the labels shifted by one).
void fill_token_values(const ScoreSlot& slot, const Batch& text, const float* values, const int64_t* targets,
                       double* record) {
  const int64_t local = text.input_ids.numel();
  for (int64_t j = 1; j < slot.length; ++j) {
    const int64_t p = slot.row_offset + j - 1 - text.sp_offset;
    if (p < 0 || p >= local || targets[p] == kIgnoreIndex) continue;
    record[kRecordHeader + j] = static_cast<double>(values[p]);
    record[0] += 1.0;
  }
}

// The value at a sequence's last token, when this slice holds it.
void fill_last_value(int64_t row_position, const Batch& text, const float* values, double* out) {
  const int64_t p = row_position - text.sp_offset;
  if (p >= 0 && p < text.input_ids.numel()) *out = static_cast<double>(values[p]);
}

}  // namespace

const char* score_what_name(ScoreWhat what) {
  switch (what) {
    case ScoreWhat::Logprobs: return "logprobs";
    case ScoreWhat::Reward: return "reward";
    case ScoreWhat::Value: return "value";
  }
  return "logprobs";
}

ScoreWhat score_what_from_name(const std::string& name) {
  for (ScoreWhat what : {ScoreWhat::Logprobs, ScoreWhat::Reward, ScoreWhat::Value})
    if (name == score_what_name(what)) return what;
  throw InputError(fmt::format("--what '{}' is not one of logprobs, reward, value", name));
}

ModelHead score_head(ScoreWhat what) {
  switch (what) {
    case ScoreWhat::Logprobs: return ModelHead::LanguageModel;
    case ScoreWhat::Reward: return ModelHead::SequenceReward;
    case ScoreWhat::Value: return ModelHead::TokenValue;
  }
  return ModelHead::LanguageModel;
}

int64_t score_record_size(ScoreWhat what, int64_t length) {
  return what == ScoreWhat::Reward ? 2 : kRecordHeader + length;
}

void fill_score_records(ScoreWhat what, const std::vector<ScoreSlot>& slots, const Batch& text, const Tensor& values,
                        bool writes_shared, std::vector<double>& buffer) {
  VEOMNI_CHECK(values.dtype() == DType::F32 && values.ndim() == 1 && values.numel() == text.input_ids.numel(),
               "per-token scores {} for a slice of {} tokens", values.describe(), text.input_ids.numel());
  const Tensor host_values = values.is_cpu() ? values : values.to(Device::cpu());
  const Tensor host_targets = text.target_ids.is_cpu() ? text.target_ids : text.target_ids.to(Device::cpu());
  const float* v = host_values.data<float>();
  const int64_t* t = host_targets.data<int64_t>();
  for (const ScoreSlot& slot : slots) {
    VEOMNI_CHECK(slot.record_offset + score_record_size(what, slot.length) <= static_cast<int64_t>(buffer.size()),
                 "record of sample {} beyond the buffer", slot.index);
    double* record = buffer.data() + slot.record_offset;
    if (what == ScoreWhat::Reward) {
      const int64_t chosen_end = slot.chosen_length > 0 ? slot.chosen_length : slot.length;
      fill_last_value(slot.row_offset + chosen_end - 1, text, v, &record[0]);
      if (slot.chosen_length > 0) fill_last_value(slot.row_offset + slot.length - 1, text, v, &record[1]);
      continue;
    }
    if (writes_shared) record[1] = static_cast<double>(slot.chosen_length);
    fill_token_values(slot, text, v, t, record);
  }
}

Sample score_output_sample(ScoreWhat what, const double* record, int64_t length, bool pair, bool as_reference,
                           Sample input, ScoreTotals& totals) {
  ++totals.samples;
  totals.tokens += length;
  Sample out;
  if (what == ScoreWhat::Reward) {
    if (pair) {
      out["chosen_reward"] = f32_scalar(record[0]);
      out["rejected_reward"] = f32_scalar(record[1]);
    } else {
      out["reward"] = f32_scalar(record[0]);
    }
    return out;
  }
  const auto label_tokens = static_cast<int64_t>(record[0]);
  const auto chosen_length = static_cast<int64_t>(record[1]);
  const double* token_values = record + kRecordHeader;
  totals.label_tokens += label_tokens;
  if (what == ScoreWhat::Value) {
    out["values"] = f32_values(token_values, length);
    out["num_label_tokens"] = i64_scalar(label_tokens);
    return out;
  }
  double chosen = 0, rejected = 0;
  for (int64_t j = 0; j < length; ++j) (pair && j >= chosen_length ? rejected : chosen) += token_values[j];
  totals.sum_logps += chosen + rejected;
  if (as_reference) {
    out = std::move(input);
    if (pair) {
      out[kRefChosenLogpsKey] = f32_scalar(chosen);
      out[kRefRejectedLogpsKey] = f32_scalar(rejected);
    } else {
      out["ref_log_probs"] = f32_values(token_values, length);
    }
    return out;
  }
  out["logps"] = f32_scalar(chosen + rejected);
  if (pair) {
    out["chosen_logps"] = f32_scalar(chosen);
    out["rejected_logps"] = f32_scalar(rejected);
  }
  out["token_logprobs"] = f32_values(token_values, length);
  out["num_label_tokens"] = i64_scalar(label_tokens);
  return out;
}

}  // namespace veomni
