// CUDA backend runtime pieces: device memory hooks for TensorBuilder / to_device, the device
// description for the downgrade policy, and the error-check functions. Kernels arrive with the
// CUDA aggregate (next issue); this file only needs the CUDA runtime API.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <climits>
#include <stdexcept>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "cuda/check.cuh"
#include "cuda/memory.cuh"
#include "pipelink/cuda.hpp"
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
std::atomic<std::size_t> g_current{0}, g_peak{0};

void note_alloc(std::size_t bytes) noexcept {
  const std::size_t now = g_current.fetch_add(bytes) + bytes;
  std::size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void note_free(std::size_t bytes) noexcept { g_current.fetch_sub(bytes); }

// Sizes of TensorBuilder allocations, whose deallocation hook gets only the pointer.
std::mutex g_sizes_mu;
std::unordered_map<void*, std::size_t> g_sizes;
}  // namespace

namespace detail {
// The scratch pool: PipeLink's own stream-ordered pool (one a device, made at first use, kept for
// the process) for allocations made under a ScratchPoolScope, which one-shot calls open around
// their whole build and run. It holds nothing past the call that allocated it, so each call
// finds it as the last one left it (all free) and makes the same requests into it.
// Why: with the one-shot's ~1.4 GB of build scratch in the default pool beside a persistent
// plan's buffers, the driver remapped ~1 GB of the pool at every call (compare_torch's
// products-like one-shot trace, H200, 55bb24d: one cudaMallocAsync of 640-902 us a call, the
// row's median 6.60 ms; 6.06 against 7.02 ms with the scratch pool, 2135777, BENCHMARKS v30).
static thread_local int g_scratch_scope = 0;  // this file only

cudaMemPool_t scratch_pool_if_made(int device) noexcept;
cudaMemPool_t scratch_pool(int device);

// Gives the idle blocks of the device's default pool and of its scratch pool back to the driver
// (freed blocks whose stream work is done); the first error, if any.
cudaError_t trim_pools_status(int device) noexcept {
  cudaMemPool_t pool = nullptr;
  cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, device);
  if (e == cudaSuccess) e = cudaMemPoolTrimTo(pool, 0);
  if (cudaMemPool_t own = scratch_pool_if_made(device); own && e == cudaSuccess) e = cudaMemPoolTrimTo(own, 0);
  return e;
}
void trim_pools(int device) { PIPELINK_CUDA_CHECK(trim_pools_status(device)); }

// The pool keeps freed scratch (see alloc_async); an allocation that finds the device full gives
// that memory back to the driver and tries once more, so plans built earlier never starve a
// later tensor (the reach sweep: a 2^32-edge plan's 69 GB, then 103 GB of 2^33-edge inputs).
// Not while `stream` is being captured into a graph: the device-wide synchronization would
// invalidate the capture, so the error is returned as it is.
template <class F>
cudaError_t with_pool_retry(cudaStream_t stream, F&& attempt) {
  cudaError_t e = attempt();
  if (e != cudaErrorMemoryAllocation) return e;
  (void)cudaGetLastError();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError();
    return e;
  }
  int dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess) (void)trim_pools_status(dev);
  (void)cudaGetLastError();
  return attempt();
}

// An allocation's error: out of memory says what was asked for and what was there ("out of
// memory" alone does not tell a user whether a smaller input, another path or a fuller device
// would help); anything else as PIPELINK_CUDA_CHECK reports it.
void check_allocation(cudaError_t e, std::size_t bytes, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  if (e != cudaErrorMemoryAllocation) throw_cuda_error(e, what, __FILE__, __LINE__);
  std::size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  (void)cudaGetLastError();
  throw OutOfMemoryError(bytes, free_b,
                         std::string("CUDA out of memory: ") + what + " of " + std::to_string(bytes) + " bytes failed with " +
                             std::to_string(free_b) + " of " + std::to_string(total_b) +
                             " bytes free on the device (" + std::to_string(g_current.load()) + " bytes held by PipeLink)");
}

