#pragma once
// One error-check family for CUDA runtime calls (nvbench's NVBENCH_CUDA_CALL style): the macro
// stringifies the call, clears the sticky error state and throws from an out-of-line function so
// kernels' translation units stay light. The _NOEXCEPT twin logs instead, for destructors.
#include <cuda_runtime_api.h>

namespace pipelink::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept;
}  // namespace pipelink::cuda::detail

#define PIPELINK_CUDA_CHECK(call)                                                              \
  do {                                                                                         \
    const cudaError_t pipelink_cuda_err_ = (call);                                             \
    if (pipelink_cuda_err_ != cudaSuccess) {                                                   \
      (void)cudaGetLastError();                                                                \
      ::pipelink::cuda::detail::throw_cuda_error(pipelink_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                          \
  } while (false)

#define PIPELINK_CUDA_CHECK_NOEXCEPT(call)                                                   \
  do {                                                                                       \
    const cudaError_t pipelink_cuda_err_ = (call);                                           \
    if (pipelink_cuda_err_ != cudaSuccess) {                                                 \
      (void)cudaGetLastError();                                                              \
      ::pipelink::cuda::detail::log_cuda_error(pipelink_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                        \
  } while (false)

namespace pipelink::cuda {

/// Makes `device` current for its scope and gives the caller's current device back at its end.
/// PipeLink once set the device of each call and left it (a review, session 46): on a host of
/// several GPUs, torch's next allocation on "cuda" could land on another GPU than its caller's.
/// One GPU: the device is already current, and the guard sets nothing.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    PIPELINK_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) {
      PIPELINK_CUDA_CHECK(cudaSetDevice(device));
      set_ = true;
    }
  }
  /// For destructors and other noexcept paths: failures are logged.
  struct NoThrow {};
  DeviceGuard(int device, NoThrow) noexcept {
    PIPELINK_CUDA_CHECK_NOEXCEPT(cudaGetDevice(&prev_));
    if (prev_ != device) {
      PIPELINK_CUDA_CHECK_NOEXCEPT(cudaSetDevice(device));
      set_ = true;
    }
  }
  ~DeviceGuard() {
    if (set_) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaSetDevice(prev_));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool set_ = false;
};

}  // namespace pipelink::cuda
