// Packing, label shifting and Ulysses slicing of text micro-batches.
#include "data/collator.h"

#include <algorithm>
#include <cstring>

#include "data/dataset_objective_keys.h"

namespace veomni {

namespace {

std::string where(const TokenSample& s) { return s.context.empty() ? std::string("sample") : s.context; }

int64_t sample_length(const TokenSample& s, int64_t max_seq_len) {
  VEOMNI_INPUT_CHECK(s.input_ids.defined() && s.input_ids.ndim() == 1 && s.input_ids.dtype() == DType::I64,
                     "{}: input_ids must be i64 [L], got {}", where(s), s.input_ids.describe());
  return std::min(s.input_ids.dim(0), max_seq_len);
}

// Ids outside the vocabulary mean the data was tokenized for another model: name the sample and the position.
void check_vocabulary(const TokenSample& s, const char* key, const int64_t* ids, int64_t len, int64_t vocab,
                      bool allow_ignore) {
  if (vocab <= 0) return;
  for (int64_t i = 0; i < len; ++i) {
    if (allow_ignore && ids[i] == kIgnoreIndex) continue;
    VEOMNI_INPUT_CHECK(ids[i] >= 0 && ids[i] < vocab,
                       "{}: {}[{}] = {} is outside the model vocabulary [0, {}) (hint: was the data tokenized for "
                       "another model?)",
                       where(s), key, i, ids[i], vocab);
  }
}

// Positions of sample s (truncated to len) written at column offset `at` of a [streams, T] buffer.
void copy_positions(const TokenSample& s, int64_t len, int64_t at, int64_t total, int64_t streams, int64_t* out) {
  if (!s.position_ids.defined()) {
    for (int64_t st = 0; st < streams; ++st)
      for (int64_t i = 0; i < len; ++i) out[st * total + at + i] = i;
    return;
  }
  const Tensor& p = s.position_ids;
  const int64_t p_streams = p.ndim() == 1 ? 1 : p.dim(0);
  VEOMNI_INPUT_CHECK(p.dtype() == DType::I64 && p_streams == streams && p.dim(-1) == s.input_ids.dim(0),
                     "{}: position_ids {} do not match input_ids {} (expected {} stream(s))", where(s), p.describe(),
                     s.input_ids.describe(), streams);
  const int64_t p_len = p.dim(-1);
  for (int64_t st = 0; st < streams; ++st)
    std::memcpy(out + st * total + at, p.data<int64_t>() + st * p_len, static_cast<size_t>(len) * sizeof(int64_t));
}

// A pair is never cut: truncation would drop its rejected half (or make the halves uneven).
void check_pair(const TokenSample& s, int64_t max_seq_len) {
  if (s.chosen_length == 0) return;
  const int64_t length = s.input_ids.dim(0);
  VEOMNI_INPUT_CHECK(s.chosen_length >= 1 && s.chosen_length < length,
                     "{}: chosen_length {} is outside [1, {}) (both sequences of the pair need a token)", where(s),
                     s.chosen_length, length);
  VEOMNI_INPUT_CHECK(length <= max_seq_len,
                     "{}: the preference pair has {} tokens, more than data.max_seq_len {}; a pair cannot be truncated "
                     "(hint: raise data.max_seq_len, or leave such pairs out with veomni-preprocess preference "
                     "--max-seq-len)",
                     where(s), length, max_seq_len);
}

// VeOmni's layout: the rejected sequence's positions restart at 0 where it begins (in every M-RoPE stream).
void check_pair_positions(const TokenSample& s, const int64_t* pos, int64_t at, int64_t total, int64_t streams) {
  if (!s.position_ids.defined()) return;
  for (int64_t st = 0; st < streams; ++st)
    VEOMNI_INPUT_CHECK(pos[st * total + at + s.chosen_length] == 0,
                       "{}: position_ids do not restart at 0 where the rejected sequence begins (token {}, "
                       "chosen_length)",
                       where(s), s.chosen_length);
}

// The rollout keys of the micro-batch (those of its first sample; every sample must have the same) copied unshifted
// into [T] buffers.
std::map<std::string, std::vector<float>> gather_token_values(const std::vector<TokenSample>& samples,
                                                              int64_t max_seq_len, int64_t total) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& entry : samples.front().token_values) out[entry.first].assign(static_cast<size_t>(total), 0.0f);
  int64_t at = 0;
  for (const TokenSample& s : samples) {
    const int64_t len = sample_length(s, max_seq_len);
    for (const auto& entry : s.token_values)
      VEOMNI_INPUT_CHECK(out.count(entry.first), "{}: has key '{}', which the micro-batch's first sample ({}) lacks",
                         where(s), entry.first, where(samples.front()));
    for (auto& [key, buffer] : out) {
      const auto found = s.token_values.find(key);
      VEOMNI_INPUT_CHECK(found != s.token_values.end(), "{}: no key '{}' (the micro-batch's first sample has it)",
                         where(s), key);
      const Tensor& t = found->second;
      VEOMNI_INPUT_CHECK(t.dtype() == DType::F32 && t.ndim() == 1 && t.dim(0) == s.input_ids.dim(0),
                         "{}: key '{}' is {}, expected f32[{}] like input_ids", where(s), key, t.describe(),
                         s.input_ids.dim(0));
      check_finite_values(t, key, where(s));
      std::memcpy(buffer.data() + at, t.data<float>(), static_cast<size_t>(len) * sizeof(float));
    }
    at += len;
  }
  return out;
}

