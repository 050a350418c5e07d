// HF weight loading and export: exact names, v5 stacked experts or per-expert tensors, expert-parallel rows.
#include "model/hf_loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "core/progress_meter.h"
#include "kernels/ops.h"

namespace veomni {

namespace {

enum class ExpertKind { None, GateUp, Down };

ExpertKind expert_kind(const std::string& name) {
  if (name.ends_with(".experts.gate_up_proj")) return ExpertKind::GateUp;
  if (name.ends_with(".experts.down_proj")) return ExpertKind::Down;
  return ExpertKind::None;
}

// "model.layers.3.mlp.experts.gate_up_proj", 5, "up_proj" -> "model.layers.3.mlp.experts.5.up_proj.weight"
std::string per_expert_name(const std::string& stacked_name, int64_t expert, const char* proj) {
  return stacked_name.substr(0, stacked_name.rfind('.') + 1) + std::to_string(expert) + "." + proj + ".weight";
}

// The per-expert pieces of one expert's slot in a stacked tensor: (projection, first row, rows) along the slot's
// dim 0. gate_up [2I, H] holds gate rows first, then up; down [H, I] is one piece.
struct ExpertPiece {
  const char* proj;
  int64_t row_begin;
  int64_t rows;
};

std::vector<ExpertPiece> expert_pieces(ExpertKind kind, const Shape& stacked_shape) {
  if (kind == ExpertKind::Down) return {{"down_proj", 0, stacked_shape[1]}};
  const int64_t i = stacked_shape[1] / 2;
  return {{"gate_proj", 0, i}, {"up_proj", i, i}};
}

Shape piece_shape(const ExpertPiece& piece, const Shape& stacked_shape) { return {piece.rows, stacked_shape[2]}; }

// How many elements of `p` have an exponent of all ones (Inf or NaN) and the flat index of the first: the stored bits
// are tested as they are, so a bf16 or f16 checkpoint is not widened first (loading reads every weight once).
struct NonFinite {
  int64_t count = 0, first = -1;
};

template <typename Bits>
NonFinite non_finite_bits(const void* data, int64_t n, Bits exponent) {
  const Bits* p = static_cast<const Bits*>(data);
  NonFinite r;
  for (int64_t i = 0; i < n; ++i)
    if ((p[i] & exponent) == exponent && r.count++ == 0) r.first = i;
  return r;
}

NonFinite non_finite(const Tensor& t) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::F32: return non_finite_bits<uint32_t>(t.raw_data(), n, 0x7f800000u);
    case DType::BF16: return non_finite_bits<uint16_t>(t.raw_data(), n, 0x7f80u);
    case DType::F16: return non_finite_bits<uint16_t>(t.raw_data(), n, 0x7c00u);
    default: return non_finite(t.to_dtype(DType::F32));
  }
}

// NaN or Inf in stored weights would surface only as a NaN loss at step 1, blamed on the learning rate. `t` holds the
// elements of tensor `name` (of shape `whole`) from flat index `offset` on (a rank reads only its rows): the message
// names the whole tensor and the index in it.
void check_finite(const Tensor& t, const WeightSource& source, const std::string& name, const Shape& whole,
                  int64_t offset) {
  const NonFinite bad = non_finite(t);
  VEOMNI_INPUT_CHECK(bad.count == 0,
                     "{}: tensor '{}' {} holds {} non-finite value(s), the first ({}) at flat index {}: the weights "
                     "are damaged (hint: re-export or re-download the model)",
                     source.file_of(name), name, shape_str(whole), bad.count,
                     bad.count == 0 ? 0.0 : t.item_as_double(bad.first), offset + bad.first);
}

// `t`: tensor `name` from flat index `offset` on, of a tensor of shape `whole` (see check_finite).
Tensor to_compute_dtype(const Tensor& t, DType dtype, const WeightSource& source, const std::string& name,
                        const Shape& whole, int64_t offset) {
  VEOMNI_INPUT_CHECK(dtype_is_floating(t.dtype()), "{}: tensor '{}' has dtype {}, expected a floating-point type",
                     source.origin(), name, dtype_name(t.dtype()));
  check_finite(t, source, name, whole, offset);
  return t.dtype() == dtype ? t : t.to_dtype(dtype);
}

