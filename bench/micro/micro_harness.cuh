#pragma once
// Shared by the standalone micro-benchmarks in bench/micro (not part of the library build): a
// CUDA-call check, device-event timing (one warm-up, then the samples) and a one-line report of
// median, min and max.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(call)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

namespace micro {

using i64 = std::int64_t;

/// `name  median ms  (min..max)  note`, the name padded to `width`.
inline void report(const char* name, std::vector<float> t, const char* note = "", int width = 52) {
  std::sort(t.begin(), t.end());
  std::printf("%-*s %8.3f ms  (%.3f..%.3f)  %s\n", width, name, t[t.size() / 2], t.front(), t.back(), note);
  std::fflush(stdout);
}

/// f once as warm-up, then `reps` samples of f between device events (ms).
inline std::vector<float> timed(const std::function<void()>& f, int reps = 10) {
  static cudaEvent_t a = nullptr, b = nullptr;
  if (!a) {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  f();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  return t;
}

template <class T>
T* dalloc(i64 n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::size_t(n) * sizeof(T)));
  return p;
}

}  // namespace micro