// One f32 [1] value of a pair.
float pair_value(const TokenSample& s, const char* key) {
  const auto found = s.pair_values.find(key);
  VEOMNI_INPUT_CHECK(found != s.pair_values.end(), "{}: no key '{}' (the micro-batch's first sample has it)", where(s),
                     key);
  const Tensor& t = found->second;
  VEOMNI_INPUT_CHECK(t.dtype() == DType::F32 && t.numel() == 1, "{}: key '{}' is {}, expected f32[1]", where(s), key,
                     t.describe());
  check_finite_values(t, key, where(s));
  return t.data<float>()[0];
}

// Appends a sequence ending at `end` with its role (and its reference log-prob when the batch carries them).
struct SequenceAppender {
  PackedRow& row;
  std::vector<float>* ref_logps;
  void add(int64_t end, SequenceRole role, float ref = 0.0f) {
    row.cu_seqlens.push_back(static_cast<int32_t>(end));
    row.sequence_roles.push_back(role);
    if (ref_logps) ref_logps->push_back(ref);
  }
};

}  // namespace

void read_objective_keys(const Sample& sample, TokenSample& out) {
  if (const auto found = sample.find(kChosenLengthKey); found != sample.end()) {
    const Tensor& t = found->second;
    VEOMNI_INPUT_CHECK(t.dtype() == DType::I64 && t.numel() == 1, "{}: key '{}' is {}, expected i64[1]", where(out),
                       kChosenLengthKey, t.describe());
    out.chosen_length = t.data<int64_t>()[0];
    VEOMNI_INPUT_CHECK(out.chosen_length >= 1, "{}: key '{}' is {}, expected at least 1", where(out),
                       kChosenLengthKey, out.chosen_length);
  }
  for (const char* key : kRolloutKeys)
    if (const auto found = sample.find(key); found != sample.end()) out.token_values[key] = found->second;
  for (const char* key : {kRefChosenLogpsKey, kRefRejectedLogpsKey})
    if (const auto found = sample.find(key); found != sample.end()) out.pair_values[key] = found->second;
}

TokenSample token_sample_from(const Sample& sample, const std::string& context) {
  TokenSample t;
  t.context = context;
  t.input_ids = sample_key(sample, "input_ids", context);
  if (auto it = sample.find("labels"); it != sample.end()) t.labels = it->second;
  if (auto it = sample.find("position_ids"); it != sample.end()) t.position_ids = it->second;
  read_objective_keys(sample, t);
  return t;
}