Tensor to_compute_dtype(const Tensor& t, DType dtype, const WeightSource& source, const std::string& name) {
  return to_compute_dtype(t, dtype, source, name, t.shape(), 0);
}

void check_tensor(const WeightSource& source, const std::string& name, const Shape& expected) {
  VEOMNI_INPUT_CHECK(source.contains(name), "{}: missing tensor '{}'", source.origin(), name);
  const Shape got = source.shape(name);
  VEOMNI_INPUT_CHECK(got == expected, "{}: tensor '{}' has shape {}, the model expects {}", source.origin(), name,
                     shape_str(got), shape_str(expected));
}

// Calls fn(name, slot, piece) for each per-expert tensor of this rank's experts (slot: the expert's row in the local
// value), after checking that the first expert's exists (else the InputError names both forms) and that each has its
// piece's shape.
template <typename Fn>
void for_each_expert_piece(const WeightSource& source, const Parameter& param, ExpertKind kind, Fn&& fn) {
  const std::vector<ExpertPiece> pieces = expert_pieces(kind, param.shape);
  const std::string first_piece = per_expert_name(param.name, 0, pieces[0].proj);
  VEOMNI_INPUT_CHECK(source.contains(first_piece), "{}: missing tensor '{}' (nor its per-expert form '{}', ...)",
                     source.origin(), param.name, first_piece);
  for (int64_t e = param.local_begin; e < param.local_row_end(); ++e)
    for (const ExpertPiece& piece : pieces) {
      const std::string name = per_expert_name(param.name, e, piece.proj);
      check_tensor(source, name, piece_shape(piece, param.shape));
      fn(name, e - param.local_begin, piece);
    }
}

Tensor read_per_expert(const WeightSource& source, const Parameter& param, ExpertKind kind, DType dtype) {
  Tensor out = Tensor::empty(param.local_shape(), dtype);
  for_each_expert_piece(source, param, kind, [&](const std::string& name, int64_t slot, const ExpertPiece& piece) {
    out.select(slot)
        .slice(piece.row_begin, piece.row_begin + piece.rows)
        .copy_from(to_compute_dtype(source.read(name), dtype, source, name));
  });
  return out;
}

// Host buffers reused for every tensor of a load: a tensor's stored bytes, then its compute-dtype values on their way
// to a device. A fresh allocation per tensor would fault in (and zero) new pages for each, which costs about as much
// as reading it.
class StagingBuffers {
 public:
  // A CPU tensor of `shape` and `dtype` over buffer `slot` (0 or 1), grown when too small; valid until the slot's
  // next call.
  Tensor get(int slot, const Shape& shape, DType dtype) {
    const int64_t bytes = shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
    Tensor& buffer = buffers_[slot];
    if (!buffer.defined() || buffer.numel() < bytes) buffer = Tensor::empty({std::max<int64_t>(bytes, 1)}, DType::U8);
    return Tensor::from_blob(buffer.raw_data(), shape, dtype);
  }

 private:
  Tensor buffers_[2];
};

// Tensor `name` (checked to have `destination`'s shape) into `destination`, a view of a materialised parameter on any
// device, with read_hf_parameter's checks: a CPU destination of the stored dtype is read into directly, any other
// goes through the staging buffers (converted there when the dtypes differ).
void load_tensor(const WeightSource& source, const std::string& name, Tensor& destination, StagingBuffers& staging) {
  const DType stored = source.dtype(name);
  VEOMNI_INPUT_CHECK(dtype_is_floating(stored), "{}: tensor '{}' has dtype {}, expected a floating-point type",
                     source.origin(), name, dtype_name(stored));
  if (destination.is_cpu() && stored == destination.dtype()) {
    source.read_into(name, destination);
    check_finite(destination, source, name, destination.shape(), 0);
    return;
  }
  Tensor raw = staging.get(0, destination.shape(), stored);
  source.read_into(name, raw);
  check_finite(raw, source, name, destination.shape(), 0);
  if (stored == destination.dtype()) {
    destination.copy_from(raw);
    return;
  }
  Tensor converted = destination.is_cpu() ? destination : staging.get(1, destination.shape(), destination.dtype());
  ops::cast(raw, converted);  // the CPU backend's threads; Tensor::convert_from's values
  if (!destination.is_cpu()) destination.copy_from(converted);
}

