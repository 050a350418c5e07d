// A scope in which the decode path's CUDA kernels launch early (programmatic dependent launch): each starts while the
// kernel before it is still running, reads the weights it streams at once and waits for its predecessor only before
// it touches what that predecessor wrote. Launch latency and the ramp of each weight stream hide behind the previous
// kernel; results are the same bits.
#pragma once

namespace veomni {

// While an OverlappedLaunches lives on a thread (and VEOMNI_OVERLAP_LAUNCHES is not 0), the kernels that support it
// launch early on that thread. The contract the owner keeps: no work inside the scope writes a tensor that a later op
// in the scope reads as a weight (the second operand of a GEMM, a norm's gain). A decode step keeps it: its weights
// are frozen. The variable is read when a scope opens; an inner scope decides for its own extent.
class OverlappedLaunches {
 public:
  explicit OverlappedLaunches(bool enable = true);
  ~OverlappedLaunches();
  OverlappedLaunches(const OverlappedLaunches&) = delete;
  OverlappedLaunches& operator=(const OverlappedLaunches&) = delete;

  // Whether kernels launched now on this thread may launch early.
  static bool active();

 private:
  bool previous_;
};

}  // namespace veomni