// One stream-ordered request: from the scratch pool inside a ScratchPoolScope, else from the
// device's default pool.
cudaError_t malloc_async(void** p, std::size_t bytes, cudaStream_t stream) {
  if (g_scratch_scope > 0) {
    int dev = 0;
    PIPELINK_CUDA_CHECK(cudaGetDevice(&dev));
    if (cudaMemPool_t own = scratch_pool(dev)) return cudaMallocFromPoolAsync(p, bytes, own, stream);
  }
  return cudaMallocAsync(p, bytes, stream);
}

void* alloc_async(std::size_t bytes, cudaStream_t stream) {
  // The default pool gives memory back to the driver at every synchronization (release
  // threshold 0), so each one-shot call re-mapped its ~1 GB plan; keep it instead.
  // Once per device: one flag for the process set only the first device's pool (a review,
  // session 46), and the others gave their memory back at every synchronization.
  // Marked only once set: a failed query is asked again at the next allocation, where a
  // once_flag was used up by it and the pool kept giving its memory back (a review, session 48).
  // Two threads may both set it: the same value.
  static std::array<std::atomic<bool>, 64> retained{};
  int dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < int(retained.size()) &&
      !retained[std::size_t(dev)].load(std::memory_order_acquire)) {
    cudaMemPool_t pool = nullptr;
    std::uint64_t keep = UINT64_MAX;
    if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess)
      retained[std::size_t(dev)].store(true, std::memory_order_release);
    (void)cudaGetLastError();
  }
  void* p = nullptr;
  check_allocation(with_pool_retry(stream, [&] { return malloc_async(&p, bytes, stream); }), bytes,
                   "a stream-ordered allocation");
  note_alloc(bytes);
  return p;
}
void* try_alloc_async(std::size_t bytes, cudaStream_t stream) {
  void* first = nullptr;
  const cudaError_t e = with_pool_retry(stream, [&] { return malloc_async(&first, bytes, stream); });
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  PIPELINK_CUDA_CHECK(e);
  note_alloc(bytes);
  return first;
}
void free_async(void* p, std::size_t bytes, cudaStream_t stream, int device) noexcept {
  const DeviceGuard device_guard(device, DeviceGuard::NoThrow{});
  PIPELINK_CUDA_CHECK_NOEXCEPT(cudaFreeAsync(p, stream));
  note_free(bytes);
}
int current_device() noexcept {
  int d = 0;
  PIPELINK_CUDA_CHECK_NOEXCEPT(cudaGetDevice(&d));
  return d;
}
static std::mutex g_scratch_mu;
static std::unordered_map<int, cudaMemPool_t> g_scratch_pools;  // nullptr: the device has no memory pools

cudaMemPool_t scratch_pool_if_made(int device) noexcept {
  std::lock_guard lock(g_scratch_mu);
  const auto it = g_scratch_pools.find(device);
  return it == g_scratch_pools.end() ? nullptr : it->second;
}

cudaMemPool_t scratch_pool(int device) {
  std::lock_guard lock(g_scratch_mu);
  if (const auto it = g_scratch_pools.find(device); it != g_scratch_pools.end()) return it->second;
  int supported = 0;
  PIPELINK_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device));
  cudaMemPool_t pool = nullptr;
  if (supported) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    PIPELINK_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    // Keeps its blocks across synchronizations, as the default pool does here (alloc_async):
    // released only by a trim (release_cached_memory, or an allocation that finds the device full).
    std::uint64_t keep = UINT64_MAX;
    if (const cudaError_t e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep); e != cudaSuccess) {
      (void)cudaMemPoolDestroy(pool);
      (void)cudaGetLastError();
      throw_cuda_error(e, "cudaMemPoolSetAttribute(scratch pool, release threshold)", __FILE__, __LINE__);
    }
  }
  try {
    g_scratch_pools.emplace(device, pool);  // never destroyed: blocks may be in flight at exit
  } catch (...) {  // a host allocation failing in the insert: the pool, unused, is not leaked
    if (pool) (void)cudaMemPoolDestroy(pool);
    throw;
  }
  return pool;
}

ScratchPoolScope::ScratchPoolScope(bool on) : on_(on) {
  if (on_) ++g_scratch_scope;
}
ScratchPoolScope::~ScratchPoolScope() {
  if (on_) --g_scratch_scope;
}

std::size_t settled_free_bytes(cudaStream_t stream) {
  PIPELINK_CUDA_CHECK(cudaStreamSynchronize(stream));
  int dev = 0;
  PIPELINK_CUDA_CHECK(cudaGetDevice(&dev));
  trim_pools(dev);
  std::size_t free_b = 0, total_b = 0;
  PIPELINK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}
}  // namespace detail