// A materialised parameter's value from the source, tensor by tensor (expert by expert when stored per expert) into
// the value; only the rows of an expert-parallel shard of a stacked tensor take read_hf_parameter's path.
void load_parameter(const WeightSource& source, Parameter& param, StagingBuffers& staging) {
  VEOMNI_CHECK(param.value.defined(), "loading '{}' into a parameter that is not materialised", param.name);
  const ExpertKind kind = param.is_expert ? expert_kind(param.name) : ExpertKind::None;
  if (source.contains(param.name) || kind == ExpertKind::None) {
    const bool all_rows = param.local_begin == 0 && param.local_row_end() == param.shape.at(0);
    if (!all_rows) return param.value.copy_from(read_hf_parameter(source, param, param.value.dtype()));
    check_tensor(source, param.name, param.shape);
    return load_tensor(source, param.name, param.value, staging);
  }
  for_each_expert_piece(source, param, kind, [&](const std::string& name, int64_t slot, const ExpertPiece& piece) {
    Tensor rows = param.value.select(slot).slice(piece.row_begin, piece.row_begin + piece.rows);
    load_tensor(source, name, rows, staging);
  });
}

}  // namespace

void check_hf_parameter(const WeightSource& source, const Parameter& param) {
  const ExpertKind kind = param.is_expert ? expert_kind(param.name) : ExpertKind::None;
  if (source.contains(param.name) || kind == ExpertKind::None) {
    check_tensor(source, param.name, param.shape);
    return;
  }
  for_each_expert_piece(source, param, kind, [](const std::string&, int64_t, const ExpertPiece&) {});
}

Tensor read_hf_parameter(const WeightSource& source, const Parameter& param, DType dtype) {
  const ExpertKind kind = param.is_expert ? expert_kind(param.name) : ExpertKind::None;
  if (source.contains(param.name) || kind == ExpertKind::None) {
    check_tensor(source, param.name, param.shape);
    const bool all_rows = param.local_begin == 0 && param.local_row_end() == param.shape.at(0);
    Tensor t = all_rows ? source.read(param.name) : source.read_rows(param.name, param.local_begin, param.local_row_end());
    const int64_t row = param.shape.empty() || param.shape[0] == 0 ? 1 : shape_numel(param.shape) / param.shape[0];
    return to_compute_dtype(t, dtype, source, param.name, param.shape, param.local_begin * row);
  }
  return read_per_expert(source, param, kind, dtype);
}

void read_hf_elements(const WeightSource& source, const Parameter& param, int64_t begin, int64_t count, float* out) {
  if (count == 0) return;
  const Shape local = param.local_shape();
  const int64_t row = local.empty() || local[0] == 0 ? 1 : shape_numel(local) / local[0];
  const int64_t first_row = begin / row;
  const int64_t end_row = (begin + count + row - 1) / row;
  // The rows holding the range, read as a parameter of just those rows (experts: only those experts' tensors).
  Parameter rows;
  rows.name = param.name;
  rows.shape = param.shape;
  rows.is_expert = param.is_expert;
  rows.local_begin = param.local_begin + first_row;
  rows.local_end = param.local_begin + end_row;
  const Tensor host = read_hf_parameter(source, rows, DType::F32);
  std::memcpy(out, host.data<float>() + (begin - first_row * row), static_cast<size_t>(count) * sizeof(float));
}