PackedRow pack_samples(const std::vector<TokenSample>& samples, const CollateOptions& options) {
  VEOMNI_CHECK(!samples.empty(), "pack_samples of an empty micro-batch");
  VEOMNI_CHECK(options.sp_size >= 1 && options.pad_scale >= 1, "bad sp_size {} / pad_scale {}", options.sp_size,
               options.pad_scale);
  const int64_t streams =
      samples[0].position_ids.defined() && samples[0].position_ids.ndim() == 2 ? samples[0].position_ids.dim(0) : 1;
  int64_t real = 0;
  for (const TokenSample& s : samples) {
    check_pair(s, options.max_seq_len);
    real += sample_length(s, options.max_seq_len);
  }
  const int64_t multiple = options.sp_size * options.pad_scale;
  const int64_t total = (real + multiple - 1) / multiple * multiple;

  PackedRow row;
  row.real_tokens = real;
  row.input_ids = Tensor::zeros({total}, DType::I64);
  row.target_ids = Tensor::full<int64_t>({total}, kIgnoreIndex);
  row.position_ids = Tensor::zeros(streams == 1 ? Shape{total} : Shape{streams, total}, DType::I64);
  std::vector<int64_t> labels(static_cast<size_t>(total), kIgnoreIndex);
  int64_t* ids = row.input_ids.data<int64_t>();
  int64_t* pos = row.position_ids.data<int64_t>();

  const bool with_ref = !samples.front().pair_values.empty();
  std::vector<float> ref_logps;
  SequenceAppender sequences{row, with_ref ? &ref_logps : nullptr};
  int64_t at = 0;
  row.cu_seqlens.push_back(0);
  for (size_t k = 0; k < samples.size(); ++k) {
    const TokenSample& s = samples[k];
    const int64_t len = sample_length(s, options.max_seq_len);
    check_vocabulary(s, "input_ids", s.input_ids.data<int64_t>(), len, options.vocab_size, false);
    std::memcpy(ids + at, s.input_ids.data<int64_t>(), static_cast<size_t>(len) * sizeof(int64_t));
    if (s.labels.defined()) {
      VEOMNI_INPUT_CHECK(s.labels.dtype() == DType::I64 && s.labels.ndim() == 1 &&
                             s.labels.numel() == s.input_ids.numel(),
                         "{}: labels {} do not match input_ids {}", where(s), s.labels.describe(),
                         s.input_ids.describe());
      check_vocabulary(s, "labels", s.labels.data<int64_t>(), len, options.vocab_size, true);
      std::memcpy(labels.data() + at, s.labels.data<int64_t>(), static_cast<size_t>(len) * sizeof(int64_t));
    } else {
      std::memcpy(labels.data() + at, s.input_ids.data<int64_t>(), static_cast<size_t>(len) * sizeof(int64_t));
    }
    if (k > 0) labels[static_cast<size_t>(at)] = kIgnoreIndex;
    copy_positions(s, len, at, total, streams, pos);
    if (s.chosen_length > 0) {
      check_pair_positions(s, pos, at, total, streams);
      const float ref_chosen = with_ref ? pair_value(s, kRefChosenLogpsKey) : 0.0f;
      const float ref_rejected = with_ref ? pair_value(s, kRefRejectedLogpsKey) : 0.0f;
      labels[static_cast<size_t>(at + s.chosen_length)] = kIgnoreIndex;
      sequences.add(at + s.chosen_length, SequenceRole::Chosen, ref_chosen);
      at += len;
      sequences.add(at, SequenceRole::Rejected, ref_rejected);
      continue;
    }
    // A pre-packed sample (veomni-preprocess --pack) holds several sequences: its 1-D positions restart at 0 at
    // each inner boundary, which becomes a sequence boundary too, with nothing predicted across it.
    if (streams == 1 && s.position_ids.defined())
      for (int64_t i = at + 1; i < at + len; ++i)
        if (pos[i] == 0) {
          sequences.add(i, SequenceRole::Plain);
          labels[static_cast<size_t>(i)] = kIgnoreIndex;
        }
    at += len;
    sequences.add(at, SequenceRole::Plain);
  }
  if (total > real) sequences.add(total, SequenceRole::Plain);
  if (with_ref) row.sequence_values["ref_logps"] = std::move(ref_logps);

  int64_t* targets = row.target_ids.data<int64_t>();
  for (int64_t i = 0; i + 1 < real; ++i) {
    targets[i] = labels[static_cast<size_t>(i + 1)];
    if (targets[i] != kIgnoreIndex) ++row.valid_tokens;
  }
  // Values shift with their labels: the value stored at i + 1 belongs to target i.
  for (const auto& [key, unshifted] : gather_token_values(samples, options.max_seq_len, total)) {
    Tensor shifted = Tensor::zeros({total}, DType::F32);
    float* out = shifted.data<float>();
    for (int64_t i = 0; i + 1 < real; ++i)
      if (targets[i] != kIgnoreIndex) out[i] = unshifted[static_cast<size_t>(i + 1)];
    row.token_values.emplace(key, std::move(shifted));
  }
  return row;
}

Batch slice_for_sp_rank(const PackedRow& row, int64_t sp_size, int64_t sp_rank) {
  const int64_t total = row.input_ids.dim(0);
  VEOMNI_CHECK(sp_size >= 1 && sp_rank >= 0 && sp_rank < sp_size && total % sp_size == 0,
               "row of {} tokens cannot be sliced for SP rank {}/{}", total, sp_rank, sp_size);
  const int64_t local = total / sp_size;
  const int64_t begin = sp_rank * local;
  Batch b;
  b.input_ids = row.input_ids.slice(begin, begin + local).clone();
  b.target_ids = row.target_ids.slice(begin, begin + local).clone();
  if (row.position_ids.ndim() == 1) {
    b.position_ids = row.position_ids.slice(begin, begin + local).clone();
  } else {
    const int64_t streams = row.position_ids.dim(0);
    b.position_ids = Tensor::empty({streams, local}, DType::I64);
    for (int64_t st = 0; st < streams; ++st)
      std::memcpy(b.position_ids.data<int64_t>() + st * local, row.position_ids.data<int64_t>() + st * total + begin,
                  static_cast<size_t>(local) * sizeof(int64_t));
  }
  b.cu_seqlens = row.cu_seqlens;
  b.sequence_roles = row.sequence_roles;
  b.sequence_values = row.sequence_values;
  for (const auto& [key, values] : row.token_values)
    b.token_values.emplace(key, values.slice(begin, begin + local).clone());
  b.sp_offset = begin;
  b.row_real_tokens = row.real_tokens;
  const int64_t* t = b.target_ids.data<int64_t>();
  for (int64_t i = 0; i < local; ++i) b.valid_tokens += t[i] != kIgnoreIndex;
  return b;
}

}  // namespace veomni
