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