namespace {

// Logs the share of the parameters' values loaded, the rate and the time left, at most every 5 s: a 30B model takes
// tens of seconds.
class LoadProgress {
 public:
  LoadProgress(const ParamStore& store, const WeightSource& source, const std::set<std::string>& skip)
      : source_(source), meter_(materialised_elements(store, skip), std::chrono::seconds(5)) {}
  void loaded(const Parameter& param) {
    done_ += static_cast<double>(param.value.numel());
    if (!meter_.due(done_)) return;
    spdlog::info("{}: loaded {:.2f} of {:.2f} G parameters ({:.0f}%), {:.2f} G a second, about {:.0f} s left",
                 source_.origin(), done_ / 1e9, meter_.total() / 1e9, 100 * meter_.fraction(), meter_.rate() / 1e9,
                 meter_.seconds_left());
  }

 private:
  static double materialised_elements(const ParamStore& store, const std::set<std::string>& skip) {
    double total = 0;
    for (const auto& param : store.all())
      if (!skip.contains(param->name) && !param->deferred && param->value.defined())
        total += static_cast<double>(param->value.numel());
    return total;
  }

  const WeightSource& source_;
  ProgressMeter meter_;
  double done_ = 0;
};

}  // namespace

void load_hf_weights(ParamStore& store, const WeightSource& source, const std::set<std::string>& skip) {
  StagingBuffers staging;
  LoadProgress progress(store, source, skip);
  for (const auto& param : store.all()) {
    if (skip.contains(param->name)) continue;
    load_parameter(source, *param, staging);
    progress.loaded(*param);
  }
}

void load_hf_weights(ParamStore& store, const std::shared_ptr<const WeightSource>& source,
                     const std::set<std::string>& skip) {
  StagingBuffers staging;
  LoadProgress progress(store, *source, skip);
  for (const auto& param : store.all()) {
    if (skip.contains(param->name)) continue;
    if (!param->deferred) {
      load_parameter(*source, *param, staging);
      progress.loaded(*param);
      continue;
    }
    // Missing or mis-shaped tensors are reported now, as a materialised load reports them; values are read later.
    check_hf_parameter(*source, *param);
    param->start_values = [source, p = param.get()](int64_t begin, int64_t count, float* out) {
      read_hf_elements(*source, *p, begin, count, out);
    };
  }
}

std::vector<HfTensorSpec> hf_tensor_specs(const std::string& name, const Shape& shape, ExpertNaming naming) {
  const ExpertKind kind = expert_kind(name);
  if (kind == ExpertKind::None || naming == ExpertNaming::Stacked) return {{name, shape}};
  VEOMNI_CHECK(shape.size() == 3, "expert tensor '{}' of shape {} is not [E, rows, cols]", name, shape_str(shape));
  std::vector<HfTensorSpec> specs;
  for (int64_t e = 0; e < shape[0]; ++e)
    for (const ExpertPiece& piece : expert_pieces(kind, shape))
      specs.push_back({per_expert_name(name, e, piece.proj), piece_shape(piece, shape)});
  return specs;
}

void export_hf_tensor(const std::string& name, const Tensor& full, ExpertNaming naming, const HfTensorSink& sink) {
  const ExpertKind kind = expert_kind(name);
  if (kind == ExpertKind::None || naming == ExpertNaming::Stacked) {
    sink(name, full);
    return;
  }
  VEOMNI_CHECK(full.ndim() == 3, "expert tensor '{}' {} is not [E, rows, cols]", name, full.describe());
  for (int64_t e = 0; e < full.dim(0); ++e) {
    const Tensor slot = full.select(e);
    for (const ExpertPiece& piece : expert_pieces(kind, full.shape()))
      sink(per_expert_name(name, e, piece.proj), slot.slice(piece.row_begin, piece.row_begin + piece.rows));
  }
}

void export_hf_weights(ParamStore& store, ExpertNaming naming, const HfTensorSink& sink) {
  for (const auto& param : store.all()) {
    VEOMNI_CHECK(param->value.defined(), "exporting '{}' which is not materialised", param->name);
    VEOMNI_CHECK(param->local_begin == 0 && param->local_row_end() == param->shape.at(0),
                 "exporting '{}' which holds only rows [{}, {}) (gather expert shards first)", param->name,
                 param->local_begin, param->local_row_end());
    export_hf_tensor(param->name, param->value.to(Device::cpu()), naming, sink);
  }
}

}  // namespace veomni
