// GPU tests of the MoE ops against their CPU twins: router softmax/top-k (ties, renormalisation) and its backward,
// the stable permutation by expert (exact row map and counts), the weighted un-permutation with bf16 rows and f32
// weights, their backward passes, the load-balancing statistics and gradient, the error path of bad expert ids, and a
// decode step's experts (moe_decode_experts) against the CPU, with a bad expert id, and recorded in a graph.
#include "gpu_test_util.h"
#include "kernels/decode_ops.h"
#include "kernels/ops.h"
#include "kernels/step_graph.h"

using namespace veomni;
using namespace veomni::gpu_test;

namespace {

class CudaMoe : public CudaTest {};

struct Route {
  Tensor probs, idx, weight;
};

Route route(const Tensor& logits, int64_t k, bool norm) {
  const int64_t n = logits.dim(0), e = logits.dim(1);
  const Device d = logits.device();
  Route r{Tensor::empty({n, e}, DType::F32, d), Tensor::empty({n, k}, DType::I32, d),
          Tensor::empty({n, k}, DType::F32, d)};
  ops::moe_route(logits, k, norm, r.probs, r.idx, r.weight);
  return r;
}

TEST_F(CudaMoe, RouteMatchesCpu) {
  std::mt19937 rng(31);
  for (DType dtype : float_dtypes())
    for (bool norm : {false, true})
      for (const auto& [n, e, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 60, 6}, {5, 128, 8}, {3, 7, 7}}) {
        SCOPED_TRACE(fmt::format("{} norm {} n {} e {} k {}", dtype_name(dtype), norm, n, e, k));
        const Tensor logits = representable(random_f32({n, e}, rng, -4.0f, 4.0f), dtype);
        const Route want = route(logits, k, norm);
        const Route got = route(to_gpu(logits, dtype), k, norm);
        // Both take the softmax in double and round once: the same floats up to an ulp.
        EXPECT_TRUE(close_to(got.probs, want.probs, 1e-6));
        EXPECT_TRUE(bitwise_equal(got.idx, want.idx));
        EXPECT_TRUE(close_to(got.weight, want.weight, 1e-6));
      }
}

TEST_F(CudaMoe, RouteBreaksTiesTowardsTheLowerExpert) {
  std::vector<float> v(2 * 40, 0.0f);
  v[3] = v[17] = v[35] = 2.0f;  // token 0: three equal maxima
  for (int e = 0; e < 40; ++e) v[40 + e] = 1.0f;  // token 1: all equal
  const Route r = route(Tensor::from_vector(v, {2, 40}).to(gpu()), 3, true);
  const Tensor idx = to_host(r.idx);
  EXPECT_EQ(std::vector<int32_t>(idx.data<int32_t>(), idx.data<int32_t>() + 6),
            (std::vector<int32_t>{3, 17, 35, 0, 1, 2}));
}

TEST_F(CudaMoe, RouteBackwardMatchesCpu) {
  std::mt19937 rng(32);
  const int64_t n = 29, e = 64, k = 4;
  for (bool norm : {false, true})
    for (bool with_extra : {false, true}) {
      SCOPED_TRACE(fmt::format("norm {} extra {}", norm, with_extra));
      const Route r = route(random_f32({n, e}, rng, -2.0f, 2.0f), k, norm);
      const Tensor dweight = random_f32({n, k}, rng);
      const Tensor extra = with_extra ? random_f32({n, e}, rng) : Tensor();
      Tensor want = Tensor::empty({n, e}, DType::F32);
      ops::moe_route_backward(dweight, extra, r.probs, r.idx, norm, want);
      Tensor got = Tensor::empty({n, e}, DType::F32, gpu());
      ops::moe_route_backward(dweight.to(gpu()), with_extra ? extra.to(gpu()) : Tensor(), r.probs.to(gpu()),
                              r.idx.to(gpu()), norm, got);
      EXPECT_TRUE(close_to(got, want, kF32Rtol));
    }
}

