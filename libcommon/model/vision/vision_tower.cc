// Vision tower: patch embedding + interpolated positions, blocks with per-frame attention, deepstack and final
// mergers; FSDP gathers each parameter group around its use through ParamHooks.
#include "model/vision/vision_tower.h"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/ops.h"
#include "model/init.h"
#include "model/layers/common.h"
#include "model/layers/lora_adapter.h"
#include "model/vision/vision_rotary.h"

namespace veomni {

namespace {

bool is_layer_norm_weight(const std::string& name) {
  for (const char* suffix : {"norm1.weight", "norm2.weight", ".norm.weight", ".ln_q.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

// Merger j of deepstack_visual_indexes for block `block`, or -1: the first entry naming the block (list.index()).
int64_t deepstack_merger_of(const VisionConfig& c, int64_t block) {
  for (size_t j = 0; j < c.deepstack_visual_indexes.size(); ++j)
    if (c.deepstack_visual_indexes[j] == block) return static_cast<int64_t>(j);
  return -1;
}

// Patches padded to whole merge windows on every rank of a sequence-parallel group.
int64_t sp_padded(int64_t patches, int64_t sp_size, int64_t merge_unit) {
  const int64_t unit = sp_size * merge_unit;
  return (patches + unit - 1) / unit * unit;
}

}  // namespace

struct VisionTower::Impl {
  VisionConfig config;
  VisionOptions options;
  ParamStore& store;
  std::vector<size_t> groups;  // embed, blocks..., deepstack..., merger
  size_t embed_group = 0, merger_group = 0;
  std::vector<size_t> block_groups, deepstack_groups;
  Parameter* patch_weight = nullptr;
  Parameter* patch_bias = nullptr;
  std::unique_ptr<VisionPosEmbed> pos_embed;
  std::vector<std::unique_ptr<VisionBlock>> blocks;
  std::vector<std::unique_ptr<VisionMerger>> deepstack_mergers;
  std::unique_ptr<VisionMerger> merger;

  Impl(ParamStore& s, const VisionConfig& c, const VisionOptions& o);
  size_t begin_group(const std::string& name);
  ParamGroup& group(size_t index) const { return store.groups()[index]; }
  // forward and backward keep the micro-batch in `state` (forward's working state, its Saved when save).
  Tensor embed_forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids, bool save,
                       Saved& state) const;
  void slice_inputs(const Tensor& pixel_values, const VisionSpSlice& sp, Tensor& local_pixels, Saved& state) const;
  void embed_backward(const Tensor& dh, Saved& state) const;
  Output forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids, bool save,
                 const VisionSpSlice* sp) const;
  void backward(Saved&& saved, const Tensor& d_merged, const std::vector<Tensor>& d_deepstack) const;
  void zero_grads_of_idle_mergers() const;
  Output forward_without_work(bool save) const;
  void backward_without_work() const;
  void pass_backward(size_t g) const;

  void before_forward(size_t g) const { if (options.params) options.params->before_forward(group(g)); }
  void after_forward(size_t g) const { if (options.params) options.params->after_forward(group(g)); }
  void before_backward(size_t g) const { if (options.params) options.params->before_backward(group(g)); }
  void after_backward(size_t g) const { if (options.params) options.params->after_backward(group(g)); }
};

size_t VisionTower::Impl::begin_group(const std::string& name) {
  store.begin_group(name);
  groups.push_back(store.groups().size() - 1);
  return groups.back();
}

VisionTower::Impl::Impl(ParamStore& s, const VisionConfig& c, const VisionOptions& o)
    : config(c), options(o), store(s) {
  validate_vision_config(config, "vision config");
  const std::string& p = config.param_prefix;
  embed_group = begin_group("visual.embed");
  patch_weight = store.add(p + "patch_embed.proj.weight", {config.hidden_size, config.in_channels,
                                                          config.temporal_patch_size, config.patch_size,
                                                          config.patch_size});
  patch_bias = store.add(p + "patch_embed.proj.bias", {config.hidden_size});
  Parameter* table = store.add(p + "pos_embed.weight", {config.num_position_embeddings, config.hidden_size});
  pos_embed = std::make_unique<VisionPosEmbed>(table, config.grid_side(), config.spatial_merge_size);
  for (int64_t i = 0; i < config.depth; ++i) {
    block_groups.push_back(begin_group("visual.blocks." + std::to_string(i)));
    blocks.push_back(std::make_unique<VisionBlock>(store, config, i));
  }
  const std::string list = config.flavor == VisionFlavor::Qwen3Omni ? "merger_list." : "deepstack_merger_list.";
  for (size_t j = 0; j < config.deepstack_visual_indexes.size(); ++j) {
    deepstack_groups.push_back(begin_group("visual.deepstack." + std::to_string(j)));
    deepstack_mergers.push_back(std::make_unique<VisionMerger>(store, config, p + list + std::to_string(j), true));
  }
  merger_group = begin_group("visual.merger");
  merger = std::make_unique<VisionMerger>(store, config, p + "merger", false);
}

// Conv3d with kernel == stride over [C, T, P, P] patches is y = x W^T + b with W viewed [hidden, patch_dim].
Tensor VisionTower::Impl::embed_forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids, bool save,
                                        Saved& state) const {
  Tensor x = converted(pixel_values.to(options.device), options.compute_dtype);
  before_forward(embed_group);
  const Tensor w = patch_weight->value.view({config.hidden_size, config.patch_dim()});
  Tensor h = empty_like(x, {x.dim(0), config.hidden_size});
  ops::matmul(x, false, w, true, h);
  ops::add_bias_(h, patch_bias->value);
  const Tensor pos = take_out(pos_embed->forward(grids, save), state.pos_embed);
  if (!state.sliced) {
    ops::add_(h, pos);
  } else if (state.slice_real > 0) {  // padding rows have no position embedding
    Tensor mine = h.slice(0, state.slice_real);
    ops::add_(mine, pos.slice(state.slice_begin, state.slice_begin + state.slice_real));
  }
  after_forward(embed_group);
  if (save) state.patches = x;
  return h;
}

void VisionTower::Impl::embed_backward(const Tensor& dh, Saved& state) const {
  before_backward(embed_group);
  if (patch_weight->trainable) {
    Tensor dw = grad_of(*patch_weight).view({config.hidden_size, config.patch_dim()});
    ops::matmul(dh, true, state.patches, false, dw, 1.0f, 1.0f);
  }
  if (patch_bias->trainable) ops::bias_grad(dh, grad_of(*patch_bias));
  if (!state.sliced) {
    pos_embed->backward(std::move(state.pos_embed), dh);
  } else {
    // The table's gradient from this rank's rows; the group's sum is the whole sequence's.
    Tensor dpos = Tensor::zeros({state.total_patches, config.hidden_size}, dh.dtype(), dh.device());
    if (state.slice_real > 0)
      dpos.slice(state.slice_begin, state.slice_begin + state.slice_real).copy_from(dh.slice(0, state.slice_real));
    pos_embed->backward(std::move(state.pos_embed), dpos);
  }
  state.patches = Tensor();
  after_backward(embed_group);
}

// No grids on this rank: every group is still gathered and released in forward's order, so that collective calls
// line up with the ranks that have images (FSDP's equivalent of VeOmni's dummy forward).
VisionTower::Output VisionTower::Impl::forward_without_work(bool save) const {
  Output out;
  before_forward(embed_group);
  after_forward(embed_group);
  for (int64_t i = 0; i < config.depth; ++i) {
    before_forward(block_groups[static_cast<size_t>(i)]);
    after_forward(block_groups[static_cast<size_t>(i)]);
    const int64_t j = deepstack_merger_of(config, i);
    if (j < 0) continue;
    before_forward(deepstack_groups[static_cast<size_t>(j)]);
    after_forward(deepstack_groups[static_cast<size_t>(j)]);
    out.deepstack.push_back(Tensor::empty({0, config.out_hidden_size}, options.compute_dtype, options.device));
  }
  before_forward(merger_group);
  after_forward(merger_group);
  out.merged = Tensor::empty({0, config.out_hidden_size}, options.compute_dtype, options.device);
  out.saved.kept = out.saved.empty_pass = save;
  return out;
}

// A group's backward with zero gradients, reduced like real ones.
void VisionTower::Impl::pass_backward(size_t g) const {
  before_backward(g);
  touch_grads(group(g));
  after_backward(g);
}

// backward's group order, with no work.
void VisionTower::Impl::backward_without_work() const {
  pass_backward(merger_group);
  for (int64_t i = config.depth; i-- > 0;) {
    const int64_t j = deepstack_merger_of(config, i);
    if (j >= 0) pass_backward(deepstack_groups[static_cast<size_t>(j)]);
    pass_backward(block_groups[static_cast<size_t>(i)]);
  }
  pass_backward(embed_group);
  zero_grads_of_idle_mergers();
}

// This rank's rows of the zero-padded patches and of the rotary tables; the padding is one more segment.
void VisionTower::Impl::slice_inputs(const Tensor& pixel_values, const VisionSpSlice& sp, Tensor& local_pixels,
                                     Saved& state) const {
  const int64_t p = sp.hooks->sp_size();
  VEOMNI_INPUT_CHECK(config.num_heads % p == 0,
                     "the vision tower's {} heads are not divisible by train.accelerator.ulysses_size {}",
                     config.num_heads, p);
  state.total_patches = pixel_values.dim(0);
  const int64_t padded = sp_padded(state.total_patches, p, config.merge_unit());
  const int64_t n = padded / p;
  state.sliced = true;
  state.slice_begin = sp.rank * n;
  state.slice_real = std::max<int64_t>(0, std::min(state.total_patches, state.slice_begin + n) - state.slice_begin);
  auto rows_of = [&](const Tensor& full, DType dtype) {
    Tensor local = Tensor::zeros({n, full.dim(1)}, dtype, options.device);
    if (state.slice_real > 0)
      local.slice(0, state.slice_real)
          .copy_from(converted(full.slice(state.slice_begin, state.slice_begin + state.slice_real), dtype));
    return local;
  };
  local_pixels = rows_of(pixel_values.to(options.device), options.compute_dtype);
  VisionLayerInputs& inputs = state.inputs;
  Tensor cos = inputs.cos, sin = inputs.sin;
  inputs.cos = rows_of(cos, cos.dtype());
  inputs.sin = rows_of(sin, sin.dtype());
  if (padded > state.total_patches) inputs.cu_seqlens.push_back(static_cast<int32_t>(padded));
  inputs.sequence = sp.hooks;
}

VisionTower::Output VisionTower::Impl::forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids,
                                               bool save, const VisionSpSlice* sp) const {
  if (grids.empty() && (!pixel_values.defined() || pixel_values.numel() == 0)) return forward_without_work(save);
  validate_vision_input(pixel_values, grids, config);
  Output out;
  Saved& state = out.saved;  // the inputs and slice are needed during forward, saved or not
  vision_rope_tables(patch_coords(grids, config.spatial_merge_size), config.head_dim(), config.rope_theta,
                     options.device, state.inputs.cos, state.inputs.sin);
  state.inputs.cu_seqlens = frame_cu_seqlens(grids);
  Tensor pixels = pixel_values;
  if (sp && sp->hooks && sp->hooks->sp_size() > 1) slice_inputs(pixel_values, *sp, pixels, state);

  state.deepstack.resize(deepstack_mergers.size());
  Tensor h = embed_forward(pixels, grids, save, state);
  for (int64_t i = 0; i < config.depth; ++i) {
    const size_t bi = static_cast<size_t>(i);
    before_forward(block_groups[bi]);
    h = take_out(blocks[bi]->forward(h, state.inputs, save), state.blocks.emplace_back());
    after_forward(block_groups[bi]);
    const int64_t j = deepstack_merger_of(config, i);
    if (j < 0) continue;
    const size_t dj = static_cast<size_t>(j);
    before_forward(deepstack_groups[dj]);
    out.deepstack.push_back(take_out(deepstack_mergers[dj]->forward(h, save), state.deepstack[dj]));
    after_forward(deepstack_groups[dj]);
  }
  before_forward(merger_group);
  out.merged = take_out(merger->forward(h, save), state.merger);
  after_forward(merger_group);
  if (save) {
    state.kept = true;
  } else {
    state = Saved{};  // forward's working state only: nothing to keep
  }
  return out;
}

