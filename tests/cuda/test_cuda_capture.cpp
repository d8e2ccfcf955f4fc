// CUDA graph capture through the C++ API, with the runtime's own capture calls (this file is
// built only with the CUDA backend, so it may include cuda_runtime.h; the other suites stay
// free of CUDA headers). Python's torch tests check the same rules through torch.cuda.graph; the
// three-op reference's ops (gather_scale, index_add), which Python does not expose, had no test
// of their refusal (session 49's open item). Without a GPU every test here is a visible skip.
//   - gather_scale and index_add read their index check's verdict on the host, so a call on a
//     capturing stream is refused before any work: a clear error, the output untouched, the
//     capture still ending cleanly, and the same call after it correct.
//   - An empty call (E = 0) makes no CUDA call, so a capture may hold it.
//   - A planned run may be captured (the plan built before the capture): the graph's replays give
//     the eager run's bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "pipelink/cuda.hpp"
#include "pipelink/ops/reference.hpp"
#include "pipelink/registry.hpp"
#include "test_util.hpp"

namespace pipelink::test {
namespace {

const Device kGpu = Device::cuda(0);
Tensor gpu(const TensorView& v) { return to_device(v, kGpu); }
Tensor host(const TensorView& v) { return to_device(v, Device::cpu()); }
Tensor poisoned_gpu(std::vector<std::int64_t> shape) {
  Tensor h = TensorBuilder().shape(std::move(shape)).dtype(DType::f32).build();
  poison(h);
  return gpu(h);
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

class CudaCapture : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    CUDA_OK(cudaSetDevice(0));
    (void)describe(kGpu);  // the device's first description (properties) before any capture
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  // f() on stream_ inside a capture that is ended whatever f does; returns what f threw
  // ("" if nothing), whether the capture ended with a graph (so it was not invalidated) and the
  // graph's node count: a refused or empty call must queue nothing (an output left untouched
  // would not show it, since captured work runs only when a graph is launched).
  template <class F>
  std::string under_capture(F&& f, bool* ended_cleanly = nullptr, std::size_t* nodes = nullptr) {
    EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    std::string error;
    try {
      f();
    } catch (const std::exception& e) {
      error = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (ended_cleanly) *ended_cleanly = end == cudaSuccess && graph != nullptr;
    if (nodes) {
      *nodes = std::size_t(-1);
      if (graph && cudaGraphGetNodes(graph, nullptr, nodes) != cudaSuccess) *nodes = std::size_t(-1);
    }
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return error;
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaCapture, ThreeOpReferenceOpsRefuseACaptureAndTouchNothing) {
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const std::int64_t N = 3000, E = 20000, F = 16;
  GraphInputs in = graph_inputs(N, E, F, seed);
  Tensor xg = gpu(in.x), sg = gpu(in.g.src), dg = gpu(in.g.dst), wg = gpu(in.w);
  // The CPU backend's results: what each op must give once it runs.
  Tensor m_cpu = TensorBuilder().shape({E, F}).build();
  gather_scale(in.x, in.g.src, in.w.view(), m_cpu);
  Tensor out_cpu = random_tensor({N, F}, DType::f32, seed + 7);
  Tensor out_init = host(gpu(out_cpu));  // the same start for the GPU's index_add
  index_add(out_cpu, in.g.dst, m_cpu);

  {  // gather_scale
    Tensor m = poisoned_gpu({E, F});
    Tensor before = host(m);
    bool ended = false;
    std::size_t nodes = 0;
    const std::string err = under_capture(
        [&] { invoke("gather_scale", {{"x", xg}, {"src", sg}, {"w", wg}, {"m", m}}, {}, stream_); }, &ended, &nodes);
    EXPECT_NE(err.find("gather_scale: a call cannot be captured into a CUDA graph"), std::string::npos) << err;
    EXPECT_TRUE(ended) << "the capture did not end cleanly after the refusal";
    EXPECT_EQ(nodes, 0u) << "the refused call queued work into the capture";
    CUDA_OK(cudaStreamSynchronize(stream_));
    EXPECT_TRUE(bitwise_equal(host(m), before)) << "m written by a refused call";
    invoke("gather_scale", {{"x", xg}, {"src", sg}, {"w", wg}, {"m", m}}, {}, stream_);
    CUDA_OK(cudaStreamSynchronize(stream_));
    EXPECT_TRUE(bitwise_equal(host(m), m_cpu)) << "gather_scale after the capture differs from the CPU's";
  }
  {  // index_add
    Tensor vals = gpu(m_cpu), out = gpu(out_init);
    bool ended = false;
    std::size_t nodes = 0;
    const std::string err = under_capture(
        [&] { invoke("index_add", {{"out", out}, {"dst", dg}, {"values", vals}}, {}, stream_); }, &ended, &nodes);
    EXPECT_NE(err.find("index_add: a call cannot be captured into a CUDA graph"), std::string::npos) << err;
    EXPECT_TRUE(ended) << "the capture did not end cleanly after the refusal";
    EXPECT_EQ(nodes, 0u) << "the refused call queued work into the capture";
    CUDA_OK(cudaStreamSynchronize(stream_));
    EXPECT_TRUE(bitwise_equal(host(out), out_init)) << "out written by a refused call";
    invoke("index_add", {{"out", out}, {"dst", dg}, {"values", vals}}, {}, stream_);
    CUDA_OK(cudaStreamSynchronize(stream_));
    // Float atomics: the order of the adds is not fixed, so the CPU's sums within the bound of
    // reordering d float adds of values in [-1, 1) onto a start in [-1, 1).
    Tensor got = host(out);
    const float* g = got.data_as<float>();
    const float* c = out_cpu.data_as<float>();
    // (In-degree ~7, at most ~20 here: reordering costs ~3e-5 at worst.) Counted so that a NaN,
    // which no max would keep, fails too.
    std::int64_t off = 0;
    for (std::int64_t i = 0; i < N * F; ++i) off += !(std::fabs(double(g[i]) - double(c[i])) <= 1e-3);
    EXPECT_EQ(off, 0) << "index_add after the capture differs from the CPU's";
  }
}

TEST_F(CudaCapture, EmptyThreeOpCallsMayBeCaptured) {
  // E = 0: no CUDA call, so nothing to refuse (and the capture stays valid).
  const std::int64_t N = 50, F = 8;
  Tensor x = gpu(random_tensor({N, F}, DType::f32, fresh_seed()));
  Tensor src = gpu(TensorBuilder().shape({0}).dtype(DType::i64).build());
  Tensor m = gpu(TensorBuilder().shape({0, F}).build());
  Tensor out = gpu(random_tensor({N, F}, DType::f32, fresh_seed()));
  Tensor before = host(out);
  bool ended = false;
  std::size_t nodes = 1;
  std::string err =
      under_capture([&] { invoke("gather_scale", {{"x", x}, {"src", src}, {"m", m}}, {}, stream_); }, &ended, &nodes);
  EXPECT_EQ(err, "");
  EXPECT_TRUE(ended);
  EXPECT_EQ(nodes, 0u);
  err = under_capture([&] { invoke("index_add", {{"out", out}, {"dst", src}, {"values", m}}, {}, stream_); }, &ended,
                      &nodes);
  EXPECT_EQ(err, "");
  EXPECT_TRUE(ended);
  EXPECT_EQ(nodes, 0u);
  CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_TRUE(bitwise_equal(host(out), before));
}

TEST_F(CudaCapture, PlannedRunsReplayTheEagerBits) {
  // The plan is built eagerly on the default stream; its runs are captured on another stream and
  // replayed twice. Both weights' forms: w in edge order and none. With w, the run brings w into
  // the plan's order (PIPELINK_AGG_W_PERMUTE: small tiles, since by default a plan of fewer than
  // 2^22 edges gathers w instead): the eager first run builds the tables and compacts the plan,
  // and the captured run then waits on the build's events from outside the capture and takes its
  // w scratch from the stream-ordered pool inside the graph (as the torch test does).
  const auto seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScopedEnv permute({{"PIPELINK_AGG_W_PERMUTE", "4096"}});
  const std::int64_t N = 20000, E = 300000, F = 64;
  GraphInputs in = graph_inputs(N, E, F, seed);
  Tensor xg = gpu(in.x), sg = gpu(in.g.src), dg = gpu(in.g.dst), wg = gpu(in.w);
  AggregatePlan plan = AggregatePlan::build(sg, dg, N);
  const std::size_t bytes_built = plan.bytes();
  for (const bool weights : {true, false}) {
    SCOPED_TRACE(weights ? "w in edge order" : "no w");
    std::optional<TensorView> w;
    if (weights) w = wg.view();
    Tensor eager = poisoned_gpu({N, F});
    aggregate(plan, xg, w, eager, {.stream = stream_});
    CUDA_OK(cudaStreamSynchronize(stream_));
    if (weights) {
      EXPECT_NE(plan.bytes(), bytes_built) << "the first run with w built no w tables: the knob did not act";
    }
    Tensor out = poisoned_gpu({N, F});
    CUDA_OK(cudaStreamSynchronize(stream_));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    std::string error;
    try {
      aggregate(plan, xg, w, out, {.stream = stream_});
    } catch (const std::exception& e) {
      error = e.what();
    }
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamEndCapture(stream_, &graph));
    ASSERT_EQ(error, "");
    ASSERT_NE(graph, nullptr);
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    Tensor want = host(eager);
    for (int replay = 0; replay < 2; ++replay) {
      CUDA_OK(cudaGraphLaunch(exec, stream_));
      CUDA_OK(cudaStreamSynchronize(stream_));
      EXPECT_TRUE(bitwise_equal(host(out), want)) << "replay " << replay << " differs from the eager run";
      Tensor p = poisoned_gpu({N, F});  // so that the next replay must write every element again
      CUDA_OK(cudaMemcpyAsync(out.data(), p.data(), std::size_t(N * F) * 4, cudaMemcpyDeviceToDevice, stream_));
      CUDA_OK(cudaStreamSynchronize(stream_));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

}  // namespace
}  // namespace pipelink::test
