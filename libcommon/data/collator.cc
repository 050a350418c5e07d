// Packing, label shifting and Ulysses slicing of text micro-batches.
#include "data/collator.h"

#include <algorithm>
#include <cstring>

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

}  // namespace

PackedRow pack_samples(const std::vector<TokenSample>& samples, const CollateOptions& options) {
  VEOMNI_CHECK(!samples.empty(), "pack_samples of an empty micro-batch");
  VEOMNI_CHECK(options.sp_size >= 1 && options.pad_scale >= 1, "bad sp_size {} / pad_scale {}", options.sp_size,
               options.pad_scale);
  const int64_t streams =
      samples[0].position_ids.defined() && samples[0].position_ids.ndim() == 2 ? samples[0].position_ids.dim(0) : 1;
  int64_t real = 0;
  for (const TokenSample& s : samples) real += sample_length(s, options.max_seq_len);
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
    // A pre-packed sample (veomni-preprocess --pack) holds several sequences: its 1-D positions restart at 0 at
    // each inner boundary, which becomes a sequence boundary too, with nothing predicted across it.
    if (streams == 1 && s.position_ids.defined())
      for (int64_t i = at + 1; i < at + len; ++i)
        if (pos[i] == 0) {
          row.cu_seqlens.push_back(static_cast<int32_t>(i));
          labels[static_cast<size_t>(i)] = kIgnoreIndex;
        }
    at += len;
    row.cu_seqlens.push_back(static_cast<int32_t>(at));
  }
  if (total > real) row.cu_seqlens.push_back(static_cast<int32_t>(total));

  int64_t* targets = row.target_ids.data<int64_t>();
  for (int64_t i = 0; i + 1 < real; ++i) {
    targets[i] = labels[static_cast<size_t>(i + 1)];
    if (targets[i] != kIgnoreIndex) ++row.valid_tokens;
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
  b.sp_offset = begin;
  b.row_real_tokens = row.real_tokens;
  const int64_t* t = b.target_ids.data<int64_t>();
  for (int64_t i = 0; i < local; ++i) b.valid_tokens += t[i] != kIgnoreIndex;
  return b;
}

}  // namespace veomni