void VisionTower::Impl::backward(Saved&& saved, const Tensor& d_merged, const std::vector<Tensor>& d_deepstack) const {
  Saved state = std::exchange(saved, Saved{});  // dropped on return, whatever happens
  VEOMNI_CHECK(state.kept, "vision backward without the saved values of a forward that kept them (save = true)");
  if (state.empty_pass) {
    backward_without_work();
    return;
  }
  VEOMNI_CHECK(state.blocks.size() == blocks.size(), "{} saved blocks for {} blocks", state.blocks.size(),
               blocks.size());
  int64_t features = 0;
  for (int64_t i = 0; i < config.depth; ++i) features += deepstack_merger_of(config, i) >= 0;
  VEOMNI_CHECK(static_cast<int64_t>(d_deepstack.size()) == features, "{} deepstack gradients for {} features",
               d_deepstack.size(), features);
  before_backward(merger_group);
  Tensor dh = merger->backward(std::move(state.merger), converted(d_merged, options.compute_dtype));
  after_backward(merger_group);
  for (int64_t i = config.depth; i-- > 0;) {
    const size_t bi = static_cast<size_t>(i);
    const int64_t j = deepstack_merger_of(config, i);
    if (j >= 0) {
      const size_t dj = static_cast<size_t>(j);
      const Tensor& grad = d_deepstack[static_cast<size_t>(--features)];
      before_backward(deepstack_groups[dj]);
      if (grad.defined()) {
        ops::add_(dh, deepstack_mergers[dj]->backward(std::move(state.deepstack[dj]),
                                                      converted(grad, options.compute_dtype)));
      } else {
        // An unused feature: its merger's gradients are zero, but they exist, as every group's after_backward
        // (FSDP's reduce-scatter) expects.
        touch_grads(group(deepstack_groups[dj]));
        state.deepstack[dj] = {};
      }
      after_backward(deepstack_groups[dj]);
    }
    before_backward(block_groups[bi]);
    dh = blocks[bi]->backward(std::move(state.blocks[bi]), dh, state.inputs);
    after_backward(block_groups[bi]);
  }
  embed_backward(dh, state);
  zero_grads_of_idle_mergers();
}

