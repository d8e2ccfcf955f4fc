// CUDA runtime pieces through the public API. Without a GPU every test here reports a visible
// skip (GTEST_SKIP), never a pass.
#include <cmath>
#include <stdexcept>

#include "pipelink/cuda.hpp"
#include "test_util.hpp"

namespace pipelink::test {
namespace {

class CudaRuntime : public CudaTest {};

TEST_F(CudaRuntime, RoundTripThroughDeviceMemory) {
  Tensor h = random_tensor({1000, 7}, DType::f32, fresh_seed());
  Tensor d = to_device(h, Device::cuda(0));
  EXPECT_EQ(d.device(), Device::cuda(0));
  Tensor back = to_device(d, Device::cpu());
  EXPECT_TRUE(bitwise_equal(h, back));
}

TEST_F(CudaRuntime, ZerosAndDescription) {
  Tensor z = TensorBuilder().shape({333}).dtype(DType::f64).device(Device::cuda(0)).zeros();
  Tensor back = to_device(z, Device::cpu());
  for (std::int64_t i = 0; i < 333; ++i) EXPECT_EQ(back.data_as<double>()[i], 0.0);
  const DeviceDesc& d = describe(Device::cuda(0));
  EXPECT_GE(d.sm, 50);
  EXPECT_GT(d.multiprocessors, 0);
  EXPECT_GT(d.memory_bytes, 0u);
}

TEST_F(CudaRuntime, MissingDeviceIndexIsAClearError) {
  EXPECT_THROW(describe(Device::cuda(cuda_device_count() + 3)), BackendUnavailableError);
}

TEST_F(CudaRuntime, OutOfMemoryNamesTheBytes) {
  // More than any device holds: the error is an OutOfMemoryError with the bytes asked for and
  // free, and the device stays usable.
  const std::int64_t n = std::int64_t(1) << 50;  // 4 PiB of float32
  try {
    (void)TensorBuilder().shape({n}).dtype(DType::f32).device(Device::cuda(0)).build();
    ADD_FAILURE() << "a 4 PiB tensor was allocated";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), std::uint64_t(n) * 4);
    EXPECT_GT(e.free_bytes(), 0u);
    EXPECT_NE(std::string(e.what()).find(std::to_string(std::uint64_t(n) * 4) + " bytes"), std::string::npos) << e.what();
  }
  Tensor z = TensorBuilder().shape({16}).dtype(DType::f32).device(Device::cuda(0)).zeros();
  EXPECT_EQ(to_device(z, Device::cpu()).data_as<float>()[15], 0.0f);
}

TEST(CudaBackend, ReportsWhetherItIsBuilt) {
  // Visible in the log either way; the assertion is that the query does not crash without a GPU.
  std::printf("CUDA backend built: %s, devices: %d\n", cuda_backend_built() ? "yes" : "no", cuda_device_count());
  if (!cuda_backend_built()) {
    EXPECT_EQ(cuda_device_count(), 0);
  }
}

TEST(CudaBackend, RuntimeFactsForTheBenchmark) {
  // Runs everywhere (the no-device half in CI): what the benchmark JSON records beside the device.
  const int n = cuda_device_count();
  if (n == 0) {
    EXPECT_THROW((void)cuda::runtime_facts(), BackendUnavailableError);
    return;
  }
  EXPECT_THROW((void)cuda::runtime_facts(n), std::invalid_argument);
  const cuda::RuntimeFacts f = cuda::runtime_facts(0);
  EXPECT_GE(f.driver_version, 12000) << "CUDA 12 or later drives sm_90";
  EXPECT_GE(f.runtime_version, 12000);
  EXPECT_GE(f.built_with, 12000);
  EXPECT_GE(f.driver_version / 1000, f.runtime_version / 1000) << "a runtime newer than its driver cannot run";
  EXPECT_GT(f.sm_clock_peak_khz, 100000) << "a rated SM clock above 100 MHz";
  EXPECT_GT(f.memory_clock_peak_khz, 100000);
}

TEST(CudaBackend, MemoryCallsNameAMissingDevice) {
  // Runs everywhere: without a device (or without the CUDA backend) the pool calls say so; with
  // one, an index past the last device is an invalid argument, and release_cached_memory leaves
  // the caller's current device as it was.
  const int n = cuda_device_count();
  if (n == 0) {
    EXPECT_THROW(cuda::release_cached_memory(), BackendUnavailableError);
    EXPECT_THROW((void)cuda::scratch_pool_stats(), BackendUnavailableError);
    return;
  }
  EXPECT_THROW(cuda::release_cached_memory(n), std::invalid_argument);
  EXPECT_THROW((void)cuda::scratch_pool_stats(n), std::invalid_argument);
  EXPECT_THROW((void)cuda::scratch_pool_stats(-1), std::invalid_argument);
  const cuda::PoolStats st = cuda::scratch_pool_stats(n - 1);
  EXPECT_LE(st.used, st.reserved);
  EXPECT_LE(st.used, st.used_peak);
  cuda::release_cached_memory(n - 1);  // the current device: 0 unless a test moved it
  const cuda::PoolStats after = cuda::scratch_pool_stats(n - 1);
  EXPECT_EQ(after.used_peak, after.used) << "release_cached_memory restarts the peak from what is in use";
  Tensor z = TensorBuilder().shape({4}).dtype(DType::f32).device(Device::cuda(0)).zeros();
  EXPECT_EQ(to_device(z, Device::cpu()).data_as<float>()[3], 0.0f);
}

TEST_F(CudaRuntime, DeviceRandomFillsAreInRangeAndRepeatable) {
  const Device dev{DeviceKind::cuda, 0};
  Tensor a = TensorBuilder().shape({100000}).device(dev).build();
  Tensor b = TensorBuilder().shape({100000}).device(dev).build();
  cuda::fill_random_uniform(a, -1, 1, 42);
  cuda::fill_random_uniform(b, -1, 1, 42);
  Tensor ha = to_device(a, Device::cpu()), hb = to_device(b, Device::cpu());
  double mean = 0;
  for (std::int64_t i = 0; i < 100000; ++i) {
    const float v = ha.data_as<float>()[i];
    ASSERT_TRUE(v >= -1.f && v <= 1.f) << v;
    ASSERT_EQ(v, hb.data_as<float>()[i]);
    mean += v;
  }
  EXPECT_LT(std::abs(mean / 100000), 0.02);
  Tensor idx = TensorBuilder().shape({100000}).dtype(DType::i32).device(dev).build();
  cuda::fill_random_indices(idx, 37, 7);
  Tensor hi = to_device(idx, Device::cpu());
  std::int64_t seen[37] = {};
  for (std::int64_t i = 0; i < 100000; ++i) {
    const std::int32_t v = hi.data_as<std::int32_t>()[i];
    ASSERT_TRUE(v >= 0 && v < 37) << v;
    ++seen[v];
  }
  for (auto c : seen) EXPECT_GT(c, 2000);  // ~2700 each
  EXPECT_THROW(cuda::fill_random_indices(a, 10, 1), std::invalid_argument);  // float tensor
  EXPECT_THROW(cuda::fill_random_uniform(ha, 0, 1, 1), std::invalid_argument);  // host tensor
}

}  // namespace
}  // namespace pipelink::test
