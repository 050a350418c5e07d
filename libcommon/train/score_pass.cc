// A scoring micro-batch: collate, forward through the body and the head of the scores asked for, fill the records.
#include "train/score_pass.h"

#include "core/error.h"
#include "data/dataset_objective_keys.h"

namespace veomni {

void check_score_dataset(const DatasetReader& reader, const std::string& path, ScoreWhat what, bool multimodal_model) {
  const std::string purpose = fmt::format("veomni-score --what {}", score_what_name(what));
  require_dataset_keys(reader, {"input_ids"}, purpose);
  if (what != ScoreWhat::Reward) require_dataset_keys(reader, {"labels"}, purpose);
  VEOMNI_INPUT_CHECK(multimodal_model || reader.info().kind == "text",
                     "{}: the dataset is of kind '{}', which a text model cannot read (hint: score it with the "
                     "multimodal model it was made for)",
                     path, reader.info().kind);
}

void score_packed_samples(TrainModel& model, ScoreWhat what, const std::vector<TokenSample>& samples,
                          std::vector<ScoreSlot> slots, const CollateOptions& collate, int64_t sp_rank,
                          std::vector<double>& buffer) {
  VEOMNI_CHECK(slots.empty() || slots.size() == samples.size(), "{} slots for {} samples", slots.size(),
               samples.size());
  for (size_t k = 0; k < slots.size(); ++k) slots[k].chosen_length = samples[k].chosen_length;
  MultimodalBatch batch;
  batch.text = slice_for_sp_rank(pack_samples(samples, collate), collate.sp_size, sp_rank);
  score_batch(model, what, batch, slots, sp_rank, buffer);
}

void score_batch(TrainModel& model, ScoreWhat what, const MultimodalBatch& batch, const std::vector<ScoreSlot>& slots,
                 int64_t sp_rank, std::vector<double>& buffer) {
  BodyOutput body = model.body().forward(batch, false);
  const Tensor values = what == ScoreWhat::Logprobs
                            ? model.lm_head().logprobs_forward(body.hidden, batch.text.target_ids, false).logprobs
                            : model.value_head().forward(body.hidden, false).values;
  fill_score_records(what, slots, batch.text, values, sp_rank == 0, buffer);
}

}  // namespace veomni