// Mergers listed for blocks that do not exist never run (as in transformers); their gradients are zeros so that
// every group of the tower goes through FSDP's gradient reduction each step.
void VisionTower::Impl::zero_grads_of_idle_mergers() const {
  for (size_t j = 0; j < config.deepstack_visual_indexes.size(); ++j) {
    const int64_t block = config.deepstack_visual_indexes[j];
    if (block >= 0 && block < config.depth && deepstack_merger_of(config, block) == static_cast<int64_t>(j)) continue;
    before_backward(deepstack_groups[j]);
    touch_grads(group(deepstack_groups[j]));
    after_backward(deepstack_groups[j]);
  }
}

VisionTower::VisionTower(ParamStore& store, const VisionConfig& config, const VisionOptions& options)
    : impl_(std::make_unique<Impl>(store, config, options)) {}

VisionTower::~VisionTower() = default;

const VisionConfig& VisionTower::config() const { return impl_->config; }

const std::vector<size_t>& VisionTower::group_indices() const { return impl_->groups; }

void VisionTower::set_param_hooks(ParamHooks* hooks) { impl_->options.params = hooks; }

int64_t VisionTower::num_deepstack_features() const {
  int64_t n = 0;
  for (int64_t i = 0; i < impl_->config.depth; ++i) n += deepstack_merger_of(impl_->config, i) >= 0;
  return n;
}

void VisionTower::init_weights(uint64_t seed) {
  for (size_t g : impl_->groups)
    for (Parameter* p : impl_->group(g).params) {
      if (is_lora_param_name(p->name)) {
        init_parameter(*p, lora_init_spec(*p), seed);
        continue;
      }
      if (p->name.ends_with(".bias")) {
        init_parameter(*p, InitSpec{InitSpec::Kind::Zeros, 0.0}, seed);
        continue;
      }
      const bool ones = is_layer_norm_weight(p->name);
      init_parameter(*p, InitSpec{ones ? InitSpec::Kind::Ones : InitSpec::Kind::Normal, impl_->config.initializer_range},
                     seed);
    }
}

VisionTower::Output VisionTower::forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids,
                                         bool save, const VisionSpSlice* sp) const {
  return impl_->forward(pixel_values, grids, save, sp);
}

int64_t VisionTower::sp_padded_patches(int64_t patches, int64_t sp_size) const {
  return sp_padded(patches, sp_size, impl_->config.merge_unit());
}

void VisionTower::backward(Saved&& saved, const Tensor& d_merged, const std::vector<Tensor>& d_deepstack) const {
  impl_->backward(std::move(saved), d_merged, d_deepstack);
}

}  // namespace veomni
