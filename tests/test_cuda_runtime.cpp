// CUDA runtime pieces through the public API. Without a GPU every test here reports a visible
// skip (GTEST_SKIP), never a pass.
#include "test_util.hpp"

namespace pipelink::test {
namespace {

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_built()) GTEST_SKIP() << "SKIPPED: this build has no CUDA backend";
    if (cuda_device_count() == 0) GTEST_SKIP() << "SKIPPED: no CUDA device present";
  }
};

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

TEST(CudaBackend, ReportsWhetherItIsBuilt) {
  // Visible in the log either way; the assertion is that the query does not crash without a GPU.
  std::printf("CUDA backend built: %s, devices: %d\n", cuda_backend_built() ? "yes" : "no", cuda_device_count());
  if (!cuda_backend_built()) {
    EXPECT_EQ(cuda_device_count(), 0);
  }
}

}  // namespace
}  // namespace pipelink::test