// The aux-loss statistics and gradient stay on the device: counts exact, sums bias_grad's (the GPU's own order).
TEST_F(CudaMoe, RouterStatsAndAuxDprobsMatchCpu) {
  std::mt19937 rng(34);
  const int64_t n = 301, e = 64, k = 8;
  const Route r = route(random_f32({n, e}, rng, -2.0f, 2.0f), k, true);
  for (int64_t rows : {n, int64_t{250}, int64_t{0}}) {
    SCOPED_TRACE(fmt::format("rows {}", rows));
    Tensor want = Tensor::empty({2, e}, DType::F32), got = Tensor::full<float>({2, e}, 5.0f).to(gpu());
    ops::moe_router_stats(r.probs, r.idx, rows, want);
    ops::moe_router_stats(r.probs.to(gpu()), r.idx.to(gpu()), rows, got);
    const std::vector<float> w = want.to_float_vector(), g = to_host(got).to_float_vector();
    EXPECT_EQ(std::vector<float>(g.begin(), g.begin() + e), std::vector<float>(w.begin(), w.begin() + e));
    Tensor gpu_sums = Tensor::zeros({e}, DType::F32, gpu());
    if (rows > 0) ops::bias_grad(r.probs.to(gpu()).slice(0, rows), gpu_sums);
    EXPECT_EQ(std::vector<float>(g.begin() + e, g.end()), to_host(gpu_sums).to_float_vector());
    EXPECT_TRUE(close_to(to_host(got).select(1), want.select(1), kF32Rtol));

    const Tensor dprob = random_f32({e}, rng);
    Tensor dwant = Tensor::empty({n, e}, DType::F32), dgot = Tensor::empty({n, e}, DType::F32, gpu());
    ops::moe_aux_dprobs(dprob, rows, dwant);
    ops::moe_aux_dprobs(dprob.to(gpu()), rows, dgot);
    EXPECT_TRUE(bitwise_equal(to_host(dgot), dwant));
  }
}

TEST_F(CudaMoe, PermuteUnpermuteAndBackwardsMatchCpu) {
  std::mt19937 rng(33);
  const int64_t n = 37, e = 60, k = 6, h = 24;
  const Route r = route(random_f32({n, e}, rng, -3.0f, 3.0f), k, true);
  const Tensor gidx = r.idx.to(gpu());
  const Tensor gweight = r.weight.to(gpu());  // top-k weights stay f32 with bf16 rows
  for (DType dtype : float_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    const double rtol = rtol_for(dtype);
    const Tensor x = representable(random_f32({n, h}, rng), dtype);
    Tensor permuted = Tensor::empty({n * k, h}, DType::F32), row_map = Tensor::empty({n * k}, DType::I32);
    std::vector<int64_t> counts;
    ops::moe_permute(x, r.idx, e, permuted, row_map, counts);
    Tensor gpermuted = Tensor::empty({n * k, h}, dtype, gpu()), grow_map = Tensor::empty({n * k}, DType::I32, gpu());
    std::vector<int64_t> gcounts;
    ops::moe_permute(to_gpu(x, dtype), gidx, e, gpermuted, grow_map, gcounts);
    EXPECT_EQ(gcounts, counts);
    EXPECT_TRUE(bitwise_equal(grow_map, row_map));
    EXPECT_TRUE(bitwise_equal(to_host(gpermuted), permuted));

    const Tensor dpermuted = representable(random_f32({n * k, h}, rng), dtype);
    Tensor dx = Tensor::empty({n, h}, DType::F32), gdx = Tensor::empty({n, h}, dtype, gpu());
    ops::moe_permute_backward(dpermuted, row_map, k, dx);
    ops::moe_permute_backward(to_gpu(dpermuted, dtype), grow_map, k, gdx);
    EXPECT_TRUE(close_to(gdx, dx, rtol));

    const Tensor y = representable(random_f32({n * k, h}, rng), dtype);
    Tensor out = Tensor::empty({n, h}, DType::F32), gout = Tensor::empty({n, h}, dtype, gpu());
    ops::moe_unpermute(y, row_map, r.weight, out);
    ops::moe_unpermute(to_gpu(y, dtype), grow_map, gweight, gout);
    EXPECT_TRUE(close_to(gout, out, rtol));

    const Tensor dout = representable(random_f32({n, h}, rng), dtype);
    Tensor dy = Tensor::empty({n * k, h}, DType::F32), dw = Tensor::empty({n, k}, DType::F32);
    ops::moe_unpermute_backward(dout, y, row_map, r.weight, dy, dw);
    Tensor gdy = Tensor::empty({n * k, h}, dtype, gpu()), gdw = Tensor::empty({n, k}, DType::F32, gpu());
    ops::moe_unpermute_backward(to_gpu(dout, dtype), to_gpu(y, dtype), grow_map, gweight, gdy, gdw);
    EXPECT_TRUE(close_to(gdy, dy, rtol));
    EXPECT_TRUE(close_to(gdw, dw, kF32Rtol));  // dot products of the same values, in double on both sides
  }
}