// ---- DeviceGuard -------------------------------------------------------------------------------

namespace {
// The driver's cuCtxGetCurrent / cuCtxSetCurrent, through the runtime (no link to libcuda: the
// CPU-only CI machine has no driver, and the CUDA build's binaries must still load there).
// CUresult is an int-sized enum and CUcontext a pointer.
struct CtxApi {
  int (*get)(void**) = nullptr;
  int (*set)(void*) = nullptr;
};
const CtxApi& ctx_api() noexcept {
  static const CtxApi api = [] {
    CtxApi a;
    void* get = nullptr;
    void* set = nullptr;
    cudaDriverEntryPointQueryResult q1{}, q2{};
#if CUDART_VERSION >= 12050
    const auto lookup = [](const char* name, void** fn, cudaDriverEntryPointQueryResult* q) {
      return cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, q);
    };
#else  // 12.0-12.4: the lookup without a version (deprecated since)
    const auto lookup = [](const char* name, void** fn, cudaDriverEntryPointQueryResult* q) {
      return cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, q);
    };
#endif
    if (lookup("cuCtxGetCurrent", &get, &q1) == cudaSuccess && lookup("cuCtxSetCurrent", &set, &q2) == cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess && q2 == cudaDriverEntryPointSuccess && get && set) {
      a.get = reinterpret_cast<int (*)(void**)>(get);
      a.set = reinterpret_cast<int (*)(void*)>(set);
    }
    (void)cudaGetLastError();
    return a;
  }();
  return api;
}
}  // namespace

DeviceGuard::DeviceGuard(int device) {
  PIPELINK_CUDA_CHECK(cudaGetDevice(&prev_device_));
  if (prev_device_ == device) return;
  // Only a context that was read is given back (a failed read would have restored "none").
  if (const CtxApi& api = ctx_api(); api.get) ctx_saved_ = api.get(&prev_ctx_) == 0;
  PIPELINK_CUDA_CHECK(cudaSetDevice(device));
  set_ = true;
}

DeviceGuard::DeviceGuard(int device, NoThrow) noexcept {
  // No device to ask (the runtime unloading at exit, where a static's buffers may be freed): the
  // free that follows reports its own error; nothing is logged twice.
  if (cudaGetDevice(&prev_device_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (prev_device_ == device) return;
  if (const CtxApi& api = ctx_api(); api.get) ctx_saved_ = api.get(&prev_ctx_) == 0;
  PIPELINK_CUDA_CHECK_NOEXCEPT(cudaSetDevice(device));
  set_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (!set_) return;
  // The caller's context itself (none, if it had none); the device number where the driver's
  // entry points are not to be had.
  if (const CtxApi& api = ctx_api(); api.set && ctx_saved_) {
    if (api.set(prev_ctx_) != 0) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaSetDevice(prev_device_));
  } else {
    PIPELINK_CUDA_CHECK_NOEXCEPT(cudaSetDevice(prev_device_));
  }
}

MemoryStats memory_stats() noexcept { return {g_current.load(), g_peak.load()}; }
namespace {
int device_count() noexcept;                          // below
void require_device(int device, const char* what);  // below
}  // namespace

PoolStats scratch_pool_stats(int device) {
  require_device(device, "scratch_pool_stats");
  PoolStats st;
  cudaMemPool_t pool = detail::scratch_pool_if_made(device);
  if (!pool) return st;
  std::uint64_t v = 0;
  PIPELINK_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v));
  st.reserved = std::size_t(v);
  PIPELINK_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v));
  st.used = std::size_t(v);
  PIPELINK_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v));
  st.used_peak = std::size_t(v);
  return st;
}

void reset_peak_memory() noexcept { g_peak.store(g_current.load()); }

