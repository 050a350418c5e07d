// The scores of one micro-batch as flat records: each rank writes the entries its sequence-parallel slice holds
// (zero elsewhere), so that a sum over the world assembles every sample's record exactly; and those records as the
// output keys of veomni-score (man veomni-score(1), veomni-data(5)).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/batch.h"
#include "data/sample.h"
#include "train/train_model.h"

namespace veomni {

// What veomni-score computes: label log-probs with the LM head, a reward per sequence at its last token with a
// reward model's head, or a value per token with a value model's head.
enum class ScoreWhat { Logprobs, Reward, Value };
// "logprobs", "reward", "value" and back (InputError naming the flag otherwise).
const char* score_what_name(ScoreWhat what);
ScoreWhat score_what_from_name(const std::string& name);
ModelHead score_head(ScoreWhat what);

// One sample of a micro-batch: where its tokens sit in the packed row, and where its record sits in a buffer.
struct ScoreSlot {
  int64_t index = 0;          // in the dataset
  int64_t length = 0;         // tokens
  int64_t chosen_length = 0;  // > 0: a preference pair
  int64_t row_offset = 0;     // its first token in the packed row
  int64_t record_offset = 0;  // its record in the buffer
};

// Doubles in the record of a sample of `length` tokens. Logprobs and Value: [label tokens, chosen_length, one value
// per token aligned with labels (entry i belongs to predicting labels[i]; 0 where nothing is predicted)]. Reward:
// [reward (of the chosen sequence for a pair), reward of the rejected sequence (0 for a plain sample)].
int64_t score_record_size(ScoreWhat what, int64_t length);

// Fills this rank's entries of the slots' records: `values` f32 [S_local] are the head's outputs over the slice
// `text` (label log-probs for Logprobs, the value head's values otherwise). Entries of other slices stay untouched;
// entries that belong to the whole sample (chosen_length) are written by SP rank 0 only (writes_shared).
void fill_score_records(ScoreWhat what, const std::vector<ScoreSlot>& slots, const Batch& text, const Tensor& values,
                        bool writes_shared, std::vector<double>& buffer);

// What the records say over the whole run (the summary line).
struct ScoreTotals {
  int64_t samples = 0;
  int64_t tokens = 0;
  int64_t label_tokens = 0;
  double sum_logps = 0;  // Logprobs: sum of every label token's log-prob
};

// The output keys of one sample from its assembled record (man veomni-score(1)): Logprobs writes logps (pairs also
// chosen_logps and rejected_logps), token_logprobs and num_label_tokens, or with as_reference the `input` keys plus
// ref_chosen_logps / ref_rejected_logps (pairs) or ref_log_probs (other samples); Reward writes reward (pairs:
// chosen_reward, rejected_reward); Value writes values and num_label_tokens. Adds the sample to `totals`.
Sample score_output_sample(ScoreWhat what, const double* record, int64_t length, bool pair, bool as_reference,
                           Sample input, ScoreTotals& totals);

}  // namespace veomni
