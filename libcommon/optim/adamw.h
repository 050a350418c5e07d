// AdamW over fp32 master weights: one slot per (local shard of a) parameter, torch.optim.AdamW semantics, with f32
// moments (train.optimizer.type adamw) or bf16 ones (anyprecision_adamw).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "optim/offload_stream.h"
#include "optim/weight_decay_rule.h"

namespace veomni {

struct AdamWOptions {
  double lr = 1e-4;  // per-step value comes from the schedule
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  WeightDecayRule decay_rule;  // which parameters weight_decay applies to
  DType moment_dtype = DType::F32;  // exp_avg and exp_avg_sq: f32, or bf16 (anyprecision_adamw)
};

// train.optimizer.type: "adamw" (f32 moments) or "anyprecision_adamw" (bf16 moments); the masters are f32 in both.
DType moment_dtype_of_optimizer(const std::string& type);

// The default rule: no weight decay on norms and biases (the HF Trainer convention).
bool parameter_uses_weight_decay(const std::string& hf_name);

// What the optimizer updates for one parameter on this rank: the fp32 master values (the whole tensor in a single
// process, this rank's shard under FSDP), their gradient and the two moments.
struct OptimizerSlot {
  std::string name;
  Tensor master;                 // f32
  const Tensor* grad = nullptr;  // f32, same numel as master: read where it is at step time (FSDP allocates each
                                 // step's gradients during backward and frees them at zero_grads)
  Tensor exp_avg;     // moment_dtype
  Tensor exp_avg_sq;  // moment_dtype
  bool weight_decay = true;
  Tensor compute;     // the master's copy in the compute dtype on the compute device, which every step rewrites
                      // (undefined where the model computes from the f32 master itself)
};

// Where a step leaves the updated masters besides themselves (FSDP's optimizer_target): `compute`, the master's
// copy in the compute dtype on the compute device (written in the update's own pass), and with optimizer offload
// `stream`: the masters and moments are then in host memory, the gradient on the compute device, and step() streams
// the slots through it.
struct OffloadTarget {
  OffloadStream* stream = nullptr;
  Tensor compute;
  bool enabled() const { return stream != nullptr; }
};

class AdamW {
 public:
  explicit AdamW(const AdamWOptions& options) : options_(options) {}
  // Allocates zeroed moments next to each master tensor. `grad` must outlive the optimizer; it may be undefined
  // until step(). offload: every slot of one optimizer is offloaded through the same stream, or none is.
  void add_slot(const std::string& name, Tensor master, const Tensor* grad, OffloadTarget offload = {});
  // One update of every slot with learning rate lr, each gradient read times grad_scale (gradient clipping's factor;
  // the gradients themselves are not changed); increments the step counter first (torch: step starts at 1).
  // Slots with a compute copy get the updated masters cast into it in the same pass. Offloaded: the same arithmetic
  // on the host, chunk by chunk as the gradients arrive (the bits of the device's step), the cast masters streamed
  // into the compute copies before it returns.
  void step(double lr, float grad_scale = 1.0f);
  int64_t steps_taken() const { return step_; }
  bool offloaded() const { return stream_ != nullptr; }
  // Bytes of the two moments of every slot (host memory when offloaded): 8 a parameter in f32, 4 in bf16.
  int64_t moment_bytes() const;
  void set_steps_taken(int64_t step) { step_ = step; }
  std::vector<OptimizerSlot>& slots() { return slots_; }
  const AdamWOptions& options() const { return options_; }

 private:
  void step_streamed(double lr, float grad_scale);

  AdamWOptions options_;
  OffloadStream* stream_ = nullptr;
  std::vector<OptimizerSlot> slots_;
  int64_t step_ = 0;
};

}  // namespace veomni