std::pair<std::size_t, std::size_t> device_memory_info(int device) {
  const DeviceGuard device_guard(device);
  std::size_t free_b = 0, total_b = 0;
  PIPELINK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {free_b, total_b};
}
RuntimeFacts runtime_facts(int device) {
  require_device(device, "runtime_facts");
  RuntimeFacts f;
  f.built_with = CUDART_VERSION;
  // A fact that cannot be read stays 0 (and its error is cleared): a benchmark records what it
  // can rather than fail over a label.
  auto read = [](cudaError_t e, int& v) {
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      v = 0;
    }
  };
  read(cudaDriverGetVersion(&f.driver_version), f.driver_version);
  read(cudaRuntimeGetVersion(&f.runtime_version), f.runtime_version);
  read(cudaDeviceGetAttribute(&f.sm_clock_peak_khz, cudaDevAttrClockRate, device), f.sm_clock_peak_khz);
  read(cudaDeviceGetAttribute(&f.memory_clock_peak_khz, cudaDevAttrMemoryClockRate, device), f.memory_clock_peak_khz);
  return f;
}
void synchronize(int device) {
  const DeviceGuard device_guard(device);
  PIPELINK_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {
__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
template <class T>
__global__ void fill_uniform_kernel(T* p, std::int64_t n, double lo, double hi, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    const double u = double(splitmix64(seed ^ splitmix64(std::uint64_t(i))) >> 11) * 0x1.0p-53;
    const T v = T(lo + (hi - lo) * u);
    p[i] = v < T(hi) ? v : T(lo);  // rounding to T can reach hi; the range is [lo, hi)
  }
}
template <class T>
__global__ void fill_indices_kernel(T* p, std::int64_t count, std::uint64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    p[i] = T(splitmix64(seed ^ splitmix64(std::uint64_t(i))) % n);  // modulo bias < n / 2^64
}
void require_contiguous_device(const TensorView& t, const char* what) {
  if (t.device().kind != DeviceKind::cuda || !t.is_contiguous())
    throw std::invalid_argument(std::string(what) + ": needs a contiguous CUDA tensor, got " + t.device().str());
}
}  // namespace

void fill_random_uniform(const TensorView& t, double lo, double hi, std::uint64_t seed, void* stream) {
  require_contiguous_device(t, "fill_random_uniform");
  const DeviceGuard device_guard(t.device().index);
  const std::int64_t n = t.numel();
  if (n == 0) return;
  if (t.dtype() == DType::f32) fill_uniform_kernel<float><<<1024, 256, 0, static_cast<cudaStream_t>(stream)>>>(t.data_as<float>(), n, lo, hi, seed);
  else if (t.dtype() == DType::f64) fill_uniform_kernel<double><<<1024, 256, 0, static_cast<cudaStream_t>(stream)>>>(t.data_as<double>(), n, lo, hi, seed);
  else throw std::invalid_argument("fill_random_uniform: float32 or float64 only");
  PIPELINK_CUDA_CHECK(cudaGetLastError());
}

void fill_random_indices(const TensorView& t, std::int64_t n, std::uint64_t seed, void* stream) {
  require_contiguous_device(t, "fill_random_indices");
  if (n < 1) throw std::invalid_argument("fill_random_indices: n must be >= 1");
  const DeviceGuard device_guard(t.device().index);
  const std::int64_t count = t.numel();
  if (count == 0) return;
  if (t.dtype() == DType::i32) {
    if (n > INT32_MAX) throw std::invalid_argument("fill_random_indices: n does not fit int32");
    fill_indices_kernel<std::int32_t><<<1024, 256, 0, static_cast<cudaStream_t>(stream)>>>(t.data_as<std::int32_t>(), count, std::uint64_t(n), seed);
  } else if (t.dtype() == DType::i64) {
    fill_indices_kernel<std::int64_t><<<1024, 256, 0, static_cast<cudaStream_t>(stream)>>>(t.data_as<std::int64_t>(), count, std::uint64_t(n), seed);
  } else {
    throw std::invalid_argument("fill_random_indices: int32 or int64 only");
  }
  PIPELINK_CUDA_CHECK(cudaGetLastError());
}

void release_cached_memory(int device) {
  require_device(device, "release_cached_memory");
  // The caller's current device is left as it was (torch allocates on it next).
  const DeviceGuard device_guard(device);
  PIPELINK_CUDA_CHECK(cudaDeviceSynchronize());
  detail::trim_pools(device);
  // The scratch pool's used_peak starts again from what is in use now (0 is the only value the
  // attribute takes: the driver sets it to the current use).
  if (cudaMemPool_t own = detail::scratch_pool_if_made(device)) {
    std::uint64_t zero = 0;
    PIPELINK_CUDA_CHECK(cudaMemPoolSetAttribute(own, cudaMemPoolAttrUsedMemHigh, &zero));
  }
}

