// StepGraph: stream capture into a CUDA graph and its replays; without the CUDA backend nothing can be recorded.
#include "kernels/step_graph.h"

#include "core/error.h"

#if defined(VEOMNI_WITH_CUDA)
#include "kernels/cuda/held_blocks.h"
#include "kernels/cuda/runtime.h"
#endif

namespace veomni {

#if defined(VEOMNI_WITH_CUDA)

struct StepGraph::Impl {
  cudaGraphExec_t exec = nullptr;
  size_t nodes = 0;
  cuda_rt::HeldBlocks held;  // blocks freed while recording: the replays write them
};

bool StepGraph::supported(Device device) { return device.is_cuda(); }

void StepGraph::reset() {
  if (!impl_->exec && impl_->held.empty()) return;
  cuda_rt::synchronize();  // a replay still queued writes the held blocks
  if (impl_->exec) VEOMNI_CUDA_CHECK(cudaGraphExecDestroy(impl_->exec));
  impl_->exec = nullptr;
  impl_->nodes = 0;
  cuda_rt::release_held_blocks(impl_->held);
}

void StepGraph::capture(Device device, const std::function<void()>& work) {
  VEOMNI_CHECK(supported(device), "StepGraph: cannot record work on {}", device.str());
  reset();
  const cudaStream_t stream = cuda_rt::stream();
  cudaGraph_t graph = nullptr;
  // Relaxed: the allocator may still cudaMalloc a block it has not cached yet (not a stream operation).
  VEOMNI_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  cuda_rt::start_holding_freed_blocks(&impl_->held);
  try {
    work();
  } catch (...) {
    cuda_rt::stop_holding_freed_blocks();
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  cuda_rt::stop_holding_freed_blocks();
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();
    if (graph) (void)cudaGraphDestroy(graph);
    throw Error(fmt::format("StepGraph: recording the step failed ({}): it waited for the device or queued work on "
                            "another stream; run it without a graph",
                            cudaGetErrorString(ended)));
  }
  VEOMNI_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &impl_->nodes));
  const cudaError_t made = cudaGraphInstantiate(&impl_->exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  VEOMNI_CUDA_CHECK(made);
}

void StepGraph::replay() const {
  VEOMNI_CHECK(impl_->exec, "StepGraph::replay before capture");
  VEOMNI_CUDA_CHECK(cudaGraphLaunch(impl_->exec, cuda_rt::stream()));
}

bool StepGraph::captured() const { return impl_->exec != nullptr; }

size_t StepGraph::nodes() const { return impl_->nodes; }

#else

struct StepGraph::Impl {};

bool StepGraph::supported(Device) { return false; }

void StepGraph::reset() {}

void StepGraph::capture(Device device, const std::function<void()>&) {
  throw Error(fmt::format("StepGraph: cannot record work on {}: this build has no CUDA backend", device.str()));
}

void StepGraph::replay() const { throw Error("StepGraph::replay before capture"); }

bool StepGraph::captured() const { return false; }

size_t StepGraph::nodes() const { return 0; }

#endif

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}

StepGraph::~StepGraph() {
  try {
    reset();
  } catch (...) {
    // A device already failed; nothing more can be freed safely.
  }
}

}  // namespace veomni