TEST_F(CudaMoe, PermuteAtQwen3MoeScale) {
  std::mt19937 rng(34);
  const int64_t n = 4096, e = 128, k = 8, h = 16;
  const Route r = route(random_f32({n, e}, rng, -3.0f, 3.0f).to(gpu()), k, true);
  const Tensor x = to_gpu(random_f32({n, h}, rng), DType::BF16);
  Tensor permuted = Tensor::empty({n * k, h}, DType::BF16, gpu()), row_map = Tensor::empty({n * k}, DType::I32, gpu());
  std::vector<int64_t> counts;
  ops::moe_permute(x, r.idx, e, permuted, row_map, counts);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  EXPECT_EQ(total, n * k);
  // The same on the CPU from the GPU's routing.
  Tensor cpu_permuted = Tensor::empty({n * k, h}, DType::F32), cpu_map = Tensor::empty({n * k}, DType::I32);
  std::vector<int64_t> cpu_counts;
  ops::moe_permute(to_host(x), to_host(r.idx), e, cpu_permuted, cpu_map, cpu_counts);
  EXPECT_EQ(counts, cpu_counts);
  EXPECT_TRUE(bitwise_equal(row_map, cpu_map));
}

TEST_F(CudaMoe, PermuteRejectsExpertIdsOutOfRange) {
  const Tensor x = Tensor::zeros({3, 4}, DType::BF16, gpu());
  Tensor permuted = Tensor::empty({6, 4}, DType::BF16, gpu()), row_map = Tensor::empty({6}, DType::I32, gpu());
  std::vector<int64_t> counts;
  for (int32_t bad : {8, -1}) {
    const Tensor idx = Tensor::from_vector<int32_t>({0, 1, 2, bad, 4, 5}, {3, 2}).to(gpu());
    try {
      ops::moe_permute(x, idx, 8, permuted, row_map, counts);
      ADD_FAILURE() << "expert " << bad << " accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(fmt::format("topk_idx[3] = {}", bad)), std::string::npos) << err.what();
    }
  }
  const Tensor idx = Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5}, {3, 2}).to(gpu());
  EXPECT_NO_THROW(ops::moe_permute(x, idx, 8, permuted, row_map, counts));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_THROW(ops::moe_permute(x, idx, 0, permuted, row_map, counts), Error);
}

// moe_decode_experts on rows of representable inputs: the GPU (dtype) against the CPU in f32. Route on the CPU so that
// both get the same experts.
struct DecodeCase {
  int64_t n, h, inter, e, k;
};

struct DecodeInputs {
  Tensor x, gate_up, down, idx, weight;
};

DecodeInputs decode_inputs(const DecodeCase& dc, DType dtype, std::mt19937& rng) {
  DecodeInputs in;
  in.x = representable(random_f32({dc.n, dc.h}, rng), dtype);
  in.gate_up = representable(random_f32({dc.e, 2 * dc.inter, dc.h}, rng, -0.5f, 0.5f), dtype);
  in.down = representable(random_f32({dc.e, dc.h, dc.inter}, rng, -0.5f, 0.5f), dtype);
  const Route r = route(random_f32({dc.n, dc.e}, rng, -3.0f, 3.0f), dc.k, true);
  in.idx = r.idx;
  in.weight = r.weight;
  return in;
}