Stream::Stream(int device) : device_(device) {
  const DeviceGuard device_guard(device);
  cudaStream_t s = nullptr;
  PIPELINK_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  handle_ = s;
}
Stream::~Stream() {
  if (handle_) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(static_cast<cudaStream_t>(handle_)));
}
void Stream::synchronize() const { PIPELINK_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_))); }

Event::Event() {
  cudaEvent_t e = nullptr;
  PIPELINK_CUDA_CHECK(cudaEventCreate(&e));
  handle_ = e;
}
Event::~Event() {
  if (handle_) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(static_cast<cudaEvent_t>(handle_)));
}
void Event::record(void* stream) {
  PIPELINK_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream)));
}
void Event::synchronize() const { PIPELINK_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_))); }
float Event::elapsed_ms(const Event& start) const {
  float ms = 0;
  PIPELINK_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_), static_cast<cudaEvent_t>(handle_)));
  return ms;
}

namespace {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no GPU: not an error for a CPU-only run
    return 0;
  }
  return n;
}

// A device index a public memory call was given: BackendUnavailableError where no device is
// present (Python: pipelink.BackendUnavailableError), std::invalid_argument past the last one.
void require_device(int device, const char* what) {
  const int n = device_count();
  if (n == 0) throw BackendUnavailableError(std::string(what) + ": no CUDA device is present");
  if (device < 0 || device >= n)
    throw std::invalid_argument(std::string(what) + ": no CUDA device " + std::to_string(device) + " (" +
                                std::to_string(n) + " present)");
}

void* allocate(std::size_t bytes, int device) {
  const DeviceGuard device_guard(device);
  void* p = nullptr;
  detail::check_allocation(detail::with_pool_retry(nullptr, [&] { return cudaMalloc(&p, bytes); }), bytes,
                           "a tensor's allocation");
  // The size is recorded before it is counted: a host allocation failing in the map's insert
  // frees p, where it leaked p and left the counters raised (a review, session 48).
  try {
    std::lock_guard lock(g_sizes_mu);
    g_sizes[p] = bytes;
  } catch (...) {
    PIPELINK_CUDA_CHECK_NOEXCEPT(cudaFree(p));
    throw;
  }
  note_alloc(bytes);
  return p;
}
void deallocate(void* p, int device) noexcept {
  const DeviceGuard device_guard(device, DeviceGuard::NoThrow{});
  PIPELINK_CUDA_CHECK_NOEXCEPT(cudaFree(p));
  std::lock_guard lock(g_sizes_mu);
  if (auto it = g_sizes.find(p); it != g_sizes.end()) {
    note_free(it->second);
    g_sizes.erase(it);
  }
}
void copy(void* dst, Device dd, const void* src, Device sd, std::size_t bytes) {
  std::optional<DeviceGuard> device_guard;
  if (dd.kind == DeviceKind::cuda || sd.kind == DeviceKind::cuda)
    device_guard.emplace(dd.kind == DeviceKind::cuda ? dd.index : sd.index);
  PIPELINK_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
void memset_zero(void* dst, int device, std::size_t bytes) {
  const DeviceGuard device_guard(device);
  PIPELINK_CUDA_CHECK(cudaMemset(dst, 0, bytes));
}

void copy2d(void* dst, std::size_t dpitch, Device dd, const void* src, std::size_t spitch, Device sd, std::size_t width,
            std::size_t height) {
  std::optional<DeviceGuard> device_guard;
  if (dd.kind == DeviceKind::cuda || sd.kind == DeviceKind::cuda)
    device_guard.emplace(dd.kind == DeviceKind::cuda ? dd.index : sd.index);
  PIPELINK_CUDA_CHECK(cudaMemcpy2D(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault));
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
  set_device_allocator_hooks(DeviceKind::cuda, {&allocate, &deallocate, &copy, &memset_zero, &copy2d});
  set_cuda_describer(&describe_device);
  set_cuda_device_counter(&device_count);
  return true;
}();

}  // namespace
}  // namespace pipelink::cuda
