// The Qwen3-VL / Qwen3-VL-MoE / Qwen3-Omni vision tower: explicit forward and backward from pixel patches to merged
// embeddings and deepstack features. It follows the layer contract of model/decoder_layer.h: forward returns what
// backward needs as a VisionTower::Saved value that backward consumes; the tower keeps nothing of a micro-batch.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/param.h"
#include "model/parallel_hooks.h"
#include "model/vision/vision_attention.h"
#include "model/vision/vision_block.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_grid.h"
#include "model/vision/vision_merger.h"
#include "model/vision/vision_pos_embed.h"

namespace veomni {

struct VisionOptions {
  Device device = Device::cpu();
  DType compute_dtype = DType::F32;  // of the parameters and activations (bf16 on GPU mixed precision)
  ParamHooks* params = nullptr;      // FSDP; null: the store's values stay materialised
};

// Ulysses SP inside the tower: the rank's place in the group whose hooks the attention layers all-to-all over.
struct VisionSpSlice {
  SequenceHooks* hooks = nullptr;
  int64_t rank = 0;
};

class VisionTower {
 public:
  // What backward needs, as one forward left it. Empty (kept false) when forward ran with save = false; backward
  // of an empty Saved is an internal error.
  struct Saved {
    bool kept = false;        // forward ran with save = true
    bool empty_pass = false;  // forward had no grids: backward passes every group with zero gradients
    // Sequence parallelism: this rank's first patch row and its real (unpadded) rows of the whole sequence's
    // total_patches; sliced false without SP.
    bool sliced = false;
    int64_t slice_begin = 0, slice_real = 0, total_patches = 0;
    Tensor patches;            // the patch embedding's input [N, patch_dim] (this rank's rows under SP)
    VisionLayerInputs inputs;  // rotary tables and frame segments every block reads
    VisionPosEmbed::Saved pos_embed;
    std::vector<VisionBlock::Saved> blocks;      // one per block
    std::vector<VisionMerger::Saved> deepstack;  // one per deepstack merger (empty for those that did not run)
    VisionMerger::Saved merger;
  };
  struct Output {
    Tensor merged;  // [patches / merge_unit, out_hidden_size], compute dtype: the image / video token embeddings
    // One feature [patches / merge_unit, out_hidden_size] per block named in deepstack_visual_indexes, in block
    // order (transformers' deepstack_features; the LM adds feature k after its decoder layer k).
    std::vector<Tensor> deepstack;
    Saved saved;  // empty unless save
  };

  // Registers every parameter under config.param_prefix with transformers 5.17's names and shapes, in groups
  // "visual.embed" (patch_embed.proj.{weight,bias}, pos_embed.weight), "visual.blocks.{i}", "visual.merger" and
  // "visual.deepstack.{j}" (deepstack_merger_list.j, or merger_list.j for Qwen3-Omni). The patch embedding keeps the
  // Conv3d shape [hidden, in_channels, temporal_patch_size, patch_size, patch_size], so checkpoints load and save
  // unchanged; compute views it as the [hidden, patch_dim] matrix of a linear layer (kernel == stride). The store's
  // owner materialises the values (ParamStore::materialize_all) unless FSDP hooks own them.
  VisionTower(ParamStore& store, const VisionConfig& config, const VisionOptions& options);
  ~VisionTower();

  const VisionConfig& config() const;
  // The store indices of the tower's groups, in forward order of first use (embed, blocks, deepstack, merger).
  const std::vector<size_t>& group_indices() const;
  void set_param_hooks(ParamHooks* hooks);
  // How many deepstack features forward returns: entries of deepstack_visual_indexes naming an existing block.
  int64_t num_deepstack_features() const;

  // HF init: normal(0, initializer_range) for linear, Conv3d and embedding weights, zeros for biases, ones for
  // LayerNorm weights; deterministic per (seed, name) like the LM's init_weights.
  void init_weights(uint64_t seed);

  // pixel_values [patches, patch_dim] (any float dtype, any device: converted to the compute dtype), grids in the
  // order of pixel_values' rows. Bad grids or shapes are InputErrors. The output's saved holds what backward needs
  // when save (empty otherwise). No grids (pixel_values undefined or empty) gives [0, out_hidden_size] outputs after
  // passing every group through the hooks in the usual order, and its backward reduces zero gradients: FSDP ranks
  // without images stay in step.
  //
  // With sp (hooks of sp_size P > 1; every rank of the group passes the same, whole pixel_values and grids): the
  // N patches are padded with zero rows to a multiple of P x merge_unit (the padding is one more attention segment),
  // this rank keeps rows [rank*n, (rank+1)*n) of n = padded/P, attention all-to-alls heads over the group, and the
  // outputs are this slice's merged rows [n / merge_unit, out_hidden_size] (gather them over the group for the
  // padded sequence's rows; the padding's rows come last). Backward then takes gradients of this slice's rows.
  Output forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids, bool save = true,
                 const VisionSpSlice* sp = nullptr) const;
  // Padded patch count of a sequence-parallel forward over `patches` patches on `sp_size` ranks.
  int64_t sp_padded_patches(int64_t patches, int64_t sp_size) const;
  // Backward of the forward that returned `saved`, which it consumes (saved is empty afterwards, and nothing of
  // that forward remains). d_merged like merged; d_deepstack has num_deepstack_features() entries, where an
  // undefined tensor means a zero gradient (that feature was not used). Parameter gradients accumulate; the
  // gradient of pixel_values is not formed.
  void backward(Saved&& saved, const Tensor& d_merged, const std::vector<Tensor>& d_deepstack) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
