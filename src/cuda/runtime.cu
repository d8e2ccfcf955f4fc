// CUDA backend runtime pieces: device memory hooks for TensorBuilder / to_device, the device
// description for the downgrade policy, and the error-check functions. Kernels arrive with the
// CUDA aggregate (next issue); this file only needs the CUDA runtime API.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "cuda/check.cuh"
#include "pipelink/registry.hpp"
#include "pipelink/tensor.hpp"

namespace pipelink::cuda {

namespace detail {
void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // No fmt here: its consteval format strings do not compile under nvcc.
  throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") in " + call +
              " at " + file + ":" + std::to_string(line));
}
void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept {
  std::fprintf(stderr, "pipelink: CUDA error %s in %s at %s:%d\n", cudaGetErrorName(err), call, file, line);
}
}  // namespace detail

namespace {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no GPU: not an error for a CPU-only run
    return 0;
  }
  return n;
}

void* allocate(std::size_t bytes, int device) {
  PIPELINK_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  PIPELINK_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void deallocate(void* p, int device) noexcept {
  PIPELINK_CUDA_CHECK_NOEXCEPT(cudaSetDevice(device));
  PIPELINK_CUDA_CHECK_NOEXCEPT(cudaFree(p));
}
void copy(void* dst, Device dd, const void* src, Device sd, std::size_t bytes) {
  if (dd.kind == DeviceKind::cuda) PIPELINK_CUDA_CHECK(cudaSetDevice(dd.index));
  else if (sd.kind == DeviceKind::cuda) PIPELINK_CUDA_CHECK(cudaSetDevice(sd.index));
  PIPELINK_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
void memset_zero(void* dst, int device, std::size_t bytes) {
  PIPELINK_CUDA_CHECK(cudaSetDevice(device));
  PIPELINK_CUDA_CHECK(cudaMemset(dst, 0, bytes));
}

DeviceDesc describe_device(int index) {
  if (index >= device_count())
    throw BackendUnavailableError("cuda:" + std::to_string(index) + " requested but " + std::to_string(device_count()) +
                                  " CUDA device(s) are present");
  cudaDeviceProp prop{};
  PIPELINK_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceDesc d;
  d.kind = DeviceKind::cuda;
  d.name = prop.name;
  d.sm = prop.major * 10 + prop.minor;
  d.multiprocessors = prop.multiProcessorCount;
  d.l2_bytes = std::size_t(prop.l2CacheSize);
  d.memory_bytes = prop.totalGlobalMem;
  d.shared_mem_per_block = prop.sharedMemPerBlockOptin;
  if (d.sm >= 90) d.features.insert("vector_atomics");  // red.global.add.v4.f32
  return d;
}

// Installed when the shared library loads; no CUDA call happens until a device is used.
const bool installed = [] {
  set_device_allocator_hooks(DeviceKind::cuda, {&allocate, &deallocate, &copy, &memset_zero});
  set_cuda_describer(&describe_device);
  set_cuda_device_counter(&device_count);
  return true;
}();

}  // namespace
}  // namespace pipelink::cuda
