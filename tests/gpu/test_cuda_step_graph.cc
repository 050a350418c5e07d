// GPU tests of StepGraph: a recorded sequence of ops replays with new input contents and the same results as the
// ops run one by one; the blocks the recording freed stay out of reuse; a step that waits for the device cannot be
// recorded and leaves the stream usable.
#include "gpu_test_util.h"
#include "kernels/ops.h"
#include "kernels/step_graph.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaStepGraph : public CudaTest {};

// out = (x + x) * 3 through a temporary, as a decode step makes and frees its intermediates.
void doubled_and_tripled(const Tensor& x, Tensor& out) {
  Tensor twice = x.clone();
  ops::add_(twice, x);
  ops::scale_(twice, 3.0f);
  out.copy_from(twice);
}

TEST_F(CudaStepGraph, ReplaysWithNewInputsAsTheOpsRunOneByOne) {
  std::mt19937 rng(7);
  Tensor x = to_gpu(random_f32({257, 33}, rng));
  Tensor out = Tensor::zeros({257, 33}, DType::F32, gpu());
  StepGraph graph;
  EXPECT_TRUE(StepGraph::supported(gpu()));
  EXPECT_FALSE(StepGraph::supported(Device::cpu()));
  graph.capture(gpu(), [&] { doubled_and_tripled(x, out); });
  ASSERT_TRUE(graph.captured());
  EXPECT_GE(graph.nodes(), 3u);
  // Recording ran nothing.
  EXPECT_EQ(ops::sum_squares(out), 0.0);
  for (int round = 0; round < 3; ++round) {
    const Tensor host = random_f32({257, 33}, rng);
    x.copy_from(host.to(gpu()));
    graph.replay();
    Tensor want = Tensor::zeros({257, 33}, DType::F32, gpu());
    doubled_and_tripled(x, want);
    const Tensor got_host = to_host(out), want_host = to_host(want);
    EXPECT_EQ(0, std::memcmp(got_host.raw_data(), want_host.raw_data(), got_host.nbytes()))
        << "round " << round;
  }
}

TEST_F(CudaStepGraph, BlocksFreedWhileRecordingAreNotHandedOut) {
  Tensor x = Tensor::zeros({4096}, DType::F32, gpu());
  Tensor out = Tensor::zeros({4096}, DType::F32, gpu());
  std::vector<const void*> recorded;
  {
    StepGraph graph;
    graph.capture(gpu(), [&] {
      Tensor temp = x.clone();  // freed inside the recording: the replays still write it
      recorded.push_back(temp.raw_data());
      out.copy_from(temp);
    });
    // Requests of the temporary's size get other blocks while the graph lives.
    for (int i = 0; i < 4; ++i) {
      Tensor t = Tensor::empty({4096}, DType::F32, gpu());
      EXPECT_NE(t.raw_data(), recorded.front()) << "request " << i;
    }
  }
  // With the graph gone, its block is free again.
  bool reused = false;
  std::vector<Tensor> keep;
  for (int i = 0; i < 8 && !reused; ++i) {
    keep.push_back(Tensor::empty({4096}, DType::F32, gpu()));
    reused = keep.back().raw_data() == recorded.front();
  }
  EXPECT_TRUE(reused);
}

TEST_F(CudaStepGraph, AStepThatWaitsForTheDeviceCannotBeRecorded) {
  Tensor x = Tensor::full<float>({64}, 1.0f).to(gpu());
  StepGraph graph;
  EXPECT_THROW(graph.capture(gpu(), [&] { (void)x.to(Device::cpu()); }), Error);
  EXPECT_FALSE(graph.captured());
  // The stream is usable afterwards.
  ops::scale_(x, 2.0f);
  EXPECT_DOUBLE_EQ(ops::sum(x), 128.0);
}

}  // namespace
