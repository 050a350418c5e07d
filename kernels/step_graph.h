// A recorded sequence of device work replayed with one launch (a CUDA graph): for a step that repeats with the same
// shapes and the same buffers (a decode step), the host's per-op launch work is paid once, when it is recorded.
#pragma once
#include <functional>
#include <memory>

#include "core/device.h"

namespace veomni {

class StepGraph {
 public:
  // Whether work on `device` can be recorded: CUDA devices, in builds with the CUDA backend.
  static bool supported(Device device);

  StepGraph();
  ~StepGraph();  // waits for the device before it frees the graph and the memory it kept
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Records `work`: the ops it queues on `device`'s compute stream are recorded, not run. The work must queue only
  // device work on that stream: an op that waits for the device (a read to the host) or uploads pageable host memory
  // fails the recording with an Error that says so. Tensors the work keeps (in captures of the caller) are the
  // graph's inputs and outputs; blocks it frees stay reserved for the graph, whose replays still write them.
  void capture(Device device, const std::function<void()>& work);
  // Queues one run of the recorded work on the compute stream (does not wait for it).
  void replay() const;
  bool captured() const;
  // The number of recorded kernel launches, copies and other nodes (for logs and tests).
  size_t nodes() const;

 private:
  void reset();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veomni