Tensor decode_on(Device device, DType dtype, const DecodeInputs& in, const Tensor& idx) {
  const auto put = [&](const Tensor& t) { return device.is_cpu() ? t : to_gpu(t, dtype); };
  Tensor out = Tensor::empty(in.x.shape(), device.is_cpu() ? DType::F32 : dtype, device);
  ops::moe_decode_experts(put(in.x), idx.to(device), in.weight.to(device), put(in.gate_up), put(in.down), out);
  return out;
}

TEST_F(CudaMoe, DecodeExpertsMatchCpu) {
  std::mt19937 rng(37);
  // One row over 8 of 16 experts (the 16-byte path); 3 rows of 20 columns (single elements for bf16, 16-byte for f32);
  // 32 rows over 6 experts (several passes of 8 rows an expert); a 128-expert layer at batch 4; long rows of 4104 and
  // 1032 elements (513 and 129 16-byte chunks of bf16: lane 0 takes one chunk more than the others).
  for (const DecodeCase& dc : {DecodeCase{1, 64, 32, 16, 8},
                               {3, 20, 12, 5, 2},
                               {32, 48, 24, 6, 4},
                               {4, 256, 96, 128, 8},
                               {3, 4104, 1032, 4, 2}})
    for (DType dtype : float_dtypes()) {
      SCOPED_TRACE(fmt::format("{} n {} h {} inter {} e {} k {}", dtype_name(dtype), dc.n, dc.h, dc.inter, dc.e, dc.k));
      const DecodeInputs in = decode_inputs(dc, dtype, rng);
      const Tensor want = decode_on(Device::cpu(), DType::F32, in, in.idx);
      const Tensor got = decode_on(gpu(), dtype, in, in.idx);
      // bf16 rounds the gate|up sums, the activation and the down sums as the grouped GEMMs' outputs do.
      EXPECT_TRUE(close_to(got, want, dtype == DType::BF16 ? 2 * kBf16Rtol : kF32Rtol));
    }
}

TEST_F(CudaMoe, DecodeExpertsSkipAPairOutsideTheExperts) {
  std::mt19937 rng(38);
  const DecodeCase dc{3, 32, 16, 6, 2};
  DecodeInputs in = decode_inputs(dc, DType::F32, rng);
  Tensor bad_idx = in.idx.clone();
  bad_idx.data<int32_t>()[3] = static_cast<int32_t>(dc.e);  // row 1, slot 1
  const Tensor got = decode_on(gpu(), DType::F32, in, bad_idx);
  // The CPU refuses the id; without that pair's weight it computes what the GPU should.
  in.weight.data<float>()[3] = 0.0f;
  const Tensor want = decode_on(Device::cpu(), DType::F32, in, in.idx);
  EXPECT_TRUE(close_to(got, want, kF32Rtol));
  EXPECT_THROW(decode_on(Device::cpu(), DType::F32, in, bad_idx), Error);
}

TEST_F(CudaMoe, DecodeExpertsRecordedInAGraphReplayWithNewRoutes) {
  std::mt19937 rng(39);
  const DecodeCase dc{2, 64, 32, 16, 4};
  const DecodeInputs in = decode_inputs(dc, DType::BF16, rng);
  Tensor x = to_gpu(in.x, DType::BF16), idx = in.idx.to(gpu()), weight = in.weight.to(gpu());
  const Tensor gate_up = to_gpu(in.gate_up, DType::BF16), down = to_gpu(in.down, DType::BF16);
  Tensor out = Tensor::zeros({dc.n, dc.h}, DType::BF16, gpu());
  StepGraph graph;
  graph.capture(gpu(), [&] { ops::moe_decode_experts(x, idx, weight, gate_up, down, out); });
  ASSERT_TRUE(graph.captured());
  for (int round = 0; round < 3; ++round) {
    const DecodeInputs next = decode_inputs(dc, DType::BF16, rng);  // new rows and routes, the same weights
    x.copy_from(to_gpu(next.x, DType::BF16));
    idx.copy_from(next.idx.to(gpu()));
    weight.copy_from(next.weight.to(gpu()));
    graph.replay();
    Tensor want = Tensor::zeros({dc.n, dc.h}, DType::BF16, gpu());
    ops::moe_decode_experts(x, idx, weight, gate_up, down, want);
    EXPECT_TRUE(bitwise_equal(out, want)) << "round " << round;
  }
}

}  // namespace
