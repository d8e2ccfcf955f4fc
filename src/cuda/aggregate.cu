// CUDA backend of the message-passing ops: the fused aggregate (one-shot and planned: CSR by
// destination, a warp per row, deterministic; lean: atomic accumulation, no scratch), and the
// three-op reference (gather_scale, map, index_add).
//
// Bytes that must move for products-like (E = 61.9M, F = 64, float32): one gathered 256-byte x
// row per edge (15.8 GB) + the plan's src and edge-id columns (0.5 GB) + w gathered through the
// edge ids (one 32-byte sector per edge: 2.0 GB) + the output (0.63 GB): ~19 GB, 4.5 ms at the
// 4.26 TB/s copy bandwidth PROTOCOL.md measured. Rows of x re-read from L2 are the only way below.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/reverse_iterator.h>
#include <cuda/functional>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/aggregate_plan_impl.hpp"
#include "core/spread_order.hpp"
#include "cuda/aggregate_common.cuh"
#include "cuda/check.cuh"
#include "pipelink/cuda.hpp"
#include "cuda/knobs.hpp"
#include "cuda/memory.cuh"
#include "cuda/msd_levels.hpp"
#include "cuda/short_build.hpp"
#include "cuda/tanh_f32.cuh"
#include "pipelink/debug.hpp"
#include "pipelink/ops/reference.hpp"
#include "pipelink/registry.hpp"

namespace pipelink::detail {
void log_message(LogLevel level, const std::string& msg);  // src/core/log.cpp (fmt stays out of nvcc)
}

namespace pipelink::cuda {
namespace {

using namespace knobs;  // cuda/knobs.hpp: the PIPELINK_AGG_* knobs and their defaults
using namespace agg;    // cuda/aggregate_common.cuh: what the walk's unit shares

using detail::DeviceBuffer;
using detail::ScratchPoolScope;
using detail::settled_free_bytes;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// Device buffers carved from one allocation start on 256-byte boundaries.
std::size_t round_up_256(std::size_t b) { return (b + 255) / 256 * 256; }

// ---- index validation ------------------------------------------------------------------------

// The validation's verdict lives in a module variable, not an allocation, so that the lean path
// holds zero bytes of scratch; a host mutex serializes the (synchronizing) validations that use it.
__device__ unsigned long long g_first_bad;
std::mutex g_first_bad_mu;

template <class I>
__global__ void first_bad_edge_kernel(const I* src, const I* dst, std::int64_t E, std::uint64_t N,
                                      unsigned long long* first_bad) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const bool bad_src = src && std::uint64_t(std::int64_t(src[e])) >= N;
    const bool bad_dst = dst && std::uint64_t(std::int64_t(dst[e])) >= N;
    if (bad_src || bad_dst) atomicMin(first_bad, (unsigned long long)e);
  }
}

std::int64_t read_index(const TensorView& v, std::int64_t e) {
  std::int64_t value = 0;
  if (v.dtype() == DType::i32) {
    std::int32_t x = 0;
    PIPELINK_CUDA_CHECK(cudaMemcpy(&x, v.data_as<const std::int32_t>() + e, 4, cudaMemcpyDeviceToHost));
    value = x;
  } else {
    PIPELINK_CUDA_CHECK(cudaMemcpy(&value, v.data_as<const std::int64_t>() + e, 8, cudaMemcpyDeviceToHost));
  }
  return value;
}

// The one capture query (stream_capturing and refuse_capture read it their own ways): sets
// `capturing` where work queued on q now would be captured into a CUDA graph, and returns the
// query's error. Asking about the legacy stream while another stream captures is itself an error,
// cudaErrorStreamCaptureImplicit: a capture, cleared, and success.
cudaError_t capture_query(cudaStream_t q, bool& capturing) {
  cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(q, &c);
  capturing = e == cudaErrorStreamCaptureImplicit || (e == cudaSuccess && c != cudaStreamCaptureStatusNone);
  if (e == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return cudaSuccess;
  }
  return e;
}

// Whether work queued on q now would be captured: any failed query is taken as a capture (and
// cleared), so that callers skip what a capture forbids.
bool stream_capturing(cudaStream_t q) {
  bool capturing = false;
  if (capture_query(q, capturing) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return capturing;
}

// Calls that read their index check's verdict on the host (one-shot, lean, gather_scale,
// index_add, a plan build) cannot be held by a CUDA graph (README). Said before any work: inside
// a capture they failed deep in with a raw CUDA error after queueing work into it, and the
// one-shot's MSD sort pulled the process's copy stream into the caller's capture (a review,
// session 46); a plan build's first status slot, a pinned allocation refused under capture, turned
// the slots off for the process (a review, session 48). Asked with the call's device current (a
// null stream is that device's). Only a capture counts as one: another error (a sticky one from
// earlier work) is thrown as itself, where stream_capturing would read it as a capture.
void refuse_capture(cudaStream_t s, const std::string& what, const char* instead) {
  bool capturing = false;
  PIPELINK_CUDA_CHECK(capture_query(s, capturing));
  if (capturing)
    throw Error(what + " cannot be captured into a CUDA graph (its index check's verdict is read on the host); " +
                instead +
                ". (Its stream is being captured, or it is the legacy default stream while another stream captures.)");
}
void refuse_capture(const OpContext& ctx, const char* path) {
  refuse_capture(as_stream(ctx.stream), std::string("aggregate: a ") + path + " call",
                 "build an AggregatePlan and capture its runs");
}

/// Throws IndexOutOfRangeError for edge `bad` (ULLONG_MAX: nothing bad), src checked first.
void report_bad_edge(const char* op, const TensorView* src, const TensorView* dst, std::int64_t N,
                     unsigned long long bad) {
  if (bad == ULLONG_MAX) return;
  const auto e = std::int64_t(bad);
  if (src) {
    const std::int64_t v = read_index(*src, e);
    if (v < 0 || v >= N) throw IndexOutOfRangeError(op, "src", e, v, N);
  }
  throw IndexOutOfRangeError(op, "dst", e, read_index(*dst, e), N);
}

/// One pass over the index arrays (either may be null) on the device; throws IndexOutOfRangeError
/// naming the first bad edge (src before dst) before anything else is written. Synchronizes.
void validate_indices(const char* op, const TensorView* src, const TensorView* dst, std::int64_t N, cudaStream_t s) {
  const TensorView& any = src ? *src : *dst;
  const std::int64_t E = any.numel();
  if (E == 0) return;
  std::lock_guard lock(g_first_bad_mu);
  unsigned long long* flag = nullptr;
  PIPELINK_CUDA_CHECK(cudaGetSymbolAddress(reinterpret_cast<void**>(&flag), g_first_bad));
  PIPELINK_CUDA_CHECK(cudaMemsetAsync(flag, 0xFF, sizeof(unsigned long long), s));
  if (any.dtype() == DType::i32)
    first_bad_edge_kernel<<<grid_for(E, 256), 256, 0, s>>>(src ? src->data_as<const std::int32_t>() : nullptr,
                                                           dst ? dst->data_as<const std::int32_t>() : nullptr, E,
                                                           std::uint64_t(N), flag);
  else
    first_bad_edge_kernel<<<grid_for(E, 256), 256, 0, s>>>(src ? src->data_as<const std::int64_t>() : nullptr,
                                                           dst ? dst->data_as<const std::int64_t>() : nullptr, E,
                                                           std::uint64_t(N), flag);
  check_launch();
  unsigned long long bad = ULLONG_MAX;
  PIPELINK_CUDA_CHECK(cudaMemcpyAsync(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost, s));
  PIPELINK_CUDA_CHECK(cudaStreamSynchronize(s));
  report_bad_edge(op, src, dst, N, bad);
}

// ---- plan build: one stable radix sort of dst -> (src, edge id) pairs -----------------------
//
// v5 (measured on the H200, products-like, bench/micro/aggregate_micro.cu): sorting (dst, id)
// and then gathering src through the sorted ids cost 0.31 (init) + 1.5 (sort) + 1.6 ms (the
// random 8-byte src gather); sorting (src, id) pairs as the values costs 0.47 (init, with the
// validation of both index arrays folded in) + 1.69 ms and no gather.

/// Plan entries (EdgePair, PlanPair), the weights' modes (kW*) and the 24-bit column: cuda/aggregate_common.cuh.

// Wide plans: key = dst << id_bits | edge id, sorted on the dst bits only (stable, so edge ids
// ascend within a row), then turned in place into the packed pair (id << src_bits | src[id]).
// 16 bytes per edge during the build instead of 24 (the reach sweep runs E = 2^32 in 139 GB).
template <class I>
__global__ void init_wide_keys_kernel(const I* src, const I* dst, std::uint64_t* keys, std::int64_t E, std::uint64_t N,
                                      int id_bits, unsigned long long* first_bad) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t s = std::uint64_t(std::int64_t(src[e])), d = std::uint64_t(std::int64_t(dst[e]));
    if (s >= N || d >= N) atomicMin(first_bad, (unsigned long long)e);
    keys[e] = (d << id_bits) | std::uint64_t(e);
  }
}
template <class I>
__global__ void wide_keys_to_pairs_kernel(std::uint64_t* keys, const I* src, std::int64_t E, std::uint64_t N, int id_bits,
                                          int src_bits) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < E;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t id = keys[k] & ((std::uint64_t(1) << id_bits) - 1);
    const std::uint64_t sv = std::uint64_t(std::int64_t(src[id]));
    keys[k] = (id << src_bits) | (sv < N ? sv : 0);  // bad indices: reported before the plan is used
  }
}

// fw (one-shot plans, float32 weights): the pair carries w[e]'s bits instead of the id e.
template <class I, class K, class P>
__global__ void init_pairs_kernel(const I* src, const I* dst, K* keys, EdgePair<P>* pairs, std::int64_t E,
                                  std::uint64_t N, unsigned long long* first_bad, const float* fw) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const I s = src[e], d = dst[e];
    if (std::uint64_t(std::int64_t(s)) >= N || std::uint64_t(std::int64_t(d)) >= N)
      atomicMin(first_bad, (unsigned long long)e);
    keys[e] = K(d);
    pairs[e] = EdgePair<P>{P(s), fw ? P(__float_as_int(fw[e])) : P(e)};
  }
}

// ---- the build's first radix pass, fused with the init ----------------------------------------
//
// Why: the narrow build was an init kernel (read src and dst, 8 bytes an edge; write the key and
// the pair, 12) and CUB's three onesweep passes of the 22-bit key (each reading and writing 12).
// Traced at 8d9458d (products-like, H200): init 0.47-0.53 ms, CUB 1.80-1.83. The first radix
// pass can read src and dst itself: a digit count (dst, 4 bytes an edge) and one stable scatter
// by the low kFirstBits bits that writes the key and the pair, and CUB sorts the rest (16 bits
// on products-like: two passes). That moves 24 bytes an edge where init and CUB's first pass
// moved 44 (~1.2 GB less on products-like). Counted: build 2.5 -> ~2.0-2.1 ms (the scatter at
// CUB's pass rate). Measured (H200, products-like, same process, `bench --ab`): at 8 bits with
// __match_any_sync the first pass took 1.48 ms, with ballots 1.15, against 0.51 for the init
// and 0.56 for CUB's first pass; as below (6 bits, SASS 4096 -> 2112 instructions) 0.90-1.03,
// and the build 2.34 ms against 2.46-2.52 (67959e0, v23). Halving the instructions took only
// ~20% off the scatter: not issue alone (barrier phases, two blocks an SM; not profiled).
//
// The tile partition is the same in both kernels: tile t is edges [t * kFirstTile, ...). counts
// and offsets are digit-major ([digit][tile]), so one exclusive sum over them gives each (digit,
// tile) its first place in the pass's output, stable across tiles.
// 6 bits, not CUB's 8: products-like's 22-bit key still takes two CUB passes after it (16 bits),
// and the ranking's digit match is a ballot a bit (at 8 bits and with the match in both of the
// scatter's passes, the pass issued ~8 warp instructions an edge and took 1.15 ms: 84c9450).
constexpr int kFirstBits = 6, kFirstDigits = 1 << kFirstBits;
constexpr int kFirstWarps = 16, kFirstRounds = 16, kFirstThreads = kFirstWarps * 32;
constexpr int kFirstTile = kFirstThreads * kFirstRounds;  // 8192 edges: 96 KB of keys and pairs staged
constexpr std::size_t kFirstSmem = std::size_t(kFirstTile) * (sizeof(std::uint32_t) + sizeof(EdgePair<std::int32_t>));

// The lanes of `active` whose digit (Bits bits: the first pass's kFirstBits, the MSD sort's
// second level kLevelBits) equals this lane's, from a ballot a bit, as CUB's MatchAny: every lane
// of the warp must call it. Why not __match_any_sync: with it the first pass took 1.48 ms on
// products-like (H200, 8be91af, trace), ~4x its bytes' time.
template <int Bits = kFirstBits>
__device__ __forceinline__ unsigned match_digit(std::uint32_t d, unsigned active) {
  unsigned m = active;
#pragma unroll
  for (int b = 0; b < Bits; ++b) {
    // The lanes whose bit b equals this lane's: the ballot of "bit b set", inverted where this
    // lane's bit is clear. In PTX so that the predicate feeds both (with __ballot_sync and a
    // select, nvcc 13.0 spent ~7 instructions a bit on it, ~4 here).
    unsigned v;
    asm("{\n\t.reg .pred p;\n\t"
        "and.b32 %0, %1, %2;\n\t"
        "setp.ne.u32 p, %0, 0;\n\t"
        "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t"
        "@!p not.b32 %0, %0;\n\t}"
        : "=r"(v)
        : "r"(d), "r"(1u << b));
    m &= v;
  }
  return m;
}

// An index outside [0, N) of a narrow plan (N < 2^31): negative int64 values wrap above N.
template <class I>
__device__ __forceinline__ bool narrow_index_bad(I v, std::uint64_t N) {
  return sizeof(I) == 4 ? std::uint32_t(v) >= std::uint32_t(N) : std::uint64_t(std::int64_t(v)) >= N;
}

// Column d of a block's per-warp digit counts, wh[warp][d], becomes each warp's first place
// among the tile's edges of digit d (the counts of the warps before it); returns the tile's count.
template <int Digits = kFirstDigits>
__device__ __forceinline__ std::uint32_t warp_bases_in_place(std::uint32_t (*wh)[Digits], int d) {
  std::uint32_t total = 0;
#pragma unroll
  for (int w = 0; w < kFirstWarps; ++w) {
    const std::uint32_t c = wh[w][d];
    wh[w][d] = total;
    total += c;
  }
  return total;
}

// A tile's starts a digit, from each warp's counts in wh[warp][d] (turned into each warp's base):
// lstart[d], the digit's first place in the tile sorted by digit, and gstart[d] = place(d), its
// first place in the pass's output. Every thread of the block calls it; it ends at a barrier.
// The first pass's count phase and the MSD sort's level scatter.
template <int Digits, class Scan, class Place>
__device__ __forceinline__ void tile_digit_starts(std::uint32_t (*wh)[Digits], std::uint32_t* lstart, std::uint32_t* gstart,
                                                  typename Scan::TempStorage& temp, Place place) {
  std::uint32_t total = 0;
  if (threadIdx.x < Digits) {
    total = warp_bases_in_place<Digits>(wh, threadIdx.x);
    gstart[threadIdx.x] = place(threadIdx.x);
  }
  std::uint32_t first = 0;
  Scan(temp).ExclusiveSum(total, first);
  if (threadIdx.x < Digits) lstart[threadIdx.x] = first;
  __syncthreads();
}

template <class I>
__global__ void __launch_bounds__(256) first_digit_counts_kernel(const I* __restrict__ dst, std::int64_t E,
                                                                 std::uint32_t mask, std::uint32_t* __restrict__ counts) {
  __shared__ std::uint32_t h[kFirstDigits];
  for (int i = threadIdx.x; i < kFirstDigits; i += blockDim.x) h[i] = 0;
  __syncthreads();
  const std::int64_t t0 = std::int64_t(blockIdx.x) * kFirstTile;
  const int n = int(E - t0 < kFirstTile ? E - t0 : kFirstTile);
#pragma unroll 8
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&h[std::uint32_t(dst[t0 + i]) & mask], 1u);
  __syncthreads();
  for (int d = threadIdx.x; d < kFirstDigits; d += blockDim.x) counts[std::int64_t(d) * gridDim.x + blockIdx.x] = h[d];
}

// The warp form's counts (PIPELINK_AGG_BUILD_FIRST=warp): the tile's digit counts as
// first_digit_counts_kernel's, and each warp's first place a digit in the tile's sorted order
// (the tile's digit start plus the same digit's count in the warps before it), so that the
// scatter starts at its ranking: no count phase, no first read of dst, no block scan, and two
// block barriers less.
// Why: ncu --set full on the scatter (H200, products-like, int64 indices, session 21): 48% of
// its warps' stall samples wait on global loads (long scoreboard) and 17% at barriers, with
// issue 25-31% busy and DRAM at 51-55%: it waits on two latency-bound phases in turn. The
// partition is the scatter's (warp w of a tile takes edges t0 + 512 w + 32 r + lane). Bad
// destinations are found here (src in the scatter; both atomicMin the same flag).
// hist (the one sort's own CUB passes, own_onesweep; null elsewhere): the digit counts of the
// passes after this one, hist[pass][digit] over every edge's key (the uint32 of its dst, as the
// scatter writes it, bad indices too: the onesweep passes place every key by these counts), for
// hp passes of 8 bits from bit hb up to hend. Counted in shared memory, added once a block.
constexpr int kHistPasses = 3, kHistDigits = 256;
struct HistSpec {
  std::uint32_t* hist = nullptr;
  int hb = 0, hend = 0, hp = 0;
  // Pass p's digit of key k: (k >> shift(p)) & mask(p).
  __device__ int shift(int p) const { return hb + 8 * p; }
  __device__ std::uint32_t mask(int p) const { return (1u << min(8, hend - shift(p))) - 1u; }
  // A block's shared counts hh[pass][digit] added to hist, once a block (after a barrier).
  template <int Threads>
  __device__ void flush(const std::uint32_t* hh) const {
    for (int i = threadIdx.x; i < hp * kHistDigits; i += Threads)
      if (const std::uint32_t c = hh[i]) atomicAdd(hist + i, c);
  }
};
template <class I>
__global__ void __launch_bounds__(kFirstThreads)
    first_digit_warp_counts_kernel(const I* __restrict__ dst, std::int64_t E, std::uint64_t N, std::uint32_t mask,
                                   int shift, std::uint32_t* __restrict__ counts, std::uint16_t* __restrict__ bases,
                                   unsigned long long* first_bad, HistSpec hs = {}) {
  __shared__ std::uint32_t wh[kFirstWarps][kFirstDigits];
  __shared__ std::uint32_t lstart[kFirstDigits];
  __shared__ std::uint32_t hh[kHistPasses * kHistDigits];
  using Scan = cub::BlockScan<std::uint32_t, kFirstThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  constexpr int R = kFirstRounds;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kFirstWarps * kFirstDigits; i += kFirstThreads) (&wh[0][0])[i] = 0;
  for (int i = threadIdx.x; i < hs.hp * kHistDigits; i += kFirstThreads) hh[i] = 0;
  const std::int64_t w0 = std::int64_t(blockIdx.x) * kFirstTile + std::int64_t(warp) * 32 * R + lane;
  const int lim = int(E - w0 < 32 * R ? (E - w0 > 0 ? E - w0 : 0) : 32 * R);
  const I* const dw = dst + w0;
  I dv[R];  // all 16 loads in flight: nothing else is live here
#pragma unroll
  for (int r = 0; r < R; ++r) dv[r] = 32 * r < lim ? dw[32 * r] : I(0);
  __syncthreads();  // wh zeroed
  std::uint32_t bad_bits = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const bool in = 32 * r < lim;
    bad_bits |= std::uint32_t(in && narrow_index_bad(dv[r], N)) << r;
    atomicAdd(&wh[warp][(std::uint32_t(dv[r]) >> shift) & mask], in ? 1u : 0u);
  }
  if (bad_bits) atomicMin(first_bad, (unsigned long long)(w0 + 32 * (__ffs(bad_bits) - 1)));
  for (int p = 0; p < hs.hp; ++p) {
    const int b = hs.shift(p);
    const std::uint32_t m = hs.mask(p);
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (32 * r < lim) atomicAdd(&hh[p * kHistDigits + ((std::uint32_t(dv[r]) >> b) & m)], 1u);
  }
  __syncthreads();
  hs.flush<kFirstThreads>(hh);
  std::uint32_t total = 0;
  if (threadIdx.x < kFirstDigits) {
    total = warp_bases_in_place(wh, threadIdx.x);
    counts[std::int64_t(threadIdx.x) * gridDim.x + blockIdx.x] = total;
  }
  std::uint32_t first = 0;
  Scan(scan_temp).ExclusiveSum(total, first);
  if (threadIdx.x < kFirstDigits) lstart[threadIdx.x] = first;
  __syncthreads();
  std::uint16_t* const out = bases + std::int64_t(blockIdx.x) * kFirstWarps * kFirstDigits;
  for (int i = threadIdx.x; i < kFirstWarps * kFirstDigits; i += kFirstThreads)
    out[i] = std::uint16_t(lstart[i % kFirstDigits] + (&wh[0][0])[i]);  // <= 8192
}

// One tile a block: each warp ranks its 512 edges (16 rounds of 32, in edge order) among equal
// digits (match_digit), the block places them in shared memory sorted by digit (stable),
// and writes each digit's run to its place in keys and pairs: runs of ~128 entries a digit,
// so the stores are mostly whole sectors. A warp counts its digits in one pass over its rounds
// (shared atomics) and ranks them in a second with its bases, reading dst again. Every load of
// a part (H rounds, below) is issued before its first use: one round at a time would hold ~4 KB
// of reads in flight an SM, against the ~25 KB that the H200's bandwidth times its latency
// asks for. FW, fw: as init_pairs_kernel (one-shot plans carry w's bits in place of the edge id);
// a template argument so that the plain build holds no registers for w under the 64-register
// bound that two blocks an SM need. FW = 1 loads w with the part's indices and ranks it with
// them; FW = 2 (PIPELINK_AGG_ONESHOT_W=late, warp form only) ranks the edge id as a plain build
// does and reads w[id] at the write-out, from the tile's 32 KB of w (L2 after its first touch),
// so the ranking keeps the plain build's registers: halves for int64 (v25: 0.836 -> 0.769 ms on
// plan builds) where FW = 1 must use quarters.
// Measured (H200, products-like int64, session 23, v26): the one-shot with FW = 2 ran 1.028x
// the time of FW = 1 in the same A/B rounds (6.56 against 6.38 ms): the write-out's dependent
// reads of w cost more than the halves save. FW = 1 stays the default; FW = 2 is kept opt-in.
// WC (the warp form): the count phase's work comes from first_digit_warp_counts_kernel's bases.
// shift, KO: the digit is (dst >> shift) & mask; 0 and uint32 for the LSD first pass (the keys
// whole), kFirstBits below the top bit and uint16 for the one-shot's MSD sort (the keys' low 16
// bits: sort_narrow_msd).
template <class I, int FW, bool WC, class KO = std::uint32_t, bool HS = false>
__global__ void __launch_bounds__(kFirstThreads, 2) first_digit_scatter_kernel(
    const I* __restrict__ src, const I* __restrict__ dst, std::int64_t E, std::uint64_t N, std::uint32_t mask, int shift,
    const std::uint32_t* __restrict__ offsets, KO* __restrict__ keys, EdgePair<std::int32_t>* __restrict__ pairs,
    unsigned long long* first_bad, const float* __restrict__ fw, const std::uint16_t* __restrict__ bases,
    HistSpec hs) {
  extern __shared__ __align__(16) unsigned char first_smem[];
  auto* skeys = reinterpret_cast<std::uint32_t*>(first_smem);
  auto* spairs = reinterpret_cast<EdgePair<std::int32_t>*>(first_smem + kFirstTile * sizeof(std::uint32_t));
  // A warp's count, then its base, per digit (WC: its base from the start, the tile's digit start
  // included).
  __shared__ std::uint32_t wh[kFirstWarps][kFirstDigits];
  __shared__ std::uint32_t lstart[kFirstDigits], gstart[kFirstDigits];
  using Scan = cub::BlockScan<std::uint32_t, kFirstThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  // Each pass loads dst, or src and dst (and fw), in parts of H rounds: halves, quarters for int64
  // indices (two registers a value) and with fw. At 64 registers (cuobjdump, session 21) the int64
  // forms and those without fw keep no stack; int32 with fw keeps 8 bytes (24 in the warp form:
  // one-shot plans of int32 indices only). The warp form without fw holds no counts' registers,
  // so its int64 ranking takes halves too (two waits on loads a warp instead of four) and keeps
  // no stack; with fw halves spilled (24 bytes int64, 40 int32: session 22), so quarters there.
  static_assert(FW >= 0 && FW <= 2 && (FW != 2 || WC), "FW = 2 (late w) is a warp-form variant only");
  constexpr bool FWR = FW == 1;  // w loaded and ranked with the indices (FW = 2: read at the write-out)
  constexpr int R = kFirstRounds, H = (sizeof(I) == 8 && !(WC && !FWR)) || FWR ? R / 4 : R / 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned lt = (1u << lane) - 1;
  if constexpr (!WC)
    for (int i = threadIdx.x; i < kFirstWarps * kFirstDigits; i += kFirstThreads) (&wh[0][0])[i] = 0;
  const std::int64_t t0 = std::int64_t(blockIdx.x) * kFirstTile;
  // Round r's edge is w0 + 32 r, in the tile while 32 r < lim. Addresses as a base pointer and
  // constant offsets: 64-bit edge indices per round held 16 more register pairs (spills).
  const std::int64_t w0 = t0 + std::int64_t(warp) * 32 * R + lane;
  const int lim = int(E - w0 < 32 * R ? (E - w0 > 0 ? E - w0 : 0) : 32 * R);
  const I* const dw = dst + w0;
  const I* const sw = src + w0;
  const float* const fww = FWR ? fw + w0 : nullptr;
  const std::int32_t id0 = std::int32_t(w0);  // narrow plans: E < 2^31
  std::uint32_t* const my = wh[warp];
  // Bad indices: bit r for dst in round r, bit 16 + r for src; one atomic at the end (a branch
  // and an atomic a round cost ~6 instructions each).
  static_assert(R <= 16);
  auto bad = [N](I v) { return narrow_index_bad(v, N); };
  std::uint32_t bad_bits = 0;
  // WC: the tile's place a digit in the pass's output, loaded here and stored to gstart only after
  // the ranking, which hides the loads' latency (a cache line a digit: in the fused form every
  // warp waits for them at the barrier after the scan, 7% of its stall samples in session 21's
  // profile).
  std::uint32_t g_early = 0;
  // HS (PIPELINK_AGG_BUILD_HIST=scatter, plan builds): the later passes' digit counts, taken at
  // the write-out below (zeroed before either branch's barrier). A template argument so that
  // the other forms keep their code (64 registers, two blocks an SM).
  __shared__ std::uint32_t hh[HS ? kHistPasses * kHistDigits : 1];
  if constexpr (HS)
    for (int i = threadIdx.x; i < hs.hp * kHistDigits; i += kFirstThreads) hh[i] = 0;
  if constexpr (WC) {
    // Each warp's bases, already offset by the tile's digit starts (warp 0's are those starts).
    const std::uint16_t* const b = bases + std::int64_t(blockIdx.x) * kFirstWarps * kFirstDigits;
    if (threadIdx.x < kFirstDigits) g_early = offsets[std::int64_t(threadIdx.x) * gridDim.x + blockIdx.x];
    for (int i = threadIdx.x; i < kFirstWarps * kFirstDigits; i += kFirstThreads) (&wh[0][0])[i] = b[i];
    if (threadIdx.x < kFirstDigits) lstart[threadIdx.x] = b[threadIdx.x];
    __syncthreads();
  } else {
    __syncthreads();  // wh zeroed
#pragma unroll
    for (int h = 0; h < R; h += H) {
      I dv[H];
#pragma unroll
      for (int r = 0; r < H; ++r) dv[r] = 32 * (h + r) < lim ? dw[32 * (h + r)] : I(0);
#pragma unroll
      for (int r = 0; r < H; ++r) {
        const bool in = 32 * (h + r) < lim;
        bad_bits |= std::uint32_t(in && bad(dv[r])) << (h + r);
        // The counts need no order: a shared-memory atomic an edge (the ranking pass matches).
        // Lanes past E add 0 (no branch).
        atomicAdd(&my[(std::uint32_t(dv[r]) >> shift) & mask], in ? 1u : 0u);
      }
    }
    __syncthreads();
    tile_digit_starts<kFirstDigits, Scan>(wh, lstart, gstart, scan_temp,
                                          [&](std::uint32_t d) { return offsets[std::int64_t(d) * gridDim.x + blockIdx.x]; });
  }
#pragma unroll
  for (int h = 0; h < R; h += H) {
    std::int32_t sv[H], wv[H];
    std::uint32_t key[H];
    {
      I sl[H];
#pragma unroll
      for (int r = 0; r < H; ++r) {
        const bool in = 32 * (h + r) < lim;
        sl[r] = in ? sw[32 * (h + r)] : I(0);
        key[r] = in ? std::uint32_t(dw[32 * (h + r)]) : 0u;  // dst again (L2): keys held across the passes spilled
        if constexpr (FWR) wv[r] = in ? __float_as_int(fww[32 * (h + r)]) : 0;
      }
#pragma unroll
      for (int r = 0; r < H; ++r) {
        sv[r] = std::int32_t(sl[r]);
        bad_bits |= std::uint32_t(32 * (h + r) < lim && bad(sl[r])) << (16 + h + r);
      }
    }
#pragma unroll
    for (int r = 0; r < H; ++r) {
      const bool in = 32 * (h + r) < lim;
      const unsigned active = __ballot_sync(~0u, in);
      const std::uint32_t d = (key[r] >> shift) & mask;
      const unsigned peers = match_digit(d, active);
      const std::uint32_t base = my[d];
      __syncwarp();  // every lane has read the base before its leader moves it
      if (in && lane == __ffs(peers) - 1) my[d] = base + __popc(peers);
      __syncwarp();
      const std::uint32_t lp = (WC ? 0u : lstart[d]) + base + __popc(peers & lt);
      if (in) {
        skeys[lp] = key[r];
        spairs[lp] = EdgePair<std::int32_t>{sv[r], FWR ? wv[r] : id0 + 32 * (h + r)};
      }
    }
  }
  if (bad_bits) {
    const int r = __ffs((bad_bits | bad_bits >> 16) & 0xFFFFu) - 1;  // this lane's first bad round
    atomicMin(first_bad, (unsigned long long)(id0 + 32 * r));
  }
  if (WC && threadIdx.x < kFirstDigits) gstart[threadIdx.x] = g_early;
  __syncthreads();
  const int n = int(E - t0 < kFirstTile ? E - t0 : kFirstTile);
  for (int i = threadIdx.x; i < n; i += kFirstThreads) {
    const std::uint32_t key_i = skeys[i], d = (key_i >> shift) & mask;
    const std::uint32_t g = gstart[d] + (std::uint32_t(i) - lstart[d]);
    keys[g] = KO(key_i);
    EdgePair<std::int32_t> p = spairs[i];
    if constexpr (FW == 2) p.id = __float_as_int(fw[p.id]);  // the edge's weight bits in place of its id
    pairs[g] = p;
    if constexpr (HS)
      for (int q = 0; q < hs.hp; ++q) atomicAdd(&hh[q * kHistDigits + ((key_i >> hs.shift(q)) & hs.mask(q))], 1u);
  }
  if (HS && hs.hp > 0) {
    __syncthreads();
    hs.template flush<kFirstThreads>(hh);  // the block's counts out, once
  }
}

// row_ptr[i] = base + first position whose key is >= i (keys sorted ascending), for i in [0, N].
template <class K, class P>
__global__ void row_ptr_kernel(const K* keys, int shift, std::int64_t E, std::int64_t N, P* row_ptr,
                               std::int64_t base = 0) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i <= N;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t lo = 0, hi = E;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (std::int64_t(keys[mid] >> shift) < i) lo = mid + 1;
      else hi = mid;
    }
    row_ptr[i] = P(base + lo);
  }
}

// The narrow one sort's row_ptr in two passes instead of a binary search a row (the default
// from v26; PIPELINK_AGG_ROW_PTR=search keeps the search): each row's first position where the
// sorted keys start it (row_ptr pre-set to ~0, row_ptr[N] = E), then a suffix minimum over the rows
// (CUB scan) gives the rows without edges their next row's start (and keeps row_ptr ascending
// whatever the keys, as the later kernels need before a bad index throws). O(N + E) for any graph:
// a streaming form that also wrote the empty rows' runs (c02714dc5981) left a long run to one
// thread. Why try it: the search is N + 1 chains of ~26 dependent loads, 0.12 ms on products-like
// (H200), where the keys are one 248 MB stream (~0.06 ms at copy bandwidth). Measured with one key
// a thread (8b8f546, H200, session 22): 0.278 ms against the search's 0.123 (241K blocks of one
// 4-byte load each); with 8 keys a thread in two 16-byte loads (46971b7): 0.086 against 0.122
// (trace medians, same process). The default since the whole GPU suite passed with it (session 23:
// CTest 208/208 under =scan, memcheck and racecheck of RowStarts clean).
constexpr int kRowStartKeys = 8;
__global__ void __launch_bounds__(256) row_starts_kernel(const std::uint32_t* __restrict__ keys, std::int64_t E,
                                                         std::int64_t N, std::uint32_t* row_ptr) {
  constexpr int V = kRowStartKeys;
  const std::int64_t chunks = (E + V - 1) / V, stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; c < chunks; c += stride) {
    const std::int64_t i0 = c * V;
    const int n = int(E - i0 < V ? E - i0 : V);
    std::uint32_t k[V];
    if (n == V) {  // keys come from the build's arena: 256-byte aligned, so chunk c is 32 bytes in
      const uint4 lo = reinterpret_cast<const uint4*>(keys)[2 * c], hi = reinterpret_cast<const uint4*>(keys)[2 * c + 1];
      k[0] = lo.x, k[1] = lo.y, k[2] = lo.z, k[3] = lo.w, k[4] = hi.x, k[5] = hi.y, k[6] = hi.z, k[7] = hi.w;
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) k[j] = j < n ? keys[i0 + j] : 0u;
    }
    // The key before the chunk; none before the first (~0 is no row: N < 2^31).
    std::uint32_t prev = i0 > 0 ? keys[i0 - 1] : ~0u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      // k < N: a bad index's key (sorted on its low bits only) writes nothing; the build throws.
      if (j < n && k[j] < std::uint64_t(N) && k[j] != prev) row_ptr[k[j]] = std::uint32_t(i0 + j);
      prev = k[j];
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) row_ptr[N] = std::uint32_t(E);
}

// The suffix minimum after a row-starts kernel (row_starts_kernel, msd_row_starts_kernel): rows
// without edges take their next row's start. With temp null: returns the temp bytes it needs.
std::size_t row_ptr_suffix_min(std::uint32_t* rp, std::int64_t N, void* temp, std::size_t bytes, cudaStream_t s) {
  const auto rev = thrust::make_reverse_iterator(rp + N + 1);
  PIPELINK_CUDA_CHECK(cub::DeviceScan::InclusiveScan(temp, bytes, rev, rev, ::cuda::minimum<std::uint32_t>{}, N + 1, s));
  return bytes;
}

// The MSD sort (sort_narrow_msd; a one-shot call's, or a build's by PIPELINK_AGG_BUILD_SORT=msd):
// its keys are dst's low 16 bits, sorted on bits
// [0, shift) inside each top-digit bucket d (positions [starts[d], starts[d + 1])), so an entry's
// row is d << shift | (key & low). As row_starts_kernel otherwise (the same suffix minimum after
// it); rows ascend with the position whatever the keys, so a bad index writes in bounds only.
struct BucketStarts {
  std::uint32_t v[kFirstDigits + 1];  // v[kFirstDigits] = E
};
__global__ void __launch_bounds__(256) msd_row_starts_kernel(const std::uint16_t* __restrict__ keys, BucketStarts b, int shift,
                                                             std::int64_t E, std::int64_t N, std::uint32_t* row_ptr) {
  constexpr int V = kRowStartKeys;
  const std::uint32_t low = (1u << shift) - 1;
  // The bucket holding position p < E: the last d with v[d] <= p (empty buckets skipped).
  auto bucket_of = [&](std::uint32_t p) {
    int lo = 0, hi = kFirstDigits;
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (b.v[mid] <= p) lo = mid;
      else hi = mid;
    }
    return lo;
  };
  const std::int64_t chunks = (E + V - 1) / V, stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; c < chunks; c += stride) {
    const std::int64_t i0 = c * V;
    const int n = int(E - i0 < V ? E - i0 : V);
    std::uint16_t k[V];
    if (n == V) {  // the keys' buffer is 256-byte aligned: chunk c is 16 bytes in
      const uint4 q = reinterpret_cast<const uint4*>(keys)[c];
      const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < V; ++j) k[j] = std::uint16_t(w[j / 2] >> (16 * (j % 2)));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) k[j] = j < n ? keys[i0 + j] : std::uint16_t(0);
    }
    int d = bucket_of(std::uint32_t(i0 > 0 ? i0 - 1 : 0));
    std::uint32_t prev = i0 > 0 ? std::uint32_t(d) << shift | (keys[i0 - 1] & low) : ~0u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (j < n) {
        const std::uint32_t p = std::uint32_t(i0 + j);
        while (b.v[d + 1] <= p) ++d;
        const std::uint32_t row = std::uint32_t(d) << shift | (k[j] & low);
        if (row < std::uint64_t(N) && row != prev) row_ptr[row] = p;
        prev = row;
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) row_ptr[N] = std::uint32_t(E);
}

// Rows counted in the work split: every k rows as m edges (k = 0: none; m is then unused), so a
// row weighs m / k edges. edges_before(r) is the weight of rows [0, r); r * m cannot overflow
// (r <= N, whose (N + 1)-entry row offsets the device holds, far below 2^57; m <= 64).
struct RowWeight {
  std::int64_t k = 0, m = 1;
  __host__ __device__ std::int64_t edges_before(std::int64_t r) const { return k > 0 ? r * m / k : 0; }
  // The work split's groups for E edges over N rows in chunks of C: key(N) / C + 1 (see below).
  std::int64_t groups(std::int64_t E, std::int64_t N, std::int64_t C) const { return (E + edges_before(N)) / C + 1; }
};

// Work split of the planned run: group g (a lane group or warp) owns the rows r whose position
// key(r) = row_ptr[r] + (k > 0 ? r * m / k : 0) lies in [g*C, (g+1)*C): first_row[g] = first row
// with key >= g*C; first_row[groups] = N. k = 0 balances by edges alone; k > 0 counts every k rows
// as m more edges, so that a long run of empty rows (power-law: ~870k empty rows, the model in
// bench/micro/balance_model.py puts runs of thousands at one edge position) is spread over groups
// instead of landing on one warp. key(N) = E + N * m / k, and groups = key(N) / C + 1, so the
// trailing rows belong to the last group. The kernels take any such split of rows into groups.
// Block `block` of `blocks` (group_rows_kernel's grid, or plan_tail_kernel's part).
template <class P>
__device__ void group_rows_part(const P* row_ptr, std::int64_t N, std::int64_t groups, std::int64_t C, RowWeight rw,
                                P* first_row, std::int64_t block, std::int64_t blocks) {
  for (std::int64_t g = block * blockDim.x + threadIdx.x; g <= groups; g += blocks * blockDim.x) {
    std::int64_t lo = 0, hi = N;
    const std::int64_t key = g * C;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      const std::int64_t k = std::int64_t(row_ptr[mid]) + rw.edges_before(mid);
      if (k < key) lo = mid + 1;
      else hi = mid;
    }
    first_row[g] = P(g == groups ? N : lo);
  }
}
template <class P>
__global__ void group_rows_kernel(const P* row_ptr, std::int64_t N, std::int64_t groups, std::int64_t C, RowWeight rw,
                                  P* first_row) {
  group_rows_part(row_ptr, N, groups, C, rw, first_row, blockIdx.x, gridDim.x);
}

// A row of in-degree d: its segments if it is split (d > seg_len; else 0), and whether it is a
// long row that is not split (long_row < d <= seg_len). The one classification of both
// segment_totals_kernel (whose totals size seg_row and long_rows) and count_segments_kernel
// (whose scanned counts place them): were they to disagree, fill_segment_rows_kernel would write
// past the tables.
struct RowClass {
  std::int64_t segments;
  bool long_row;
};
__device__ __forceinline__ RowClass classify_row(std::int64_t d, std::int64_t long_row, std::int64_t seg_len) {
  return {d > seg_len ? (d + seg_len - 1) / seg_len : 0, d > long_row && d <= seg_len};
}

// The build's totals of split rows' segments and of long rows (not split), added into
// totals[0] and totals[1] (zeroed before): one pass over the row offsets that writes nothing in
// the common case (products-like has neither), so the per-row counts, their scans and the tables
// below are made only when a total is not zero, after the host has read them with the index
// check's verdict (finish_plan). Each block sums its rows first (power-law has ~10^5 long rows:
// an atomic a row on one address would queue them all there), then adds one value a total.
// The counts are count_segments_kernel's (both classify by classify_row): finish_plan sizes seg_row
// and long_rows by these totals, and fill_segment_rows_kernel writes them at that kernel's
// scanned offsets.
// Block `block` of `blocks` (segment_totals_kernel's grid, or plan_tail_kernel's part).
template <class P>
__device__ void segment_totals_part(const P* row_ptr, std::int64_t N, std::int64_t long_row, std::int64_t seg_len,
                                    unsigned long long* totals, std::int64_t block, std::int64_t blocks) {
  using Reduce = cub::BlockReduce<unsigned long long, 256>;
  __shared__ typename Reduce::TempStorage tmp[2];
  unsigned long long segs = 0, lng = 0;
  // 8 rows a thread, their 9 offsets loaded before any is used: with one row a thread (9.6K
  // blocks on products-like, each one load deep) the kernel took 21 us (trace, H200, b8f79e7).
  constexpr int R = 8;
  const std::int64_t chunks = (N + R - 1) / R;
  for (std::int64_t c = block * blockDim.x + threadIdx.x; c < chunks; c += blocks * blockDim.x) {
    const std::int64_t r0 = c * R;
    std::int64_t o[R + 1];
#pragma unroll
    for (int j = 0; j <= R; ++j) o[j] = r0 + j <= N ? std::int64_t(row_ptr[r0 + j]) : 0;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (r0 + j >= N) break;
      const RowClass rc = classify_row(o[j + 1] - o[j], long_row, seg_len);
      segs += (unsigned long long)rc.segments;
      lng += rc.long_row;
    }
  }
  segs = Reduce(tmp[0]).Sum(segs);
  lng = Reduce(tmp[1]).Sum(lng);
  if (threadIdx.x == 0) {
    if (segs) atomicAdd(totals, segs);
    if (lng) atomicAdd(totals + 1, lng);
  }
}
template <class P>
__global__ void __launch_bounds__(256) segment_totals_kernel(const P* row_ptr, std::int64_t N, std::int64_t long_row,
                                                             std::int64_t seg_len, unsigned long long* totals) {
  segment_totals_part(row_ptr, N, long_row, seg_len, totals, blockIdx.x, gridDim.x);
}

// The build's tail as one kernel (PIPELINK_AGG_PLAN_TAIL=fused): blocks [0, split_blocks) the work
// split (group_rows_part), the rest the segment totals (segment_totals_part, into status[1] and
// status[2]); the last block to finish (status[3] counts them, zeroed before) copies status[0..2]
// (the first bad edge, then the two totals) to `host`, host-mapped pinned memory the host reads
// once the stream is done. Why: the two kernels were ~0.010 ms each, mostly launch and drain,
// and the verdict's copy to pageable memory a round trip of 0.017-0.021 ms after them (v38 trace,
// products-like, H200).
template <class P>
__global__ void __launch_bounds__(256)
    plan_tail_kernel(const P* row_ptr, std::int64_t N, std::int64_t groups, std::int64_t C, RowWeight rw, P* first_row,
                     int split_blocks, std::int64_t long_row, std::int64_t seg_len, unsigned long long* status,
                     unsigned long long* host) {
  if (int(blockIdx.x) < split_blocks)
    group_rows_part(row_ptr, N, groups, C, rw, first_row, blockIdx.x, split_blocks);
  else
    segment_totals_part(row_ptr, N, long_row, seg_len, status + 1, blockIdx.x - split_blocks, gridDim.x - split_blocks);
  __shared__ bool last;
  if (threadIdx.x == 0) {  // the totals' atomics (thread 0's) before the count that orders them
    __threadfence();
    last = atomicAdd(status + 3, 1ull) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x < 3) {
    __threadfence();
    host[threadIdx.x] = atomicAdd(status + threadIdx.x, 0ull);  // from L2, past any stale line
    __threadfence_system();
  }
}

// segs[r]: segments of a split row (else 0); lng[r]: 1 for a long row that is not split.
template <class P>
__global__ void count_segments_kernel(const P* row_ptr, std::int64_t N, std::int64_t long_row, std::int64_t seg_len,
                                      P* segs, P* lng) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r <= N;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    if (r == N) {
      segs[r] = lng[r] = 0;
      continue;
    }
    const RowClass c = classify_row(std::int64_t(row_ptr[r + 1]) - std::int64_t(row_ptr[r]), long_row, seg_len);
    segs[r] = P(c.segments);
    lng[r] = P(c.long_row ? 1 : 0);
  }
}

template <class P>
__global__ void fill_segment_rows_kernel(const P* seg_first, const P* long_first, std::int64_t N, P* seg_row,
                                         P* long_rows) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < N;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    for (std::int64_t i = std::int64_t(seg_first[r]); i < std::int64_t(seg_first[r + 1]); ++i) seg_row[i] = P(r);
    if (long_first[r + 1] != long_first[r]) long_rows[long_first[r]] = P(r);
  }
}

int bits_for(std::int64_t n) {  // bits needed for values in [0, n)
  int b = 1;
  while (b < 63 && (std::int64_t(1) << b) < n) ++b;
  return b;
}

// Edges per group of the planned run. v5 on products-like: C = 64 -> 7.26 ms, 1024 -> 6.02 ms
// (fewer group prologues: each costs a chain of dependent index loads). Smaller graphs get smaller
// chunks so that at least ~32k groups keep every SM busy.
std::int64_t chunk_for(std::int64_t E) {
  std::int64_t c = 64;
  while (c < 1024 && E / (2 * c) >= 32768) c *= 2;
  return c;
}

// Where a plan build's time goes, with PIPELINK_LOG_LEVEL=debug: device events between its
// steps (the last one after the host has waited for the index check's verdict, so the gap before
// it is the round trip), logged once the build is done. Off, it costs one log-level test a build.
// Why: the build took 2.96 ms in the benchmark against ~2.45 ms of kernels (ncu, and init + sort
// 2.22 ms in bench/micro/build_lean_micro.cu), and ncu does not show the gaps between kernels.
class BuildTrace {
 public:
  explicit BuildTrace(cudaStream_t s) : s_(s), on_(log_level() <= LogLevel::debug) {}
  ~BuildTrace() {
    for (const Mark& m : marks_) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(m.ev));
  }
  BuildTrace(const BuildTrace&) = delete;
  BuildTrace& operator=(const BuildTrace&) = delete;
  void mark(const char* name) noexcept {
    if (!on_) return;
    try {
      marks_.reserve(marks_.size() + 1);  // the push below cannot throw and leak the event
    } catch (...) {
      on_ = false;
      return;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess || cudaEventRecord(e, s_) != cudaSuccess) {
      // A diagnostic never fails the build: clear the error, or the next launch check reports it.
      (void)cudaGetLastError();
      on_ = false;
      if (e) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(e));
      return;
    }
    marks_.push_back({name, e, std::chrono::steady_clock::now()});
  }
  void report(std::int64_t N, std::int64_t E) noexcept {
    if (!on_) return;
    try {
      report_or_throw(N, E);
    } catch (...) {  // the plan is built; losing its trace line is not worth losing the plan
    }
    (void)cudaGetLastError();  // a failed event query must not surface at the next launch check
  }

 private:
  void report_or_throw(std::int64_t N, std::int64_t E) {
    if (!on_ || marks_.size() < 2 || cudaEventSynchronize(marks_.back().ev) != cudaSuccess) return;
    char buf[96];
    std::snprintf(buf, sizeof buf, "plan build N=%lld E=%lld, device ms per step:", (long long)N, (long long)E);
    std::string msg = buf;
    float total = 0;
    for (std::size_t i = 1; i < marks_.size(); ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, marks_[i - 1].ev, marks_[i].ev) != cudaSuccess) return;
      total += ms;
      std::snprintf(buf, sizeof buf, " %s %.3f", marks_[i].name, ms);
      msg += buf;
    }
    const double host_ms =
        std::chrono::duration<double, std::milli>(marks_.back().host - marks_.front().host).count();
    std::snprintf(buf, sizeof buf, "; total %.3f (host %.3f)", total, host_ms);
    ::pipelink::detail::log_message(LogLevel::debug, msg + buf);
  }
  struct Mark {
    const char* name;
    cudaEvent_t ev;
    std::chrono::steady_clock::time_point host;
  };
  cudaStream_t s_;
  bool on_;
  std::vector<Mark> marks_;
};

// The w permutation's tables (see "w permutation" below), kept by the plan once built.
struct WPermTables {
  int T = 0;                       // edges a tile = plan positions a bucket (<= 65535: u16 places)
  std::int64_t tiles = 0, nb = 0;  // tiles of the edge order, buckets of the plan order
  int smem1 = 0;                   // pass 1's dynamic shared memory
  DeviceBuffer tl;    // u16 [E]: edge e's place in its tile's shared memory (grouped by bucket)
  DeviceBuffer lidx;  // u16 [E]: plan position p's place in its bucket's region; u8 [E], its high
                      // byte, where the plan's src column holds the low one (lidx_in_column)
  DeviceBuffer rs;    // u16 [tiles * (nb + 1)]: each run's start in its tile, then the tile's length
  DeviceBuffer ds;    // u32 [tiles * nb]: each run's start in the scratch buffer
  std::size_t bytes() const { return tl.bytes() + lidx.bytes() + rs.bytes() + ds.bytes(); }
};

// A wait of `s` on `ev`, recorded outside any capture: inside a capture of `s` (a CUDA graph,
// torch.cuda.graph's side stream) a plain wait on such an event is an error
// (cudaErrorStreamCaptureIsolation, H200 v46, the torch capture test); there it becomes the
// graph's external event wait node.
void wait_uncaptured_event(cudaStream_t s, cudaEvent_t ev) {
  PIPELINK_CUDA_CHECK(cudaStreamWaitEvent(s, ev, stream_capturing(s) ? cudaEventWaitExternal : cudaEventWaitDefault));
}

struct CudaPlan final : AggregatePlan::Impl {
  bool wide = false;      // 64-bit row_ptr / pairs (N or E >= 2^31)
  DeviceBuffer row_ptr;   // P [N + 1]
  DeviceBuffer pairs;     // PlanPair<P> [E]: (src, edge id) in destination order
  int src_bits = 0;       // wide plans: bits of src in a packed pair
  bool w_in_pairs = false;  // one-shot plans: the pairs hold (src, w bits), not (src, id): kWInPairs
  std::int64_t chunk = 1024, groups = 0;
  RowWeight row_weight;             // group split: every k rows count as m edges (k = 0: edges alone)
  std::int64_t seg_len = kSegment;  // rows longer than this are split into segments of this length
  DeviceBuffer first_row;  // P [groups + 1]
  std::int64_t num_segments = 0;  // segments of split rows
  DeviceBuffer seg_first;  // P [N + 1]: first segment of each row (rows not split have none)
  DeviceBuffer seg_row;    // P [num_segments]: the row of each segment
  std::int64_t long_row = kLongRow;
  std::int64_t num_long = 0;  // long rows that are not split
  DeviceBuffer long_rows;     // P [num_long]
  bool item_order = false;    // the build's PIPELINK_AGG_ITEM_ORDER (weight, the default: true)
  DeviceBuffer order;         // int32 [num_segments + groups]: the staged walk's items in launch order (or empty)
  // Weights in edge order brought into plan order per call (v18, "w permutation" below): built at
  // the first run that wants it, on `stream`; runs on other streams wait for `wperm_done`.
  std::mutex wperm_mu;
  bool wperm_tried = false;
  std::unique_ptr<WPermTables> wperm;
  cudaEvent_t wperm_done = nullptr;
  // Whether wperm_done has been recorded. Its record after the tables can fail (a destroyed
  // stream, the legacy stream while another stream captures); a wait on the unrecorded event
  // returns at once, which would let a run on another stream read a column still being written
  // (a review, session 48). So it is recorded again before such a wait: still after the tables
  // in the plan's stream's order, and an error there is the run's.
  std::atomic<bool> wperm_recorded{false};
  void wait_for_wperm(cudaStream_t s) {
    if (!wperm_recorded.load(std::memory_order_acquire)) {
      PIPELINK_CUDA_CHECK(cudaEventRecord(wperm_done, stream));
      wperm_recorded.store(true, std::memory_order_release);
    }
    wait_uncaptured_event(s, wperm_done);
  }
  // Compact (by default, unless PIPELINK_AGG_W_PERMUTE_COMPACT=0, when the tables are built):
  // the pairs are replaced by their src column, so every run reads w in plan order (kWCompactLidx
  // by default where N <= 2^24, kWCompact past it or under =1, kWCompact24 under =24 where
  // N <= 2^24) and w in edge order
  // is always permuted first. Set
  // once, under wperm_mu, with runs serialized by run_mu.
  bool compact = false;
  bool compact24 = false;  // the src column in 24 bits (kWCompact24), where N <= 2^24
  // The 32-bit src column's top byte holds lidx's low byte, the tables' lidx only its high one
  // (kWCompactLidx; the default where N <= 2^24: "packed lidx" below).
  bool lidx_in_column = false;
  // PIPELINK_AGG_BUILD_POOL=own as it was at the build: the w tables' arena (built at the first
  // run given w in edge order, or prepare_weights) from the scratch pool too.
  bool build_own_pool = false;
  bool captured = false;  // a run was captured into a CUDA graph: its replays read the pairs, so no compaction
  DeviceBuffer srcs;  // compact plans only: int32 [E] (lidx's low byte on top where lidx_in_column), or compact24_bytes(E) of a 24-bit column
  // Held while a run or permute queues its work: a compaction frees the pairs, which another
  // host thread's run must not be reading.
  std::mutex run_mu;
  const WPermTables* weights_permutation(int tile, cudaStream_t s);
  // What the run kernels read as `pairs` on a compact plan: the 32-bit column, or the 24-bit
  // column's low halves (its high bytes lie before them: compact24_src).
  const void* src_column() const {
    return compact24 ? static_cast<const void*>(srcs.as<const unsigned char>() + compact24_low(num_edges)) : srcs.get();
  }
  // Pass 2's packed lidx source: the src column where it holds lidx's low bytes, else null.
  const std::uint32_t* lidx_column() const { return lidx_in_column ? srcs.as<const std::uint32_t>() : nullptr; }
  // The plan is built (and its buffers are freed) on `stream`, which must outlive the plan. A run
  // on another stream waits for `built`, and the plan's stream then waits for that run (`used`),
  // so neither reads a plan still being built nor frees one still being read.
  // Both events are made on the first run on another stream (a one-shot call never needs them:
  // two event creations per call saved); recording `built` then, on the build stream, still
  // orders after the build. The mutex keeps concurrent runs from re-recording `used` between
  // another run's record and wait.
  cudaStream_t stream = nullptr;
  cudaEvent_t built = nullptr, used = nullptr;
  std::mutex events_mu;
  void wait_for_build(cudaStream_t s) {
    std::lock_guard lock(events_mu);
    if (!built) {  // recorded once: later runs must not queue behind work on the build stream
      // Held until `built` is recorded: a failed record (the build stream destroyed, or the
      // legacy stream while a blocking stream captures) destroys both. It leaked them, two more at
      // each later run on another stream (a review, session 48).
      struct Made {
        cudaEvent_t e = nullptr;
        ~Made() {
          if (e) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(e));
        }
      } b, u;
      PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&b.e, cudaEventDisableTiming));
      PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&u.e, cudaEventDisableTiming));
      PIPELINK_CUDA_CHECK(cudaEventRecord(b.e, stream));
      built = std::exchange(b.e, nullptr);
      used = std::exchange(u.e, nullptr);
    }
    wait_uncaptured_event(s, built);
  }
  void hold_frees_for(cudaStream_t s) noexcept {
    std::lock_guard lock(events_mu);
    PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventRecord(used, s));
    PIPELINK_CUDA_CHECK_NOEXCEPT(cudaStreamWaitEvent(stream, used, 0));
  }
  CudaPlan() = default;
  CudaPlan(const CudaPlan&) = delete;
  CudaPlan& operator=(const CudaPlan&) = delete;
  ~CudaPlan() override {
    if (built) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(built));
    if (used) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(used));
    if (wperm_done) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(wperm_done));
  }
  void run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts,
           bool w_in_plan_order) override;
  void permute(const TensorView& w, const TensorView& out, void* stream) override;
  void prepare_weights(DType weights, void* stream) override;
  void run_on(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts,
              bool w_in_plan_order, cudaStream_t s);
  // Runs f(s) on stream s after the build (when s is not the build stream), and orders the plan's
  // frees after it, also when f throws.
  template <class Fn>
  void on_stream(cudaStream_t s, Fn&& f);
};

// ---- the narrow plan in destination ranges (bounded build memory) ----------------------------
// One sort needs 24 bytes per edge at its peak (the 8 kept, 16 transient: two key buffers and a
// second pairs buffer), 1.5 GB on products-like. Sorting the edges of one destination range at a
// time keeps the 8 and needs the 16 only for the largest range: about 8 + 16/K bytes per edge for
// K balanced ranges (12 at K = 4). Each range is a stable select of its edge ids (CUB, in edge
// order), a gather of their (dst - lo, src, id), the same stable sort, and its rows' offsets;
// ranges are consecutive, so the plan is the one-sort plan, bit for bit. The cost: K passes over
// dst and the gathers. Measured (products-like one-shot, H200): 10.34 ms at K = 4 against 7.95
// for the one sort (v10); its ranges step alone 4.73 ms (v11 trace).
constexpr int kRangeBins = 4096;  // destination histogram bins that range boundaries are drawn on

// bins[b] += edges with dst in bin b (rows [ceil(b N / B), ceil((b+1) N / B))); also the index
// check, which the ranges' selects (which skip bad destinations) do not do.
template <class I>
__global__ void range_histogram_kernel(const I* src, const I* dst, std::int64_t E, std::uint64_t N, int B,
                                       unsigned long long* bins, unsigned long long* first_bad) {
  __shared__ unsigned int local[kRangeBins];
  for (int b = threadIdx.x; b < B; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t sv = std::uint64_t(std::int64_t(src[e])), dv = std::uint64_t(std::int64_t(dst[e]));
    if (sv >= N || dv >= N) atomicMin(first_bad, (unsigned long long)e);
    // Counted by destination alone, as the selects choose: a range's count is its select's.
    if (dv < N) atomicAdd(&local[int(dv * std::uint64_t(B) / N)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < B; b += blockDim.x)
    if (local[b]) atomicAdd(&bins[b], (unsigned long long)local[b]);
}

template <class I>
struct DstInRange {
  const I* dst;
  std::int64_t lo, hi;
  __device__ bool operator()(std::int32_t e) const {
    const std::int64_t d = std::int64_t(dst[e]);
    return d >= lo && d < hi;
  }
};

template <class I, class K>
__global__ void gather_range_kernel(const std::int32_t* ids, std::int64_t n, const I* src, const I* dst, std::int64_t lo,
                                    K* keys, EdgePair<std::int32_t>* pairs, const float* fw) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int32_t e = ids[i];
    keys[i] = K(std::int64_t(dst[e]) - lo);
    pairs[i] = EdgePair<std::int32_t>{std::int32_t(src[e]), fw ? __float_as_int(fw[e]) : e};
  }
}

// Rows [lo, hi) of each range, drawn on histogram bins so that each holds about E / K edges (a
// bin heavier than that, a hub row's, is a range of its own). Returns the boundaries (K' + 1
// rows, K' <= K + 1: a last empty range where the first K reach the target) and each range's
// edge count.
struct Ranges {
  std::vector<std::int64_t> row, edges;
  std::int64_t max_edges = 0;
};
Ranges draw_ranges(const std::vector<unsigned long long>& bins, std::int64_t N, std::int64_t K) {
  const int B = int(bins.size());
  std::uint64_t total = 0;
  for (auto c : bins) total += c;
  // At least 1: with no valid destination at all (every one out of range: the build reports the
  // first bad edge after the ranges) a target of 0 closed a range at every bin, 4096 passes over
  // the edge list before the error (a review, session 46).
  const std::uint64_t target = std::max<std::uint64_t>(1, (total + std::uint64_t(K) - 1) / std::uint64_t(K));
  Ranges r;
  r.row.push_back(0);
  std::uint64_t acc = 0;
  for (int b = 0; b < B; ++b) {
    acc += bins[b];
    if ((acc >= target && b + 1 < B) || b + 1 == B) {
      r.row.push_back((std::int64_t(b + 1) * N + B - 1) / B);  // first row of bin b + 1 (N for the last)
      r.edges.push_back(std::int64_t(acc));
      r.max_edges = std::max(r.max_edges, std::int64_t(acc));
      acc = 0;
    }
  }
  return r;
}

template <class I>
void sort_narrow_chunked(CudaPlan& plan, const TensorView& src, const TensorView& dst, std::int64_t N, std::int64_t K,
                         cudaStream_t s, unsigned long long* flag, BuildTrace& trace, const float* fw,
                         DeviceBuffer kept = {}) {
  using Key = std::uint32_t;
  using Pair = EdgePair<std::int32_t>;
  const std::int64_t E = plan.num_edges;
  const int B = int(std::min<std::int64_t>(N, kRangeBins));
  std::vector<unsigned long long> bins(std::size_t(B), 0);
  {
    DeviceBuffer dbins(std::size_t(B) * sizeof(unsigned long long), s);
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(dbins.get(), 0, dbins.bytes(), s));
    // At most 1024 blocks: each adds its whole shared histogram to the global one at the end.
    range_histogram_kernel<I><<<std::min(grid_for(E, 256), 1024), 256, 0, s>>>(src.data_as<const I>(), dst.data_as<const I>(), E,
                                                               std::uint64_t(N), B, dbins.as<unsigned long long>(), flag);
    check_launch();
    PIPELINK_CUDA_CHECK(cudaMemcpyAsync(bins.data(), dbins.get(), dbins.bytes(), cudaMemcpyDeviceToHost, s));
    PIPELINK_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  trace.mark("range_histogram");
  const Ranges ranges = draw_ranges(bins, N, K);
  const std::int64_t M = std::max<std::int64_t>(ranges.max_edges, 1);
  // Temp sizes depend only on the sizes: the largest range's sort, the select over all E.
  std::size_t sort_bytes = 0, select_bytes = 0;
  {
    cub::DoubleBuffer<Key> k0(nullptr, nullptr);
    cub::DoubleBuffer<Pair> p0(nullptr, nullptr);
    PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, k0, p0, M, 0, bits_for(N), s));
    PIPELINK_CUDA_CHECK(cub::DeviceSelect::If(nullptr, select_bytes, thrust::counting_iterator<std::int32_t>(0),
                                              static_cast<std::int32_t*>(nullptr), static_cast<std::int64_t*>(nullptr), E,
                                              DstInRange<I>{nullptr, 0, 0}, s));
  }
  const auto up = round_up_256;
  const std::size_t kb = up(M * sizeof(Key)), pb = up(M * sizeof(Pair)), tb = up(std::max(sort_bytes, select_bytes));
  if (!kept.get()) kept = DeviceBuffer(E * sizeof(Pair), s);
  // The largest range sets the arena; a hub row is one range however many are asked for, so a
  // row heavier than the free memory allows cannot be planned. Say so, with what would work.
  const std::size_t arena_bytes = 2 * kb + pb + tb + up(sizeof(std::int64_t));
  DeviceBuffer arena = DeviceBuffer::try_make(arena_bytes, s);
  if (!arena.get()) {
    std::size_t free_b = 0, total_b = 0;
    PIPELINK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    throw OutOfMemoryError(arena_bytes, free_b, "aggregate: the plan build sorts one destination range at a time, and its largest range (" +
                std::to_string(M) + " edges; a range holds whole rows) needs " + std::to_string(arena_bytes >> 20) +
                " MB of transient memory where " + std::to_string(free_b >> 20) +
                " MB are free beside the plan; free device memory, or use the lean path (AggregatePath::lean), "
                "which needs none");
  }
  char* base = arena.as<char>();
  Key* keys_a = reinterpret_cast<Key*>(base);
  Key* keys_b = reinterpret_cast<Key*>(base + kb);  // also the selected ids (int32) before the sort
  Pair* pairs_t = reinterpret_cast<Pair*>(base + 2 * kb);
  void* temp = base + 2 * kb + pb;
  auto* num_selected = reinterpret_cast<std::int64_t*>(base + 2 * kb + pb + tb);
  plan.row_ptr = DeviceBuffer((N + 1) * sizeof(std::int32_t), s);
  std::int64_t off = 0;
  for (std::size_t c = 0; c + 1 < ranges.row.size(); ++c) {
    const std::int64_t lo = ranges.row[c], hi = ranges.row[c + 1], n = ranges.edges[c];
    auto* ids = reinterpret_cast<std::int32_t*>(keys_b);
    std::size_t tbytes = select_bytes;
    PIPELINK_CUDA_CHECK(cub::DeviceSelect::If(temp, tbytes, thrust::counting_iterator<std::int32_t>(0), ids, num_selected, E,
                                              DstInRange<I>{dst.data_as<const I>(), lo, hi}, s));
    // The select writes as many ids as the histogram counted for the range (both choose by dst
    // alone, on the same rows: range_histogram_kernel), which is what sized `keys_b`.
    if (n > 0) {
      gather_range_kernel<I, Key><<<grid_for(n, 256), 256, 0, s>>>(ids, n, src.data_as<const I>(), dst.data_as<const I>(),
                                                                   lo, keys_a, pairs_t, fw);
      check_launch();
      Pair* dst_pairs = kept.as<Pair>() + off;
      cub::DoubleBuffer<Key> keys(keys_a, keys_b);
      cub::DoubleBuffer<Pair> pairs(pairs_t, dst_pairs);
      std::size_t sbytes = sort_bytes;
      PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, sbytes, keys, pairs, n, 0, bits_for(hi - lo), s));
      if (pairs.Current() != dst_pairs)
        PIPELINK_CUDA_CHECK(cudaMemcpyAsync(dst_pairs, pairs.Current(), n * sizeof(Pair), cudaMemcpyDeviceToDevice, s));
      row_ptr_kernel<Key, std::int32_t><<<grid_for(hi - lo + 1, 256), 256, 0, s>>>(
          keys.Current(), 0, n, hi - lo, plan.row_ptr.as<std::int32_t>() + lo, off);
    } else {
      row_ptr_kernel<Key, std::int32_t><<<grid_for(hi - lo + 1, 256), 256, 0, s>>>(
          keys_a, 0, 0, hi - lo, plan.row_ptr.as<std::int32_t>() + lo, off);
    }
    check_launch();
    off += n;
  }
  trace.mark("ranges");
  plan.pairs = std::move(kept);
}

// ---- the MSD sort (one-shot calls by default; plan builds by PIPELINK_AGG_BUILD_SORT=msd) -------
//
// Why: the one sort below holds the kept pairs (8 bytes an edge), both key buffers (8) and the
// other pairs (8): a one-shot call peaked at 24.41 B/edge on products-like (v31), where issue 4
// asks at most 12. Here the first pass (the same kernels) takes the top kFirstBits bits of the
// key instead of the low ones and writes only the key's low 16 bits: the pairs, in place in the
// kept buffer, and 2 bytes of key an edge, 10 in all. Each of the 2^kFirstBits buckets is then
// sorted on bits [0, shift) by a second level of stable passes (below). Every pass is stable from
// edge order, so the pairs, and the bits, are the one sort's.
// v32's second level was one CUB sort a bucket, round four side streams. Measured (H200,
// products-like: 38 buckets of ~1.6M, 59b7d3b and d40fdc7): peak 696 MB against 1505 (11.26
// against 24.3 B/edge; from Python 11.42 against 24.41), the bits the one sort's, but the
// one-shot 6.51 ms against 6.03-6.11 (`bench --ab`, same rounds) from one host thread, and 6.51
// against 6.03 with a host thread a side stream: CUB's ~8 calls a bucket (~300 in all) held the
// phase, each side stream busy ~0.75 ms of ~2.4 (trace).
//
// The second level (v33): kLevelBits-bit passes of our own over batches of whole buckets, so
// that a pass is one launch a batch, not one CUB sort a bucket. A bucket's positions are cut in
// tiles of kFirstTile (none across two buckets); a pass counts each tile's digits
// (level_counts_kernel), one exclusive sum over the batch's cells (bucket-major, then digit,
// then tile) gives each (tile, digit) its place in the bucket's stable order by digit, and
// level_scatter_kernel ranks a tile in shared memory and writes it by digit runs, as the first
// pass does. products-like's 16 bits: pass 1 (the low 8) from the kept pairs and keys into a
// batch's scratch, pass 2 (the high 8) back. Pass 1's counts and sum are made once for every
// batch (its tiles are the kept buffer's); pass 2's a batch. Batches go round side streams with
// a scratch each, so that one batch's small launches overlap another's scatter.
// Counted on products-like (E = 61.9M, 38 buckets of ~1.63M): peak 8 + 2 + 1.25 (the scratch, E
// / PIPELINK_AGG_MSD_BATCH edges of 10 bytes over all streams) + 0.13 (pass 1's cells) ~ 11.4
// B/edge, the row offsets made after the scratch is freed. Bytes: each level pass reads 2 bytes
// of key for its counts, then 2 + 10 (the key twice: L2) and writes 10: ~24 an edge, ~48 for two
// against CUB's ~24 a pass plus its histogram (12-byte items). Predicted: the second level
// ~0.9-1.1 ms against CUB's 1.11-1.19 (two passes at 0.555), the one-shot 5.9-6.1 ms, time-neutral
// or better, with ~20 batches' launch gaps the risk.
// Measured (H200, products-like, `bench --ab` same rounds, v33): the one sort's bits, 704.5 MB
// (11.39 B/edge; 11.42 from Python), but the one-shot 6.46 against 6.14 ms (1.052x; 6.54 before
// the counts kernel's loads went in flight): the level phase ~1.6 ms against CUB's ~1.2 (trace).
// A level scatter takes about the first pass's time a tile (~24 us, waiting on load latency at
// two blocks an SM) and there are two of them. 1 stream 1.099x, 4 streams 1.056x.
// v34: the last level by rows (level_rows_kernel) 6.23 against the one sort's 6.15, then with the
// buckets' starts read during the scatter 6.22 against 6.17 (1.008x) at 713.5 against 1505.4 MB:
// the default since then (PIPELINK_AGG_ONESHOT_SORT=lsd for the one sort).

// The second level's tiles, cells and batches: src/cuda/msd_levels.hpp (host-tested).
using msd::BucketTiles;
using msd::kLevelBits;
using msd::kLevelDigits;
using msd::level_cell;
using msd::tile_span;
using msd::TileSpan;
static_assert(msd::kTopDigits == kFirstDigits && msd::kTile == kFirstTile, "the level passes tile the first pass's buckets");
// The level scatter's staged tile: pairs then 16-bit keys, 80 KB (two blocks an SM with the
// static 20.6 KB of counts and scan (ptxas): ~101 KB a block against sm_90's 228 KB an SM).
constexpr std::size_t kLevelSmem = std::size_t(kFirstTile) * (sizeof(EdgePair<std::int32_t>) + sizeof(std::uint16_t));

// A level pass's digit counts of tiles g0 + blockIdx.x, at counts[cell - cell0]; the keys of
// position p at keys[p - in_sub]. Each thread loads its kLevelCountKeys keys before its first
// atomic. Why: v33's first form (a load, then its atomic, in a loop) took 121.6 us for pass 1's
// counts over products-like's 61.9M keys (124 MB: ~1 TB/s) and 15-27 us a batch for pass 2's
// (H200 trace, a6a0e76): about one 2-byte load in flight a thread. With the loads first (46accc6)
// the one-shot's MSD form went 6.54 -> 6.46 ms (`bench --ab`, one sort 6.15 / 6.14).
constexpr int kLevelCountThreads = 256, kLevelCountKeys = kFirstTile / kLevelCountThreads;
__global__ void __launch_bounds__(kLevelCountThreads)
    level_counts_kernel(const std::uint16_t* __restrict__ keys, std::int64_t in_sub, BucketTiles bt, std::uint32_t g0, int dshift,
                        std::uint32_t dmask, std::uint32_t* __restrict__ counts, std::int64_t cell0) {
  __shared__ std::uint32_t h[kLevelDigits];
  for (int i = threadIdx.x; i < kLevelDigits; i += kLevelCountThreads) h[i] = 0;
  const TileSpan sp = tile_span(bt, g0 + blockIdx.x);
  const std::uint16_t* const k = keys + (sp.p0 - in_sub) + threadIdx.x;
  const int lim = sp.n - int(threadIdx.x);  // key j of this thread is in the tile while kLevelCountThreads * j < lim
  std::uint32_t kv[kLevelCountKeys];
#pragma unroll
  for (int j = 0; j < kLevelCountKeys; ++j) kv[j] = kLevelCountThreads * j < lim ? std::uint32_t(k[kLevelCountThreads * j]) : 0u;
  __syncthreads();  // h zeroed
#pragma unroll
  for (int j = 0; j < kLevelCountKeys; ++j)
    if (kLevelCountThreads * j < lim) atomicAdd(&h[(kv[j] >> dshift) & dmask], 1u);
  __syncthreads();
  for (int d = threadIdx.x; d < kLevelDigits; d += kLevelCountThreads) counts[level_cell(bt, sp, d) - cell0] = h[d];
}

// A level pass's tile of up to kFirstTile positions, ranked as first_digit_scatter_kernel ranks
// its tile, with kLevelBits-bit digits (dshift, dmask) of 16-bit keys. The block's shared state:
struct LevelStage {
  std::uint32_t wh[kFirstWarps][kLevelDigits];  // a warp's count, then its base, per digit
  std::uint32_t lstart[kLevelDigits], gstart[kLevelDigits];
  typename cub::BlockScan<std::uint32_t, kFirstThreads>::TempStorage scan_temp;
};
// Position r of warp w in the tile: w * 32 * kFirstRounds + 32 r + lane, in the tile while
// 32 r < lim (lim = the tile's positions - w0). Each warp counts its positions' digits (wh zeroed
// before), the block turns them into each warp's first place a digit and the tile's digit starts
// (lstart; gstart[d] = place(d)), and each warp ranks its positions in order (match_digit) into
// the stage (skeys, spairs) sorted by digit. Every thread of the block calls it; it ends at a
// barrier.
template <class Place>
__device__ __forceinline__ void level_rank_tile(const std::uint16_t* __restrict__ kw, const EdgePair<std::int32_t>* __restrict__ pw,
                                                int lim, int dshift, std::uint32_t dmask, LevelStage& st, std::uint16_t* skeys,
                                                EdgePair<std::int32_t>* spairs, Place place) {
  using Pair = EdgePair<std::int32_t>;
  using Scan = cub::BlockScan<std::uint32_t, kFirstThreads>;
  constexpr int R = kFirstRounds, H = R / 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned lt = (1u << lane) - 1;
  std::uint32_t* const my = st.wh[warp];
  {
    std::uint32_t kv[R];  // all 16 loads in flight
#pragma unroll
    for (int r = 0; r < R; ++r) kv[r] = 32 * r < lim ? std::uint32_t(kw[32 * r]) : 0u;
#pragma unroll
    for (int r = 0; r < R; ++r) atomicAdd(&my[(kv[r] >> dshift) & dmask], 32 * r < lim ? 1u : 0u);
  }
  __syncthreads();
  tile_digit_starts<kLevelDigits, Scan>(st.wh, st.lstart, st.gstart, st.scan_temp, place);
#pragma unroll
  for (int h = 0; h < R; h += H) {
    std::uint32_t key[H];
    Pair pv[H];
#pragma unroll
    for (int r = 0; r < H; ++r) {
      const bool in = 32 * (h + r) < lim;
      key[r] = in ? std::uint32_t(kw[32 * (h + r)]) : 0u;  // the key again (L2), as the first pass reads dst again
      pv[r] = in ? pw[32 * (h + r)] : Pair{0, 0};
    }
#pragma unroll
    for (int r = 0; r < H; ++r) {
      const bool in = 32 * (h + r) < lim;
      const unsigned active = __ballot_sync(~0u, in);
      const std::uint32_t d = (key[r] >> dshift) & dmask;
      const unsigned peers = match_digit<kLevelBits>(d, active);
      const std::uint32_t base = my[d];
      __syncwarp();  // every lane has read the base before its leader moves it
      if (in && lane == __ffs(peers) - 1) my[d] = base + __popc(peers);
      __syncwarp();
      const std::uint32_t lp = st.lstart[d] + base + __popc(peers & lt);
      if (in) {
        skeys[lp] = std::uint16_t(key[r]);
        spairs[lp] = pv[r];
      }
    }
  }
  __syncthreads();
}

// A level pass's stable scatter of tile g0 + blockIdx.x (level_rank_tile), writing the digits'
// runs (~32 entries a tile at 8 bits) to offsets[cell - cell0] + out_add on. Reads position p at
// keys_in / pairs_in[p - in_sub].
__global__ void __launch_bounds__(kFirstThreads, 2) level_scatter_kernel(
    const std::uint16_t* __restrict__ keys_in, const EdgePair<std::int32_t>* __restrict__ pairs_in, std::int64_t in_sub,
    std::uint16_t* __restrict__ keys_out, EdgePair<std::int32_t>* __restrict__ pairs_out, std::int64_t out_add,
    BucketTiles bt, std::uint32_t g0, int dshift, std::uint32_t dmask, const std::uint32_t* __restrict__ offsets,
    std::int64_t cell0) {
  using Pair = EdgePair<std::int32_t>;
  extern __shared__ __align__(16) unsigned char level_smem[];
  auto* spairs = reinterpret_cast<Pair*>(level_smem);
  auto* skeys = reinterpret_cast<std::uint16_t*>(level_smem + kFirstTile * sizeof(Pair));
  __shared__ LevelStage st;
  for (int i = threadIdx.x; i < kFirstWarps * kLevelDigits; i += kFirstThreads) (&st.wh[0][0])[i] = 0;
  const TileSpan sp = tile_span(bt, g0 + blockIdx.x);
  const int w0 = (threadIdx.x / 32) * 32 * kFirstRounds + threadIdx.x % 32;
  __syncthreads();  // wh zeroed
  level_rank_tile(keys_in + (sp.p0 - in_sub) + w0, pairs_in + (sp.p0 - in_sub) + w0, sp.n - w0, dshift, dmask, st, skeys, spairs,
                  [&](std::uint32_t d) { return offsets[level_cell(bt, sp, d) - cell0]; });
  for (int i = threadIdx.x; i < sp.n; i += kFirstThreads) {
    const std::uint32_t key_i = skeys[i], d = (key_i >> dshift) & dmask;
    const std::int64_t g = std::int64_t(st.gstart[d]) + (i - std::int64_t(st.lstart[d])) + out_add;
    keys_out[g] = std::uint16_t(key_i);
    pairs_out[g] = spairs[i];
  }
}

// PIPELINK_AGG_MSD_LAST=rows (v34-v35's default; since v36 'auto' takes it unless the buckets are
// skewed, see msd::Last; two-level sorts only: shift > kLevelBits): the batch's first
// level has sorted each bucket by the key's high digit (sub-buckets of 2^kLevelBits rows) into the
// scratch; block b sorts sub-bucket b % subs of bucket d0 + b / subs (msd::sub_bucket_range from
// the first level's summed cells, absolute) by the key's low kLevelBits bits, back over the same
// range of the list's pairs (the keys are not needed after it), in chunks of a tile: its row counts first, their sum
// gives each row's start, written to row_ptr (rows < N; an empty row gets the next row's start),
// then each chunk ranked as a level tile and written at its rows' running places, so that a
// sub-bucket larger than a tile (hub rows) is sorted too, stably. Empty buckets' blocks write
// their rows the bucket's start (the next edge's place) and return. Block 0 writes row_ptr[N] = E.
// So every row < N of the batches' buckets is written (the host zeroes the rows of the empty
// buckets before the first batch's), with no fill and no suffix minimum after: those took
// 0.015-0.016 ms of the one-shot's build (v38 trace, products-like, H200).
// Why (perf-notes v33): the second level's pass 2 then needs no counts, no sum, no row-starts
// kernel, and writes whole ranges instead of ~32-entry runs (v34: 6.23 against the level passes'
// 6.45 ms, H200, products-like).
// direct (PIPELINK_AGG_MSD_ONE_TILE=direct, the default since v35): a sub-bucket of at most a
// tile skips the counting pass: its one ranking's digit starts are its rows' starts, and its
// stage is written out whole. Why: that pass reads the sub-bucket's keys and counts them once
// more before the ranking does the same (predicted -0.05 to -0.1 ms on the one-shot; measured
// 6.07 against 6.15 ms in the same rounds, H200, products-like, v35).
__global__ void __launch_bounds__(kFirstThreads, 2) level_rows_kernel(
    const std::uint16_t* __restrict__ keys_in, const EdgePair<std::int32_t>* __restrict__ pairs_in, std::int64_t in_sub,
    EdgePair<std::int32_t>* __restrict__ pairs_out, BucketTiles bt, int d0, int subs,
    int shift, const std::uint32_t* __restrict__ offsets, std::int64_t N, std::int64_t E, std::uint32_t* __restrict__ row_ptr,
    bool direct) {
  using Pair = EdgePair<std::int32_t>;
  using Scan = cub::BlockScan<std::uint32_t, kFirstThreads>;
  extern __shared__ __align__(16) unsigned char level_smem[];
  auto* spairs = reinterpret_cast<Pair*>(level_smem);
  auto* skeys = reinterpret_cast<std::uint16_t*>(level_smem + kFirstTile * sizeof(Pair));
  __shared__ LevelStage st;
  __shared__ std::uint32_t rows[kLevelDigits];  // the sub-bucket's counts a row, then each row's next place (from first)
  constexpr std::uint32_t dmask = kLevelDigits - 1;
  if (blockIdx.x == 0 && threadIdx.x == 0) row_ptr[N] = std::uint32_t(E);
  const int j = d0 + int(blockIdx.x) / subs, h = int(blockIdx.x) % subs;
  auto row_of = [&](std::uint32_t d) { return std::int64_t(j) << shift | std::int64_t(h) << kLevelBits | d; };
  if (bt.start[j] == bt.start[j + 1]) {  // the whole block: an empty bucket has no cells
    if (threadIdx.x < kLevelDigits && row_of(threadIdx.x) < N) row_ptr[row_of(threadIdx.x)] = bt.start[j];
    return;
  }
  const msd::Range range = msd::sub_bucket_range(bt, offsets, j, h, subs);
  const std::int64_t first = range.first, n = range.end - range.first;
  const int w0 = (threadIdx.x / 32) * 32 * kFirstRounds + threadIdx.x % 32;
  if (direct && n <= kFirstTile) {
    for (int i = threadIdx.x; i < kFirstWarps * kLevelDigits; i += kFirstThreads) (&st.wh[0][0])[i] = 0;
    __syncthreads();  // wh zeroed
    const std::int64_t p = first - in_sub + w0;
    level_rank_tile(keys_in + p, pairs_in + p, int(n) - w0, 0, dmask, st, skeys, spairs, [](std::uint32_t) { return 0u; });
    if (threadIdx.x < kLevelDigits && row_of(threadIdx.x) < N)
      row_ptr[row_of(threadIdx.x)] = std::uint32_t(first + st.lstart[threadIdx.x]);
    for (int i = threadIdx.x; i < n; i += kFirstThreads) pairs_out[first + i] = spairs[i];  // in row order already
    return;
  }
  if (threadIdx.x < kLevelDigits) rows[threadIdx.x] = 0;
  __syncthreads();
  for (std::int64_t c = 0; c < n; c += kFirstTile) {  // the counts a row, a tile of keys at a time
    const std::uint16_t* const k = keys_in + (first + c - in_sub) + threadIdx.x;
    const std::int64_t lim = std::min<std::int64_t>(n - c, kFirstTile) - threadIdx.x;
    std::uint32_t kv[kFirstRounds];
#pragma unroll
    for (int r = 0; r < kFirstRounds; ++r) kv[r] = kFirstThreads * r < lim ? std::uint32_t(k[kFirstThreads * r]) : 0u;
#pragma unroll
    for (int r = 0; r < kFirstRounds; ++r)
      if (kFirstThreads * r < lim) atomicAdd(&rows[kv[r] & dmask], 1u);
  }
  __syncthreads();
  {
    const std::uint32_t count = threadIdx.x < kLevelDigits ? rows[threadIdx.x] : 0u;
    std::uint32_t start = 0;
    Scan(st.scan_temp).ExclusiveSum(count, start);
    __syncthreads();  // every count read, and the scan's storage free again
    if (threadIdx.x < kLevelDigits) {
      rows[threadIdx.x] = start;
      if (row_of(threadIdx.x) < N) row_ptr[row_of(threadIdx.x)] = std::uint32_t(first + start);
    }
  }
  for (std::int64_t c = 0; c < n; c += kFirstTile) {
    const int tn = int(std::min<std::int64_t>(n - c, kFirstTile));
    for (int i = threadIdx.x; i < kFirstWarps * kLevelDigits; i += kFirstThreads) (&st.wh[0][0])[i] = 0;
    __syncthreads();  // wh zeroed; the last chunk's rows moved on
    const std::int64_t p = first + c - in_sub + w0;
    level_rank_tile(keys_in + p, pairs_in + p, tn - w0, 0, dmask, st, skeys, spairs, [&](std::uint32_t d) { return rows[d]; });
    for (int i = threadIdx.x; i < tn; i += kFirstThreads) {
      const std::uint32_t key_i = skeys[i], d = key_i & dmask;
      pairs_out[first + std::int64_t(st.gstart[d]) + (i - std::int64_t(st.lstart[d]))] = spairs[i];
    }
    // The chunk's count of row d, from its digit starts, moves the row's place on.
    if (threadIdx.x < kLevelDigits)
      rows[threadIdx.x] += (threadIdx.x + 1 < kLevelDigits ? st.lstart[threadIdx.x + 1] : std::uint32_t(tn)) - st.lstart[threadIdx.x];
  }
}

// PIPELINK_AGG_MSD_LAST=auto's sample (msd::SubSample): one block counts the sampled keys a
// sub-bucket in `cells` (zeroed here), then adds the counts past s.big into *in_big (the samples
// in such sub-buckets). An index outside [0, N) is left out (the first pass names it). Queued on
// the copy stream before the first pass's counts, so it is done long before the host reads it.
// Why this shape: session 34's form read the sampled keys twice (the second time to look up each
// one's count) with four loads a thread in flight and ran beside the first scatter: ~32 dependent
// rounds of DRAM latency under a saturated scatter. Now each thread loads kSampleBatch keys
// before its atomics, and the second look reads the cells (~10K on products-like), not the keys.
// Measured (H200, products-like, bench --ab, same rounds): the one-shot by default (sampled)
// 5.97 ms against 5.97 forced by rows, which skips the sample (the first form: 6.21 against 6.07).
constexpr int kSampleBatch = 16;
template <class I>
__global__ void __launch_bounds__(1024)
    msd_sample_kernel(const I* __restrict__ dst, std::int64_t N, msd::SubSample s, std::uint32_t* __restrict__ cells,
                      std::uint32_t* __restrict__ in_big) {
  for (std::int64_t i = threadIdx.x; i < s.cells; i += blockDim.x) cells[i] = 0;
  __syncthreads();
  for (std::int64_t k0 = threadIdx.x; k0 < s.taken; k0 += std::int64_t(blockDim.x) * kSampleBatch) {
    std::uint64_t v[kSampleBatch];
#pragma unroll
    for (int u = 0; u < kSampleBatch; ++u) {
      const std::int64_t k = k0 + std::int64_t(u) * blockDim.x;
      v[u] = k < s.taken ? std::uint64_t(std::make_unsigned_t<I>(dst[k * s.stride + s.stride / 2])) : ~std::uint64_t(0);
    }
#pragma unroll
    for (int u = 0; u < kSampleBatch; ++u)
      if (v[u] < std::uint64_t(N)) atomicAdd(&cells[v[u] >> msd::kLevelBits], 1u);
  }
  __syncthreads();  // every count in
  std::uint32_t mine = 0;
  for (std::int64_t i = threadIdx.x; i < s.cells; i += blockDim.x) {
    const std::uint32_t c = __ldcg(cells + i);
    mine += c > s.big ? c : 0u;
  }
  using Reduce = cub::BlockReduce<std::uint32_t, 1024>;
  __shared__ typename Reduce::TempStorage temp;
  const std::uint32_t sum = Reduce(temp).Sum(mine);
  if (threadIdx.x == 0) *in_big = sum;
}

// kMsdStreams + 1 non-blocking streams per device, made at first use and kept for the process:
// the batches' side streams, then the buckets' starts' copy stream (its own, so that its host
// sync never waits for batches another call queued on a side stream). The copy stream has the
// device's greatest priority: the sample kernel queued on it takes the next free slot of the
// first pass's kernels, which fill the GPU, instead of waiting for their end.
cudaStream_t* msd_side_streams(int device) {
  static std::mutex mu;
  static std::map<int, std::array<cudaStream_t, kMsdStreams + 1>> streams;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(device);
  if (it == streams.end()) {
    // The streams made so far are destroyed if a later one (or the map's insert) fails: nothing
    // is cached then, so each retry leaked up to kMsdStreams (a review, session 48).
    struct Made {
      std::array<cudaStream_t, kMsdStreams + 1> s{};
      ~Made() {
        for (cudaStream_t q : s)
          if (q) PIPELINK_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(q));
      }
    } made;
    int least = 0, greatest = 0;
    PIPELINK_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int k = 0; k <= kMsdStreams; ++k)
      PIPELINK_CUDA_CHECK(cudaStreamCreateWithPriority(&made.s[std::size_t(k)], cudaStreamNonBlocking,
                                                       k == kMsdStreams ? greatest : least));
    it = streams.emplace(device, made.s).first;
    made.s.fill(nullptr);  // the map's now
  }
  return it->second.data();
}

// Returns false, having queued nothing that stays, where its buffers do not fit: the one sort
// then runs (and its own short-memory paths). The caller has checked the conditions
// (PlanKnobs::oneshot_msd, build_msd); it reads the PlanKnobs::msd_* knobs and
// test_msd_scratch_fail. fw: a one-shot call's float32 weights, whose bits the pairs carry in
// place of the edge id; null: the pairs carry the edge id, as a plan build's.
template <class I>
bool sort_narrow_msd(CudaPlan& plan, const TensorView& src, const TensorView& dst, std::int64_t N, cudaStream_t s,
                     unsigned long long* flag, BuildTrace& trace, const float* fw, const PlanKnobs& knobs) {
  const bool test_scratch_fail = knobs.test_msd_scratch_fail;
  using Pair = EdgePair<std::int32_t>;
  using K16 = std::uint16_t;
  const std::int64_t E = plan.num_edges;
  const int end_bit = bits_for(N), shift = end_bit - kFirstBits;  // the bits each bucket sorts: [0, shift), in [1, 16]
  const std::int64_t tiles = (E + kFirstTile - 1) / kFirstTile, cells = tiles * kFirstDigits;
  const auto up = round_up_256;
  std::size_t scan_bytes = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::uint32_t*>(nullptr),
                                                    static_cast<std::uint32_t*>(nullptr), cells, s));
  const std::size_t counts_bytes = up(2 * std::size_t(cells) * sizeof(std::uint32_t)),
                    bases_bytes = up(std::size_t(tiles) * kFirstWarps * kFirstDigits * sizeof(std::uint16_t));
  // `auto`'s sample of the keys (msd::SubSample), where there are two levels to choose between:
  // its cells and count after the first pass's buffers.
  msd::SubSample sample =
      shift > kLevelBits && knobs.msd_last == msd::Last::automatic ? msd::plan_sample(E, N) : msd::SubSample{};
  const std::size_t sample_bytes = sample.taken > 0 ? up(std::size_t(sample.cells + 1) * sizeof(std::uint32_t)) : 0;
  // The kept pairs (the plan's) in the current pool; the transient buffers where the one sort's
  // arena would be (PIPELINK_AGG_BUILD_POOL=own: the scratch pool; a one-shot call's are there
  // anyway).
  DeviceBuffer kept = DeviceBuffer::try_make(E * sizeof(Pair), s), keys, first;
  if (kept.get()) {
    const ScratchPoolScope scratch(knobs.build_own_pool);
    keys = DeviceBuffer::try_make(up(E * sizeof(K16)), s);
    if (keys.get()) first = DeviceBuffer::try_make(counts_bytes + bases_bytes + up(scan_bytes) + sample_bytes, s);
  }
  if (!first.get()) return false;
  auto* counts = first.as<std::uint32_t>();
  std::uint32_t* offsets = counts + cells;
  auto* bases = reinterpret_cast<std::uint16_t*>(first.as<char>() + counts_bytes);
  void* scan_temp = first.as<char>() + counts_bytes + bases_bytes;
  const std::uint32_t mask = kFirstDigits - 1;
  int device = 0;
  PIPELINK_CUDA_CHECK(cudaGetDevice(&device));
  cudaStream_t* side = msd_side_streams(device);
  const cudaStream_t copy = side[kMsdStreams];
  BucketStarts starts{};  // before ev: the copy stream writes it (see Events::pending)
  struct Events {  // destroyed on every way out (an event pending on a stream is released when it completes)
    cudaEvent_t ready = nullptr, scanned = nullptr, fork = nullptr;
    std::array<cudaEvent_t, kMsdStreams> joins{};
    // Set while the copy stream may still write `first`, `sample` or `starts` (declared before
    // this, so freed after): a throw on the way waits for it instead of freeing what it writes.
    cudaStream_t pending = nullptr;
    ~Events() {
      if (pending) (void)cudaStreamSynchronize(pending);
      for (cudaEvent_t e : {ready, scanned, fork})
        if (e) (void)cudaEventDestroy(e);
      for (cudaEvent_t e : joins)
        if (e) (void)cudaEventDestroy(e);
    }
  } ev;
  // The sample on the copy stream, once `first` (allocated in stream order on s) is there: before
  // the first pass, so that it runs beside the counts. Its count comes back with the buckets'
  // starts below (a copy to pageable memory returns when done: queued here, it would hold the host
  // before the first pass is queued).
  auto* const sample_at =
      reinterpret_cast<std::uint32_t*>(first.as<char>() + counts_bytes + bases_bytes + up(scan_bytes));
  if (sample.taken > 0) {
    PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&ev.ready, cudaEventDisableTiming));
    PIPELINK_CUDA_CHECK(cudaEventRecord(ev.ready, s));
    PIPELINK_CUDA_CHECK(cudaStreamWaitEvent(copy, ev.ready, 0));
    ev.pending = copy;
    msd_sample_kernel<I><<<1, 1024, 0, copy>>>(dst.data_as<const I>(), N, sample, sample_at, sample_at + sample.cells);
    check_launch();
  }
  first_digit_warp_counts_kernel<I><<<int(tiles), kFirstThreads, 0, s>>>(dst.data_as<const I>(), E, std::uint64_t(N), mask,
                                                                         shift, counts, bases, flag);
  check_launch();
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan_temp, scan_bytes, counts, offsets, cells, s));
  PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&ev.scanned, cudaEventDisableTiming));
  PIPELINK_CUDA_CHECK(cudaEventRecord(ev.scanned, s));
  auto* scatter = fw ? first_digit_scatter_kernel<I, 1, true, K16> : first_digit_scatter_kernel<I, 0, true, K16>;
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(scatter, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kFirstSmem)));
  scatter<<<int(tiles), kFirstThreads, kFirstSmem, s>>>(src.data_as<const I>(), dst.data_as<const I>(), E, std::uint64_t(N),
                                                       mask, shift, offsets, keys.as<K16>(), kept.as<Pair>(), flag, fw, bases,
                                                       HistSpec{});
  check_launch();
  // The buckets' starts (digit d's first place is tile 0's, offsets[d * tiles]) are final after
  // the scan, which the scatter only reads: copied on a side stream while the scatter runs, so
  // that the batches below are planned and queued before it ends. Copied after the scatter on s,
  // the GPU waited ~45 us between the scatter and the level counts for the host's sync, plan
  // and launches (v33 trace, products-like, H200: scatter end 875 us, level counts 925 us).
  PIPELINK_CUDA_CHECK(cudaStreamWaitEvent(copy, ev.scanned, 0));
  ev.pending = copy;
  if (sample.taken > 0)
    PIPELINK_CUDA_CHECK(
        cudaMemcpyAsync(&sample.in_big, sample_at + sample.cells, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, copy));
  PIPELINK_CUDA_CHECK(cudaMemcpy2DAsync(starts.v, sizeof(std::uint32_t), offsets, std::size_t(tiles) * sizeof(std::uint32_t),
                                        sizeof(std::uint32_t), kFirstDigits, cudaMemcpyDeviceToHost, copy));
  PIPELINK_CUDA_CHECK(cudaStreamSynchronize(copy));
  ev.pending = nullptr;
  starts.v[kFirstDigits] = std::uint32_t(E);
  first.reset();  // stream-ordered on s, after the scatter; the copy is done
  trace.mark("msd_first_pass");

  // The second level's tiles, batches, streams and digits (msd::plan_levels).
  const msd::Levels lv = msd::plan_levels(starts.v, E, shift, knobs.msd_batch, knobs.msd_streams, knobs.msd_last, sample);
  const BucketTiles& bt = lv.bt;
  const std::vector<msd::Batch>& batches = lv.batches;
  const int streams = lv.streams, levels = lv.levels;
  const std::int64_t cap = lv.cap;
  const std::uint32_t batch_tiles = lv.batch_tiles, dmask1 = lv.dmask1, dmask2 = lv.dmask2;
  // By rows (two levels only; PIPELINK_AGG_MSD_LAST, msd::Last): the first level by the high
  // digit, then a block a sub-bucket (level_rows_kernel), which writes the row offsets itself.
  const bool by_rows = lv.by_rows;
  const int subs = int(dmask2) + 1;
  const std::int64_t cells1 = std::int64_t(bt.tile0[kFirstDigits]) * kLevelDigits,
                     cells2 = std::int64_t(batch_tiles) * kLevelDigits;
  std::size_t temp1 = 0, temp2 = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp1, static_cast<std::uint32_t*>(nullptr), cells1, s));
  if (levels == 2 && !by_rows)
    PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp2, static_cast<std::uint32_t*>(nullptr), cells2, s));
  // One arena: pass 1's cells and scan temp, then a side stream's part each (the batch's keys and
  // pairs, pass 2's cells and scan temp).
  const std::size_t shared_bytes = up(cells1 * sizeof(std::uint32_t)) + up(temp1),
                    kb = up(std::size_t(cap) * sizeof(K16)), pb = up(std::size_t(cap) * sizeof(Pair)),
                    c2b = levels == 2 && !by_rows ? up(cells2 * sizeof(std::uint32_t)) : 0,
                    per_stream = kb + pb + c2b + up(temp2);
  // Short of memory here: back to the one sort (which reads the indices again), as before pass 1.
  // By rows the blocks write the row offsets: made here, before the arena (the peak holds them).
  DeviceBuffer rows_rp;
  if (by_rows && !test_scratch_fail) {
    rows_rp = DeviceBuffer::try_make((N + 1) * sizeof(std::uint32_t), s);
    if (!rows_rp.get()) return false;
  }
  DeviceBuffer arena;
  if (!test_scratch_fail) {
    const ScratchPoolScope scratch(knobs.build_own_pool);
    arena = DeviceBuffer::try_make(shared_bytes + per_stream * streams, s);
  }
  if (!arena.get()) return false;
  auto* counts1 = arena.as<std::uint32_t>();
  void* scan1 = arena.as<char>() + up(cells1 * sizeof(std::uint32_t));
  // The first level's digit: the key's low kLevelBits bits, or by rows its high digit.
  const int shift1 = by_rows ? kLevelBits : 0;
  const std::uint32_t mask1 = by_rows ? dmask2 : dmask1;
  level_counts_kernel<<<int(bt.tile0[kFirstDigits]), kLevelCountThreads, 0, s>>>(keys.as<K16>(), 0, bt, 0, shift1, mask1, counts1, 0);
  check_launch();
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan1, temp1, counts1, cells1, s));  // in place: absolute positions
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(level_scatter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kLevelSmem)));
  // By rows the row offsets are written by the blocks, every row of the batches' buckets (see
  // level_rows_kernel); the empty buckets before the first batch's (no batch starts with an empty
  // one, and one absorbs those after it) hold rows without edges: their start is 0.
  std::uint32_t* rp = nullptr;
  if (by_rows) {
    PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(level_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kLevelSmem)));
    rp = rows_rp.as<std::uint32_t>();
    if (knobs.test_poison_rows) PIPELINK_CUDA_CHECK(cudaMemsetAsync(rp, 0xAB, (N + 1) * sizeof(std::uint32_t), s));
    const std::int64_t lead = msd::rows_before_batches(lv, shift, N);
    if (lead > 0) PIPELINK_CUDA_CHECK(cudaMemsetAsync(rp, 0, lead * sizeof(std::uint32_t), s));
  }
  PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&ev.fork, cudaEventDisableTiming));
  for (int k = 0; k < streams; ++k) PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&ev.joins[k], cudaEventDisableTiming));
  PIPELINK_CUDA_CHECK(cudaEventRecord(ev.fork, s));
  for (int k = 0; k < streams; ++k) PIPELINK_CUDA_CHECK(cudaStreamWaitEvent(side[k], ev.fork, 0));
  // Batch b on side stream b % streams, in its scratch. Pass 1 reads the kept buffer at the
  // batch's positions and writes the scratch at position - p0; pass 2 reads it back and writes
  // its (batch-relative) places + p0.
  std::exception_ptr error;
  try {
    for (std::size_t b = 0; b < batches.size(); ++b) {
      const int k = int(b % std::size_t(streams));
      const cudaStream_t st = side[k];
      char* const part = arena.as<char>() + shared_bytes + per_stream * std::size_t(k);
      auto* sk = reinterpret_cast<K16*>(part);
      auto* sp = reinterpret_cast<Pair*>(part + kb);
      auto* counts2 = reinterpret_cast<std::uint32_t*>(part + kb + pb);
      void* scan2 = part + kb + pb + c2b;
      const std::uint32_t g0 = bt.tile0[batches[b].d0], nt = bt.tile0[batches[b].d1] - g0;
      const std::int64_t p0 = bt.start[batches[b].d0], n = std::int64_t(bt.start[batches[b].d1]) - p0;
      level_scatter_kernel<<<int(nt), kFirstThreads, kLevelSmem, st>>>(keys.as<K16>(), kept.as<Pair>(), 0, sk, sp, -p0, bt, g0,
                                                                      shift1, mask1, counts1, 0);
      check_launch();
      if (by_rows) {
        const int blocks = (batches[b].d1 - batches[b].d0) * subs;
        level_rows_kernel<<<blocks, kFirstThreads, kLevelSmem, st>>>(sk, sp, p0, kept.as<Pair>(), bt, batches[b].d0, subs, shift,
                                                                     counts1, N, E, rp, knobs.msd_one_tile_direct);
        check_launch();
      } else if (levels == 2) {
        const std::int64_t cell0 = std::int64_t(g0) * kLevelDigits;
        level_counts_kernel<<<int(nt), kLevelCountThreads, 0, st>>>(sk, p0, bt, g0, kLevelBits, dmask2, counts2, cell0);
        check_launch();
        std::size_t tb = temp2;
        PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan2, tb, counts2, std::int64_t(nt) * kLevelDigits, st));
        level_scatter_kernel<<<int(nt), kFirstThreads, kLevelSmem, st>>>(sk, sp, p0, keys.as<K16>(), kept.as<Pair>(), p0, bt, g0,
                                                                        kLevelBits, dmask2, counts2, cell0);
        check_launch();
      } else {  // one pass (keys of at most 14 bits): its result back in place
        PIPELINK_CUDA_CHECK(cudaMemcpyAsync(keys.as<K16>() + p0, sk, n * sizeof(K16), cudaMemcpyDeviceToDevice, st));
        PIPELINK_CUDA_CHECK(cudaMemcpyAsync(kept.as<Pair>() + p0, sp, n * sizeof(Pair), cudaMemcpyDeviceToDevice, st));
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Joined whatever happened, so that the arena is freed (on s) after every use queued; where
  // the join itself fails, the side stream is waited for from the host instead.
  for (int k = 0; k < streams; ++k)
    if (cudaEventRecord(ev.joins[k], side[k]) != cudaSuccess || cudaStreamWaitEvent(s, ev.joins[k], 0) != cudaSuccess)
      (void)cudaStreamSynchronize(side[k]);
  arena.reset();  // stream-ordered on s, after the joins
  if (error) std::rethrow_exception(error);
  trace.mark("msd_levels");
  plan.pairs = std::move(kept);
  if (by_rows) {  // the blocks wrote the row offsets, every row's
    plan.row_ptr = std::move(rows_rp);
    return true;
  }
  plan.row_ptr = DeviceBuffer((N + 1) * sizeof(std::int32_t), s);
  rp = reinterpret_cast<std::uint32_t*>(plan.row_ptr.as<std::int32_t>());
  PIPELINK_CUDA_CHECK(cudaMemsetAsync(rp, 0xFF, (N + 1) * sizeof(std::uint32_t), s));
  msd_row_starts_kernel<<<grid_for((E + kRowStartKeys - 1) / kRowStartKeys, 256), 256, 0, s>>>(keys.as<K16>(), starts,
                                                                                               shift, E, N, rp);
  check_launch();
  const std::size_t min_bytes = row_ptr_suffix_min(rp, N, nullptr, 0, s);
  DeviceBuffer min_temp;
  {
    const ScratchPoolScope scratch(knobs.build_own_pool);  // transient, as the keys
    min_temp = DeviceBuffer(std::max<std::size_t>(min_bytes, 1), s);
  }
  (void)row_ptr_suffix_min(rp, N, min_temp.get(), min_bytes, s);
  trace.mark("row_ptr_scan");
  return true;
}

// Whether two blocks of the fused first pass fit an SM of the current device (see sort_narrow).
// Asked once a device: the three queries took 5-11 us of host time before each build's first
// kernel, while the GPU waited (v33 traces, products-like one-shot, H200).
template <class I>
bool first_pass_fits() {
  int device = 0;
  PIPELINK_CUDA_CHECK(cudaGetDevice(&device));  // cudaFuncGetAttributes answers for it
  static std::mutex mu;
  static std::map<int, bool> fits;
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = fits.find(device); it != fits.end()) return it->second;
  int per_sm = 0, reserved = 0;
  PIPELINK_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  PIPELINK_CUDA_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  cudaFuncAttributes fa{};
  // The fused forms' static size, the larger (the warp forms hold no block scan).
  PIPELINK_CUDA_CHECK(cudaFuncGetAttributes(&fa, first_digit_scatter_kernel<I, 0, false>));
  return fits[device] = 2 * (fa.sharedSizeBytes + kFirstSmem + std::size_t(reserved)) <= std::size_t(per_sm);
}

// The one sort's CUB passes with the digit counts from the first pass (PIPELINK_AGG_BUILD_HIST=scatter or own).
// CUB's SortPairs runs, for these sizes (CCCL 3.x in CUDA 13.0, sm_90): two memsets, a histogram
// kernel that reads every key (78 us on products-like, H200, v38 trace: the build's sort step
// 1.20 ms), an exclusive sum of the counts, then per 8-bit pass a memset of its look-back table
// and its onesweep kernel. The first pass reads every dst already (as int64 on the benchmarks),
// so it counts the later passes' digits too (HistSpec: at the scatter's write-out by default, in
// the counts kernel under PIPELINK_AGG_BUILD_HIST=own, v38's form) and the passes below run
// CUB's own onesweep kernel (cub::detail::radix_sort::DeviceRadixSortOnesweepKernel, the kernel
// SortPairs launches, with its policy hub's policies) on those counts: the same kernel on the same
// counts, so the same bits. Not CUB's public API: where its shape is not the one assumed here
// (onesweep, 8-bit digits, one portion) the build takes SortPairs.
// Measured (H200, products-like, v38): plan build 2.04 against 2.07-2.08 ms by SortPairs in the
// same rounds (two machine starts); traced, CUB's part 1.20 -> 1.115 ms and the counts kernel
// +~45 us (its shared-memory atomics: striping the blocks' global ones changed nothing).
// CCCL 3.0 (CUDA 13.0) only, where the kernel, its policies and InvokeOnesweep's protocol (bins,
// look-back table, tile counters, portions of < 2^28 items) were read: another CCCL compiles
// without it and every build takes SortPairs.
#if defined(CCCL_MAJOR_VERSION) && CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION == 0
#define PIPELINK_OWN_ONESWEEP 1
#else
#define PIPELINK_OWN_ONESWEEP 0
#endif
using OwnPortion = int;  // CUB's PortionOffsetT and AtomicOffsetT for onesweep
struct OnesweepShape {
  bool ok = false;
  int threads = 0, tile = 0, single_tile = 0;
  std::int64_t portion = 0;  // items one portion (launch) takes
};
#if PIPELINK_OWN_ONESWEEP
using SortHub = cub::detail::radix::policy_hub<std::uint32_t, EdgePair<std::int32_t>, std::uint32_t>;
struct OnesweepQuery {
  OnesweepShape* out;
  template <class P>
  cudaError_t Invoke() {
    if constexpr (P::ONESWEEP && P::ONESWEEP_RADIX_BITS == 8) {
      out->ok = true;
      out->threads = P::OnesweepPolicy::BLOCK_THREADS;
      out->tile = P::OnesweepPolicy::BLOCK_THREADS * P::OnesweepPolicy::ITEMS_PER_THREAD;
      out->single_tile = P::SingleTilePolicy::BLOCK_THREADS * P::SingleTilePolicy::ITEMS_PER_THREAD;
      out->portion = ((1 << 28) - 1) / out->tile * out->tile;  // as DispatchRadixSort::InvokeOnesweep
    }
    return cudaSuccess;
  }
};
#endif
OnesweepShape onesweep_shape() {
#if !PIPELINK_OWN_ONESWEEP
  return {};
#else
  int device = 0;
  PIPELINK_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mu;
  static std::map<int, OnesweepShape> shapes;
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = shapes.find(device); it != shapes.end()) return it->second;
  int ptx = 0;
  PIPELINK_CUDA_CHECK(cub::PtxVersion(ptx));
  OnesweepShape sh;
  OnesweepQuery q{&sh};
  PIPELINK_CUDA_CHECK(SortHub::MaxPolicy::Invoke(ptx, q));
  return shapes[device] = sh;
#endif
}
// The counts' exclusive sums in place, a block (256 threads) a pass.
__global__ void __launch_bounds__(kHistDigits) hist_exclusive_kernel(std::uint32_t* hist) {
  using Scan = cub::BlockScan<std::uint32_t, kHistDigits>;
  __shared__ typename Scan::TempStorage temp;
  std::uint32_t* const h = hist + blockIdx.x * kHistDigits;
  std::uint32_t v = h[threadIdx.x];
  Scan(temp).ExclusiveSum(v, v);
  h[threadIdx.x] = v;
}
// own_onesweep's region: the counts (hp x 256, exclusive-summed), then hp tile counters and the
// look-back table (tiles x 256), each 256-byte aligned.
struct OwnLayout {
  std::int64_t blocks;                // onesweep tiles
  std::size_t ctrs, lookback, bytes;  // offsets and size
  OwnLayout(const OnesweepShape& sh, std::int64_t E, int hp)
      : blocks((E + sh.tile - 1) / sh.tile),
        ctrs(round_up_256(std::size_t(hp) * kHistDigits * sizeof(std::uint32_t))),
        lookback(ctrs + round_up_256(std::size_t(hp) * sizeof(OwnPortion))),
        bytes(lookback + round_up_256(std::size_t(blocks) * kHistDigits * sizeof(OwnPortion))) {}
};
// The passes over bits [begin, end), 8 at a time, from keys/pairs' current buffers (flipped per
// pass, as SortPairs does), on the counts at `temp` (OwnLayout).
void own_onesweep(const OnesweepShape& sh, cub::DoubleBuffer<std::uint32_t>& keys,
                  cub::DoubleBuffer<EdgePair<std::int32_t>>& pairs, std::int64_t E, int begin, int end, int hp,
                  char* temp, cudaStream_t s) {
  const OwnLayout at(sh, E, hp);
  auto* const hist = reinterpret_cast<std::uint32_t*>(temp);
  auto* const ctrs = reinterpret_cast<OwnPortion*>(temp + at.ctrs);
  auto* const lookback = reinterpret_cast<OwnPortion*>(temp + at.lookback);
  const std::int64_t blocks = at.blocks;
#if PIPELINK_OWN_ONESWEEP
  auto kernel = cub::detail::radix_sort::DeviceRadixSortOnesweepKernel<SortHub::MaxPolicy, cub::SortOrder::Ascending,
                                                                       std::uint32_t, EdgePair<std::int32_t>,
                                                                       std::uint32_t, OwnPortion, OwnPortion>;
  PIPELINK_CUDA_CHECK(cudaMemsetAsync(ctrs, 0, std::size_t(hp) * sizeof(OwnPortion), s));
  for (int p = 0, bit = begin; bit < end; ++p, bit += 8) {
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(lookback, 0, std::size_t(blocks) * kHistDigits * sizeof(OwnPortion), s));
    kernel<<<int(blocks), sh.threads, 0, s>>>(lookback, ctrs + p, nullptr, hist + p * kHistDigits, keys.Alternate(),
                                              keys.Current(), pairs.Alternate(), pairs.Current(), OwnPortion(E), bit,
                                              std::min(8, end - bit), cub::detail::identity_decomposer_t{});
    check_launch();
    keys.selector ^= 1;
    pairs.selector ^= 1;
  }
#else
  (void)keys, (void)pairs, (void)begin, (void)end, (void)hist, (void)ctrs, (void)lookback, (void)blocks, (void)s;
  throw Error("aggregate: internal error: own_onesweep without CCCL 3.0's onesweep kernel");
#endif
}

// Narrow plans: keys = dst (uint32), values = (src, id) pairs, one stable radix sort.
// Memory: the pairs the plan keeps are one allocation, made first; everything transient (both key
// buffers, the other pairs buffer, CUB's temp) is one more, freed at the end. Why: with the four
// buffers allocated one by one and the kept one among them, a build next to a live plan (the
// benchmark's `plan = build(...)`, a user rebuilding each epoch) spent 0.2-1.6 ms more before its
// first kernel in 11 of 12 builds (PIPELINK_LOG_LEVEL=debug trace at d170973, products-like:
// "init" 0.65-2.04 ms against 0.42 in most one-shot calls, where no plan outlives the call), so
// the plan-build median was 2.98 ms against ~2.45 ms of device work. After: 2.59 ms.
//
// edge_ranges_if_short (one-shot calls with the knob unset): where the one sort does not fit and
// destination ranges are not used either (the whole list's pairs do not fit, more than
// kOneShotDestRanges would be needed, or PIPELINK_AGG_BUILD_MEMORY binds), set it to the number
// of edge ranges whose builds would, and return with no plan built (see aggregate_one_shot).
// The counts: cuda/short_build.hpp.
template <class I>
void sort_narrow(CudaPlan& plan, const TensorView& src, const TensorView& dst, std::int64_t N, const PlanKnobs& knobs,
                 cudaStream_t s, unsigned long long* flag, BuildTrace& trace, const float* fw,
                 std::int64_t* edge_ranges_if_short) {
  const std::int64_t chunks = knobs.build_chunks;
  using K = std::uint32_t;
  using Pair = EdgePair<std::int32_t>;
  const std::int64_t E = plan.num_edges;
  const int end_bit = bits_for(N);
  if (chunks >= 2) return sort_narrow_chunked<I>(plan, src, dst, N, chunks, s, flag, trace, fw);
  // A narrow plan has E < 2^31, so CUB's item count is 32-bit: its onesweep then takes 32-bit
  // offsets (build micro A2 against A1, products-like, H200: 2.151 against 2.206 ms with the init,
  // the same keys and pairs bitwise). The temp query and the sort must use the same count type.
  const std::uint32_t n32 = std::uint32_t(E);
  // (A two-level sort, CUB on bits [6, 22) and a shared-memory rank of the low 6 bits per 64-row
  // bucket, gave the same plan bitwise but was no faster: products-like 2.40-2.42 against 2.40 ms,
  // power-law 2.97-3.05 against 2.40, H200, session 12; removed, in git at 35fda52.)
  // The fused first pass (see first_digit_scatter_kernel) where two of its blocks fit an SM, as
  // measured on the H200 (228 KB an SM against ~105 KB a block); elsewhere (sm_80: 164 KB an
  // SM, one block; sm_86: 100) the init and CUB's passes over every bit, as before: one block an
  // SM was never timed and would leave the SM idle at each of the pass's barriers.
  const bool fused = knobs.build_first != 2 && E > 0 && first_pass_fits<I>();
  const bool warp_counts = fused && knobs.build_first == 0;  // after the fit: no pass, no warp form
  // The MSD sort where it applies: a one-shot call's with float32 weights (PlanKnobs::oneshot_msd;
  // PIPELINK_AGG_ONESHOT_W=late asks for the one sort's first pass with w read at its write-out),
  // a plan build's (or a one-shot call's without float32 weights) where asked (PlanKnobs::build_msd).
  const bool msd = fw ? knobs.oneshot_msd && !knobs.oneshot_w_late : knobs.build_msd;
  if (msd && warp_counts && chunks == 0 && knobs.build_memory == 0 && end_bit > kFirstBits &&
      end_bit - kFirstBits <= 16 &&
      sort_narrow_msd<I>(plan, src, dst, N, s, flag, trace, fw, knobs))
    return;
  const int first_bits = fused ? std::min(kFirstBits, end_bit) : 0;  // the bits the first pass sorts
  const std::int64_t tiles = fused ? (E + kFirstTile - 1) / kFirstTile : 0;
  const std::int64_t cells = tiles * kFirstDigits;  // the first pass's counts, [digit][tile]
  // The CUB passes on the first pass's digit counts (own_onesweep; taken by the scatter or, under
  // PIPELINK_AGG_BUILD_HIST=own and in one-shot builds, by the counts kernel) where its shape
  // holds: the warp form's first pass, 1-3 passes of 8 bits, one portion, more than a single tile.
  const int hp = (end_bit - first_bits + 7) / 8;
  OnesweepShape osh;
  if (warp_counts && knobs.build_hist != BuildHist::cub && hp >= 1 && hp <= kHistPasses) osh = onesweep_shape();
  const bool own_hist = osh.ok && E > osh.single_tile && E <= osh.portion;
  // CUB's temp size depends only on the sizes: ask with null buffers first. The first pass's scan
  // shares the region (it is done before CUB starts); own_onesweep's counts and tables follow the
  // scan's temp (the counts are written before the scan and read after it).
  std::size_t temp_bytes = 0, scan_bytes = 0;
  if (!own_hist && (first_bits < end_bit || !fused)) {
    cub::DoubleBuffer<K> k0(nullptr, nullptr);
    cub::DoubleBuffer<Pair> p0(nullptr, nullptr);
    PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k0, p0, n32, first_bits, end_bit, s));
  }
  if (fused)
    PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const std::uint32_t*>(nullptr),
                                                      static_cast<std::uint32_t*>(nullptr), cells, s));
  const auto up = round_up_256;
  // keys_b, CUB's alternate keys, holds the first pass's counts and offsets until CUB starts.
  // The warp form's bases (u16, a warp's per digit) after them: 2 KB a tile of 8192 edges.
  const std::size_t first_scratch = 2 * cells * sizeof(std::uint32_t) +
                                    (warp_counts ? std::size_t(tiles) * kFirstWarps * kFirstDigits * sizeof(std::uint16_t) : 0);
  // Own passes: their region stands for CUB's temp below (the arena; the short-memory estimates).
  if (own_hist) temp_bytes = up(scan_bytes) + OwnLayout(osh, E, hp).bytes;
  const std::size_t kb = up(std::max<std::size_t>(E * sizeof(K), first_scratch)), pb = up(E * sizeof(Pair)),
                    arena_bytes = 2 * kb + pb + up(std::max(temp_bytes, scan_bytes));
  const bool capped = chunks == 0 && knobs.build_memory > 0 && arena_bytes > knobs.build_memory;
  // The kept pairs first (see above). A one-shot build that may hand over to edge ranges makes
  // them only where the one sort is not capped, and only if they fit: edge ranges never hold the
  // whole list's pairs, and need no room for them.
  DeviceBuffer kept;
  if (!edge_ranges_if_short) kept = DeviceBuffer(E * sizeof(Pair), s);
  else if (!capped) kept = DeviceBuffer::try_make(E * sizeof(Pair), s);
  const bool kept_short = edge_ranges_if_short && !kept.get();
  // The sort's arena is freed before the build returns: the scratch pool where asked
  // (PIPELINK_AGG_BUILD_POOL=own; a one-shot call's build is in it anyway).
  DeviceBuffer arena;
  if (!(capped || kept_short)) {
    const ScratchPoolScope scratch(knobs.build_own_pool);
    arena = DeviceBuffer::try_make(arena_bytes, s);
  }
  if (!arena.get() && chunks == 0) {
    // The one sort's transient 16 bytes per edge do not fit (the device, or the
    // PIPELINK_AGG_BUILD_MEMORY cap). The range counts: cuda/short_build.hpp (tested on the host).
    // A one-shot call whose pairs fit (and no cap set) sorts destination ranges, as a plan build
    // does: the same plan, so the bits of every other call, whatever memory is free. Edge ranges
    // (sized from free memory, so their number and the bits can change from call to call) only
    // where the pairs do not fit, where more than kOneShotDestRanges destination ranges would be
    // needed, or where a cap asks for less: they never hold the whole list's pairs. They free the
    // pairs first, and size the ranges from the settled free memory (see settled_free_bytes).
    bool edge_ranges = edge_ranges_if_short && (capped || kept_short);
    if (edge_ranges) kept.reset();
    std::size_t free_b = 0, total_b = 0;
    auto measure_free = [&] {
      if (edge_ranges_if_short) {
        const bool debug = log_level() <= LogLevel::debug;
        if (debug) PIPELINK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));  // before settling, for the log only
        const std::size_t before = free_b;
        free_b = settled_free_bytes(s);
        if (debug)
          ::pipelink::detail::log_message(
              LogLevel::debug, "aggregate: one-shot build short of memory: " + std::to_string(before) + " B free, " +
                                   std::to_string(free_b) + " B once settled; pairs " +
                                   (kept.get() ? "held" : "not held"));
      } else {
        PIPELINK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      }
    };
    measure_free();
    const double temp = double(up(temp_bytes));
    const double cap = capped ? double(knobs.build_memory) : 0.0;
    // Past kOneShotDestRanges destination ranges (their selects' reads of dst), edge ranges.
    if (edge_ranges_if_short && !edge_ranges &&
        short_build::one_shot_destination_ranges(E, double(free_b), temp, knobs.test_oneshot_dest_ranges) == 0) {
      edge_ranges = true;
      kept.reset();
      measure_free();
    }
    const std::string why = capped ? "PIPELINK_AGG_BUILD_MEMORY=" + std::to_string(knobs.build_memory >> 20)
                                   : std::to_string(free_b >> 20) + " MB free";
    if (edge_ranges) {
      // A one-shot range holds its plan (8 bytes per edge) and its sort (16) at once, in 90% of
      // what is free. A range's sort also stays in the cap, if one is set.
      const std::int64_t k = short_build::one_shot_edge_ranges(E, double(free_b), temp, cap);
      // 0 only where the device (a cap never does: short_build::cap_ranges) has no room for
      // the whole list's CUB temp storage. aggregate_one_shot still tries 2 edge ranges, each
      // with its own (smaller) temp storage, and warns.
      if (k == 0)
        throw OutOfMemoryError(
            up(temp_bytes), free_b,
            "aggregate: a one-shot call's plan build needs more transient memory than the " +
                std::to_string(free_b) + " B free leave for one sort (CUB's temp storage alone: " +
                std::to_string(up(temp_bytes)) +
                " B); free device memory, or use the lean path (AggregatePath::lean), which needs none");
      *edge_ranges_if_short = k;
      // A warning where free memory chose the count: the call breaks the one-shot's promise of
      // the same bits every call (a cap, asked for, is only info).
      const LogLevel level = capped ? LogLevel::info : LogLevel::warn;
      if (log_level() <= level)
        ::pipelink::detail::log_message(
            level, "aggregate: the one-shot build's one sort does not fit (" + why + ": " + std::to_string(free_b) +
                       " B, E " + std::to_string(E) + ", CUB temp " + std::to_string(up(temp_bytes)) +
                       " B), and destination ranges do not suit it (its pairs do not fit, more than " +
                       std::to_string(knobs.test_oneshot_dest_ranges) +
                       " would be needed, or the cap binds); running " + std::to_string(k) + " edge ranges" +
                       (capped ? ""
                               : ", a count chosen by free memory: the bits can differ from call to call (a plan, "
                                 "or PIPELINK_AGG_ONESHOT_CHUNKS=K, keeps them)"));
      return;
    }
    // Destination ranges: each range's 16 / K bytes per edge in 90% of what the device has free
    // beside `kept` (kept here and handed on to the ranges build), and in the cap.
    const std::int64_t k = short_build::destination_ranges(E, double(free_b), temp, cap);
    if (log_level() <= LogLevel::info)  // the tests read it (OneShotOnAFullDeviceRunsEdgeRanges)
      ::pipelink::detail::log_message(LogLevel::info, std::string("aggregate: the ") +
                                                          (edge_ranges_if_short ? "one-shot" : "plan") +
                                                          " build's one sort does not fit (" + why + ", CUB temp " +
                                                          std::to_string(up(temp_bytes)) + " B); sorting " +
                                                          std::to_string(k) + " destination ranges");
    return sort_narrow_chunked<I>(plan, src, dst, N, k, s, flag, trace, fw, std::move(kept));
  }
  if (!arena.get()) {  // chunks == 1: one sort, or the error
    // A one-shot call under PIPELINK_AGG_BUILD_CHUNKS=1 whose pairs did not fit: they too, or
    // the error (aggregate_one_shot then runs edge ranges).
    if (!kept.get()) kept = DeviceBuffer(E * sizeof(Pair), s);
    const ScratchPoolScope scratch(knobs.build_own_pool);
    arena = DeviceBuffer(arena_bytes, s);
  }
  char* base = arena.as<char>();
  K* keys_a = reinterpret_cast<K*>(base);
  K* keys_b = reinterpret_cast<K*>(base + kb);
  Pair* pairs_t = reinterpret_cast<Pair*>(base + 2 * kb);
  void* temp = base + 2 * kb + pb;
  char* const own_temp = static_cast<char*>(temp) + up(scan_bytes);  // own_onesweep's region (own_hist)
  bool scatter_counts = false;  // own_onesweep's counts taken by the scatter (PIPELINK_AGG_BUILD_HIST=scatter)
  // Bad indices make garbage keys, but the sort only reads bits [0, end_bit) and nothing below
  // writes outside the plan's buffers; the error is raised at the synchronization in finish_plan.
  cub::DoubleBuffer<K> keys(keys_a, keys_b);
  Pair* first_out = pairs_t;  // where the init or the first pass writes the pairs
  if (!fused) {
    // The init kernel writes the transient pairs; an odd number of sort passes (three for 17-24
    // bits, as products-like's 22; one for a single-tile sort or at most 8 bits) leaves the result
    // in `kept`, an even one (two passes: 9-16 bits) in the transient buffer, which is then copied.
    init_pairs_kernel<I, K, std::int32_t><<<grid_for(E, 256), 256, 0, s>>>(
        src.data_as<const I>(), dst.data_as<const I>(), keys_a, pairs_t, E, std::uint64_t(N), flag, fw);
    check_launch();
    trace.mark("init");
  } else {
    // The first pass writes where CUB's passes over the rest leave the result in `kept`: CUB's
    // onesweep takes 8 bits a pass (two for products-like's 16 remaining bits), a single-tile
    // sort one: up to 2304 edges here (CCCL 3.x in CUDA 13.0, sm_90: SingleTilePolicy 256
    // threads x 19 items scaled by 4 / 8 for the 8-byte pairs). Where that guess is wrong (another
    // CCCL), the copy below mends it at the cost of one more pass over the pairs.
    const int rest = end_bit - first_bits;
    const int passes = rest == 0 ? 0 : own_hist ? hp : E <= 2304 ? 1 : (rest + 7) / 8;
    if (passes % 2 == 0) first_out = kept.as<Pair>();
    auto* counts = reinterpret_cast<std::uint32_t*>(keys_b);
    std::uint32_t* offsets = counts + cells;
    const std::uint32_t mask = (1u << first_bits) - 1;
    auto* bases = reinterpret_cast<std::uint16_t*>(offsets + cells);
    // The digit counts for own_onesweep: by the scatter at its write-out (PIPELINK_AGG_BUILD_HIST=scatter, the
    // default) or by the counts kernel (=own); summed after whichever counts them.
    HistSpec hs, hs_counts, hs_scatter;
    if (own_hist) {
      hs = HistSpec{reinterpret_cast<std::uint32_t*>(own_temp), first_bits, end_bit, hp};
      scatter_counts = knobs.build_hist == BuildHist::scatter && !fw;  // one-shot builds: the counts kernel
      (scatter_counts ? hs_scatter : hs_counts) = hs;
      PIPELINK_CUDA_CHECK(cudaMemsetAsync(hs.hist, 0, std::size_t(hp) * kHistDigits * sizeof(std::uint32_t), s));
    }
    auto sum_hist = [&] {
      hist_exclusive_kernel<<<hp, kHistDigits, 0, s>>>(hs.hist);
      check_launch();
    };
    if (warp_counts)
      first_digit_warp_counts_kernel<I><<<int(tiles), kFirstThreads, 0, s>>>(
          dst.data_as<const I>(), E, std::uint64_t(N), mask, 0, counts, bases, flag, hs_counts);
    else
      first_digit_counts_kernel<I><<<int(tiles), 256, 0, s>>>(dst.data_as<const I>(), E, mask, counts);
    check_launch();
    if (hs_counts.hp > 0) sum_hist();
    PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, counts, offsets, cells, s));
    // The attribute belongs to the function: one value for every plan (see the bucket kernel's).
    auto scatter = [&](auto kernel) {
      PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kFirstSmem)));
      kernel<<<int(tiles), kFirstThreads, kFirstSmem, s>>>(src.data_as<const I>(), dst.data_as<const I>(), E, std::uint64_t(N),
                                                         mask, 0, offsets, keys_a, first_out, flag, fw, bases, hs_scatter);
    };
    if (warp_counts) {
      if (fw && knobs.oneshot_w_late) scatter(first_digit_scatter_kernel<I, 2, true>);
      else if (fw) scatter(first_digit_scatter_kernel<I, 1, true>);
      else if (hs_scatter.hp > 0) scatter(first_digit_scatter_kernel<I, 0, true, std::uint32_t, true>);
      else scatter(first_digit_scatter_kernel<I, 0, true>);
    } else {
      if (fw) scatter(first_digit_scatter_kernel<I, 1, false>);
      else scatter(first_digit_scatter_kernel<I, 0, false>);
    }
    check_launch();
    if (hs_scatter.hp > 0) sum_hist();
    trace.mark(warp_counts ? "first_pass_warp" : "first_pass");  // the name tells the forms apart in an A/B's trace
  }
  // CUB over the bits the first pass left (all of them without it); the result to `kept`.
  cub::DoubleBuffer<Pair> pairs(first_out, first_out == pairs_t ? kept.as<Pair>() : pairs_t);
  if (own_hist)
    own_onesweep(osh, keys, pairs, E, first_bits, end_bit, hp, own_temp, s);
  else if (first_bits < end_bit)
    PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, pairs, n32, first_bits, end_bit, s));
  if (pairs.Current() != kept.as<Pair>())
    PIPELINK_CUDA_CHECK(cudaMemcpyAsync(kept.get(), pairs.Current(), E * sizeof(Pair), cudaMemcpyDeviceToDevice, s));
  // The name tells the forms apart (a test reads it): CUB's passes on the scatter's counts, on
  // the counts kernel's, or SortPairs.
  trace.mark(own_hist ? (scatter_counts ? "sort_scatter_counts" : "sort_own_counts") : "sort");
  plan.row_ptr = DeviceBuffer((N + 1) * sizeof(std::int32_t), s);
  // Row starts and a suffix minimum (row_starts_kernel; 0.086 ms on products-like, H200), or under
  // PIPELINK_AGG_ROW_PTR=search a binary search a row (0.122 ms); the scan's temp storage in CUB's
  // other keys buffer (free now: E keys' bytes, against a few KB; the search where that room is
  // short).
  auto* rp = reinterpret_cast<std::uint32_t*>(plan.row_ptr.as<std::int32_t>());
  const std::size_t min_bytes = knobs.row_ptr_scan && E > 0 ? row_ptr_suffix_min(rp, N, nullptr, 0, s) : 0;
  // The trace names the form that ran (the scan falls back to the search below ~128 edges).
  if (knobs.row_ptr_scan && E > 0 && min_bytes <= std::size_t(E) * sizeof(K)) {
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(rp, 0xFF, (N + 1) * sizeof(std::uint32_t), s));
    row_starts_kernel<<<grid_for((E + kRowStartKeys - 1) / kRowStartKeys, 256), 256, 0, s>>>(keys.Current(), E, N, rp);
    check_launch();
    (void)row_ptr_suffix_min(rp, N, keys.Alternate(), min_bytes, s);
    trace.mark("row_ptr_scan");
  } else {
    row_ptr_kernel<K, std::int32_t><<<grid_for(N + 1, 256), 256, 0, s>>>(keys.Current(), 0, E, N,
                                                                         plan.row_ptr.as<std::int32_t>());
    check_launch();
    trace.mark("row_ptr");
  }
  plan.pairs = std::move(kept);
}

template <class I>
void sort_wide(CudaPlan& plan, const TensorView& src, const TensorView& dst, std::int64_t N, cudaStream_t s,
               unsigned long long* flag, BuildTrace& trace) {
  const std::int64_t E = plan.num_edges;
  const int id_bits = bits_for(E), src_bits = bits_for(N);
  if (id_bits + src_bits > 64)
    throw Error("aggregate: a plan for N = " + std::to_string(N) + " and E = " + std::to_string(E) +
                " needs more than 64 bits per edge; use the lean path (AggregatePath::lean)");
  DeviceBuffer keys_a(E * 8, s), keys_b(E * 8, s);
  init_wide_keys_kernel<I><<<grid_for(E, 256), 256, 0, s>>>(src.data_as<const I>(), dst.data_as<const I>(),
                                                            keys_a.as<std::uint64_t>(), E, std::uint64_t(N), id_bits, flag);
  check_launch();
  trace.mark("init");
  cub::DoubleBuffer<std::uint64_t> keys(keys_a.as<std::uint64_t>(), keys_b.as<std::uint64_t>());
  std::size_t temp_bytes = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, keys, E, id_bits, id_bits + src_bits, s));
  {
    DeviceBuffer temp(temp_bytes, s);
    PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp.get(), temp_bytes, keys, E, id_bits, id_bits + src_bits, s));
  }
  trace.mark("sort");
  plan.pairs = std::move(keys.Current() == keys_a.as<std::uint64_t>() ? keys_a : keys_b);
  keys_a.reset();
  keys_b.reset();
  plan.row_ptr = DeviceBuffer((N + 1) * sizeof(std::int64_t), s);
  row_ptr_kernel<std::uint64_t, std::int64_t><<<grid_for(N + 1, 256), 256, 0, s>>>(
      plan.pairs.as<const std::uint64_t>(), id_bits, E, N, plan.row_ptr.as<std::int64_t>());
  check_launch();
  wide_keys_to_pairs_kernel<I><<<grid_for(E, 256), 256, 0, s>>>(plan.pairs.as<std::uint64_t>(), src.data_as<const I>(), E,
                                                                std::uint64_t(N), id_bits, src_bits);
  check_launch();
  trace.mark("row_ptr+pairs");
  plan.src_bits = src_bits;
}

// Host-mapped pinned slots for a build's status (plan_tail_kernel writes it, the host reads it
// once the stream is done): taken from a process-wide free list, a 4 KiB page of 64-byte slots
// allocated where none is free (kept for the process's life: a pinned allocation takes far
// longer than a build's tail). A null slot (a device that cannot map host memory, or pinned
// memory refused) tells finish_plan to copy the status as before.
class StatusSlot {
 public:
  StatusSlot() {
    const std::lock_guard lock(mu());
    if (free_list().empty()) {
      if (refused()) return;  // asked once: a refusal is not retried at every build
      // Room for every slot first, so that the destructor's push_back never allocates.
      free_list().reserve(slots() + kPage / kSlot);
      void* page = nullptr;
      if (const cudaError_t e = cudaHostAlloc(&page, kPage, cudaHostAllocMapped | cudaHostAllocPortable);
          e != cudaSuccess) {
        (void)cudaGetLastError();  // not fatal: finish_plan copies instead
        // A refusal made by another thread's global-mode capture passes with it: not latched,
        // or one capture would turn the slots off for the process (a review, session 48).
        const bool capture_error = e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureImplicit ||
                                   e == cudaErrorStreamCaptureInvalidated || e == cudaErrorStreamCaptureWrongThread;
        if (!capture_error) refused() = true;
        return;
      }
      slots() += kPage / kSlot;
      for (std::size_t o = 0; o < kPage; o += kSlot)
        free_list().push_back(reinterpret_cast<unsigned long long*>(static_cast<char*>(page) + o));
      if (log_level() <= LogLevel::debug)  // the tests read it (CudaAggregate.StatusSlotsPastOnePage)
        ::pipelink::detail::log_message(LogLevel::debug, "aggregate: status slots: a page of " +
                                                             std::to_string(kPage / kSlot) + " more, " +
                                                             std::to_string(slots()) + " in all");
    }
    host_ = free_list().back();
    void* dev = nullptr;
    if (cudaHostGetDevicePointer(&dev, host_, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      host_ = nullptr;  // still on the list
      return;
    }
    free_list().pop_back();
    device_ = static_cast<unsigned long long*>(dev);
  }
  ~StatusSlot() {
    if (!host_) return;
    // A kernel queued to write the slot (a throw between its launch and the read) is waited for
    // first: the slot must not pass to another build while it can still be written.
    if (armed_) (void)cudaStreamSynchronize(writer_);
    const std::lock_guard lock(mu());
    free_list().push_back(host_);  // no throw: reserved for every slot of every page
  }
  StatusSlot(const StatusSlot&) = delete;
  StatusSlot& operator=(const StatusSlot&) = delete;
  bool ok() const { return device_ != nullptr; }
  // The slot for a kernel queued on `s` next; read() once that kernel is done (s synchronized).
  unsigned long long* device_for(cudaStream_t s) {
    writer_ = s;  // the default stream is null: armed_ says whether it is set
    armed_ = true;
    return device_;
  }
  unsigned long long read(int i) {
    armed_ = false;  // the caller waited for the writer (see device_for)
    return static_cast<volatile const unsigned long long*>(host_)[i];
  }

 private:
  static constexpr std::size_t kPage = 4096, kSlot = 64;
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<unsigned long long*>& free_list() {
    static std::vector<unsigned long long*> v;
    return v;
  }
  static std::size_t& slots() {  // allocated so far, free or taken
    static std::size_t n = 0;
    return n;
  }
  static bool& refused() {  // cudaHostAlloc refused a page once
    static bool r = false;
    return r;
  }
  unsigned long long* host_ = nullptr;
  unsigned long long* device_ = nullptr;
  cudaStream_t writer_ = nullptr;
  bool armed_ = false;  // a queued kernel on writer_ may still write the slot
};

// ---- launch order of the staged walk's items (v40) ----------------------------------------------
// The staged walk launches a warp an item: segments of split rows first, then groups in row
// order. Where rows are long (power-law: rows of 64-1024 edges hold 42% of its edges), a group
// that takes a long row past its chunk's end runs up to ~1.6x a chunk, and such groups sit all
// along the row order, so the launch's last items are often long ones and the SMs idle at its
// end (ncu, H200, power-law's planned walk: 40% achieved occupancy against products-like's 48%).
// bench/micro/balance_model.py, power-law's degrees (k = 1, a row costing 0.5 edge): makespan
// 1.065x the ideal in the plain order, 1.006x heaviest first (LPT), 1.014x with items put in 8
// classes of C / 4 by weight, heaviest class first, row order within a class (products-like's
// plain order: 1.015x). Measured on the H200 (v41, d302abd, `bench --ab`, same rounds, power-law,
// random order): planned 3.92 against 4.11 ms (0.955x), one-shot 6.34 against 6.48 (0.978x), plan
// build 1.007x; the plain order in a second call 1.051x planned, 1.022x one-shot, plan build 0.979x
// (so the order's build costs ~0.7-2.1%); products-like 0.991-1.000x (no order built). Each under
// the bench's 1.5x rule ("no measured difference at this precision"), repeated in two calls. The default since v41
// (PIPELINK_AGG_ITEM_ORDER=plain turns it off). Plans without split or long rows (products-like)
// never get an order: it is built only where finish_plan builds the segment tables. The order
// changes no bit: every item writes its own rows or its own partial.
constexpr int kOrderClasses = 8, kOrderThreads = 256;

// Item `item`'s weight class: its edges (a group's split rows left out: their segments are other
// items; a split row is a group's last row while C <= S, the default) plus its rows as the work
// split counts them, in quarters of a chunk, capped at kOrderClasses - 1. Only the order
// depends on it, so an approximate weight costs time at most.
__device__ int item_class(const std::int32_t* __restrict__ row_ptr, const std::int32_t* __restrict__ first_row,
                          const std::int32_t* __restrict__ seg_first, const std::int32_t* __restrict__ seg_row,
                          std::int64_t num_split, std::int64_t seg_len, RowWeight rw, std::int64_t C,
                          std::int64_t item) {
  std::int64_t weight = 0;
  if (item < num_split) {
    const std::int32_t row = seg_row[item];
    const std::int64_t begin = std::int64_t(row_ptr[row]) + (item - seg_first[row]) * seg_len;
    weight = min(seg_len, std::int64_t(row_ptr[row + 1]) - begin);
  } else {
    const std::int64_t g = item - num_split;
    const std::int32_t r0 = first_row[g], r1 = first_row[g + 1];
    if (r0 >= r1) return 0;
    const std::int64_t last = std::int64_t(row_ptr[r1]) - row_ptr[r1 - 1];
    weight = std::int64_t(row_ptr[r1]) - row_ptr[r0] - (last > seg_len ? last : 0) + rw.edges_before(r1) -
             rw.edges_before(r0);
  }
  return int(min(std::int64_t(kOrderClasses - 1), weight * 4 / C));
}

// Each item's class, and each block's count of every class, laid out heaviest class first
// (counts[(kOrderClasses - 1 - c) * gridDim.x + block]) so that one exclusive sum over the array
// gives every (class, block) its first place in the order.
__global__ void __launch_bounds__(kOrderThreads)
    item_class_counts_kernel(const std::int32_t* __restrict__ row_ptr, const std::int32_t* __restrict__ first_row,
                             const std::int32_t* __restrict__ seg_first, const std::int32_t* __restrict__ seg_row,
                             std::int64_t num_split, std::int64_t seg_len, RowWeight rw, std::int64_t C,
                             std::int64_t items, std::uint8_t* __restrict__ cls, std::uint32_t* __restrict__ counts) {
  __shared__ unsigned n[kOrderClasses];
  if (threadIdx.x < kOrderClasses) n[threadIdx.x] = 0;
  __syncthreads();
  const std::int64_t i = blockIdx.x * std::int64_t(kOrderThreads) + threadIdx.x;
  if (i < items) {
    const int c = item_class(row_ptr, first_row, seg_first, seg_row, num_split, seg_len, rw, C, i);
    cls[i] = std::uint8_t(c);
    atomicAdd(&n[c], 1u);
  }
  __syncthreads();
  if (threadIdx.x < kOrderClasses) counts[(kOrderClasses - 1 - threadIdx.x) * gridDim.x + blockIdx.x] = n[threadIdx.x];
}

// order[place] = item: the block's items of class c at the (class, block) start from the scan,
// in item order within the block (ranks by ballots, warps before), so the order is the same
// every build. The same grid as item_class_counts_kernel.
__global__ void __launch_bounds__(kOrderThreads)
    place_items_kernel(const std::uint8_t* __restrict__ cls, std::int64_t items,
                       const std::uint32_t* __restrict__ starts, std::int32_t* __restrict__ order) {
  __shared__ unsigned in_warp[kOrderThreads / 32][kOrderClasses];
  const std::int64_t i = blockIdx.x * std::int64_t(kOrderThreads) + threadIdx.x;
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int c = i < items ? int(cls[i]) : -1;
  unsigned rank = 0;
  for (int k = 0; k < kOrderClasses; ++k) {
    const unsigned m = __ballot_sync(0xffffffffu, c == k);
    if (c == k) rank = __popc(m & ((1u << lane) - 1u));
    if (lane == 0) in_warp[warp][k] = unsigned(__popc(m));
  }
  __syncthreads();
  if (c >= 0) {
    unsigned before = 0;
    for (int w = 0; w < warp; ++w) before += in_warp[w][c];
    order[starts[(kOrderClasses - 1 - c) * gridDim.x + blockIdx.x] + before + rank] = std::int32_t(i);
  }
}

// The staged walk's launch order for a narrow plan with its segment tables built: classes, one
// exclusive sum of the (class, block) counts, places. Three launches and 4 bytes an item kept
// (power-law: ~90K items, 0.36 MB).
void order_items(CudaPlan& plan, cudaStream_t s) {
  const std::int64_t items = plan.num_segments + plan.groups;
  const int blocks = int((items + kOrderThreads - 1) / kOrderThreads);
  const std::int64_t cells = std::int64_t(kOrderClasses) * blocks;
  DeviceBuffer cls(std::size_t(items), s), counts(std::size_t(cells) * 4, s), starts(std::size_t(cells) * 4, s);
  plan.order = DeviceBuffer(std::size_t(items) * 4, s);
  item_class_counts_kernel<<<blocks, kOrderThreads, 0, s>>>(
      plan.row_ptr.as<const std::int32_t>(), plan.first_row.as<const std::int32_t>(),
      plan.seg_first.as<const std::int32_t>(), plan.seg_row.as<const std::int32_t>(), plan.num_segments, plan.seg_len,
      plan.row_weight, plan.chunk, items, cls.as<std::uint8_t>(), counts.as<std::uint32_t>());
  check_launch();
  std::size_t scan_bytes = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, counts.as<std::uint32_t>(),
                                                    starts.as<std::uint32_t>(), cells, s));
  DeviceBuffer scan_temp(scan_bytes, s);
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan_temp.get(), scan_bytes, counts.as<std::uint32_t>(),
                                                    starts.as<std::uint32_t>(), cells, s));
  place_items_kernel<<<blocks, kOrderThreads, 0, s>>>(cls.as<const std::uint8_t>(), items,
                                                      starts.as<const std::uint32_t>(), plan.order.as<std::int32_t>());
  check_launch();
}

// The rest of the plan (work split, long rows, segments), then the index check's verdict.
// (Session 41's early walk, the one-shot's walk queued before the host read the verdict, so that
// it need not wait for the round trip, measured 0.998-1.001x of this on three workloads in v46
// and was removed in v47.)
template <class P>
void finish_plan(CudaPlan& plan, const TensorView& src, const TensorView& dst, std::int64_t N, cudaStream_t s,
                 unsigned long long* status, bool split_tail, BuildTrace& trace) {
  const std::int64_t E = plan.num_edges;
  plan.groups = plan.row_weight.groups(E, N, plan.chunk);
  plan.first_row = DeviceBuffer((plan.groups + 1) * sizeof(P), s);
  // Segments of the rows longer than seg_len edges; the list of long rows. Their totals first,
  // read with the index check's verdict (status: first bad edge, then the two totals); the
  // per-row tables only where a total is not zero. Before: the per-row counts and two CUB scans
  // in every build, and three 8-byte copies to pageable memory, each its own round trip (trace,
  // products-like, H200: segment_scans 0.035 + verdict_wait 0.035 ms).
  plan.long_row = std::min(long_row_threshold(), plan.seg_len);
  const int split_blocks = grid_for(plan.groups + 1, 256), total_blocks = grid_for((N + 7) / 8, 256);
  unsigned long long st[3] = {ULLONG_MAX, 0, 0};
  std::optional<StatusSlot> slot;
  if (!split_tail) slot.emplace();
  if (slot && slot->ok()) {  // PIPELINK_AGG_PLAN_TAIL=fused (the default): one kernel
    plan_tail_kernel<P><<<split_blocks + total_blocks, 256, 0, s>>>(
        plan.row_ptr.as<const P>(), N, plan.groups, plan.chunk, plan.row_weight, plan.first_row.as<P>(), split_blocks,
        plan.long_row, plan.seg_len, status, slot->device_for(s));
    check_launch();
    trace.mark("plan_tail");
    PIPELINK_CUDA_CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 3; ++i) st[i] = slot->read(i);
  } else {
    group_rows_kernel<P><<<split_blocks, 256, 0, s>>>(plan.row_ptr.as<const P>(), N, plan.groups, plan.chunk,
                                                      plan.row_weight, plan.first_row.as<P>());
    check_launch();
    trace.mark("work_split");
    segment_totals_kernel<P>
        <<<total_blocks, 256, 0, s>>>(plan.row_ptr.as<const P>(), N, plan.long_row, plan.seg_len, status + 1);
    check_launch();
    trace.mark("segment_totals");
    PIPELINK_CUDA_CHECK(cudaMemcpyAsync(st, status, sizeof st, cudaMemcpyDeviceToHost, s));
    PIPELINK_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  trace.mark("verdict_wait");
  report_bad_edge("aggregate", &src, &dst, N, st[0]);
  plan.num_segments = std::int64_t(st[1]);
  plan.num_long = std::int64_t(st[2]);
  if (plan.num_segments + plan.num_long > 0) {
    DeviceBuffer segs((N + 1) * sizeof(P), s), lng((N + 1) * sizeof(P), s), long_first((N + 1) * sizeof(P), s);
    count_segments_kernel<P><<<grid_for(N + 1, 256), 256, 0, s>>>(plan.row_ptr.as<const P>(), N, plan.long_row,
                                                                  plan.seg_len, segs.as<P>(), lng.as<P>());
    check_launch();
    plan.seg_first = DeviceBuffer((N + 1) * sizeof(P), s);
    std::size_t scan_bytes = 0;
    PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, segs.as<P>(), plan.seg_first.as<P>(), N + 1, s));
    DeviceBuffer scan_temp(scan_bytes, s);
    PIPELINK_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scan_temp.get(), scan_bytes, segs.as<P>(), plan.seg_first.as<P>(), N + 1, s));
    PIPELINK_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scan_temp.get(), scan_bytes, lng.as<P>(), long_first.as<P>(), N + 1, s));
    plan.seg_row = DeviceBuffer(plan.num_segments * sizeof(P), s);
    plan.long_rows = DeviceBuffer(plan.num_long * sizeof(P), s);
    fill_segment_rows_kernel<P><<<grid_for(N, 256), 256, 0, s>>>(plan.seg_first.as<const P>(), long_first.as<const P>(), N,
                                                                 plan.seg_row.as<P>(), plan.long_rows.as<P>());
    check_launch();
    trace.mark("segment_scans");
    if constexpr (std::is_same_v<P, std::int32_t>) {
      if (plan.item_order) {
        order_items(plan, s);
        trace.mark("item_order");
      }
    }
  }
  // The run's kernels read seg_first for split rows' segments only (and the fill above, ordered
  // before this stream-ordered free): a plan without split rows holds none of its N + 1 entries,
  // 9.8 MB or 0.16 B/edge on products-like (plan 8.47 -> 8.32 B/edge with its w tables, v26).
  if (plan.num_segments == 0) plan.seg_first.reset();
}

// fold_w (one-shot calls only): float32 weights put into the narrow plan's pairs in place of the
// edge ids (kWInPairs). Such a plan serves that one call's w and no other, so it is never handed out.
// edge_ranges_if_short: see sort_narrow; nullptr is then returned where the one sort does not fit.
std::shared_ptr<CudaPlan> build_plan_for(const TensorView& src, const TensorView& dst, std::int64_t N, void* stream,
                                         const TensorView* fold_w, std::int64_t* edge_ranges_if_short = nullptr) {
  const cudaStream_t s = as_stream(stream);
  const cuda::DeviceGuard device_guard(src.device().index);
  auto plan = std::make_shared<CudaPlan>();
  plan->device = src.device();
  plan->num_nodes = N;
  plan->num_edges = src.numel();
  const PlanKnobs knobs = plan_knobs();  // first: a bad knob fails before any work
  plan->chunk = knobs.chunk > 0 ? knobs.chunk : chunk_for(plan->num_edges);
  plan->row_weight = RowWeight{knobs.rows_per_edge, knobs.edges_per_row};
  plan->item_order = knobs.item_order;
  // The walks launch a warp a group (2^31 - 1 blocks at most), and first_row takes 4-8 bytes a
  // group: small chunks and heavy rows together (PIPELINK_AGG_CHUNK=32, _EDGES_PER_ROW=64 at
  // N ~ 2^31) would pass that, so they fail here, before any work.
  if (const std::int64_t groups = plan->row_weight.groups(plan->num_edges, N, plan->chunk);
      groups > (std::int64_t(1) << 30))
    throw Error("aggregate: the work split would have " + std::to_string(groups) +
                " groups (E + N * m / k edges over a chunk of " + std::to_string(plan->chunk) +
                "), more than 2^30: raise PIPELINK_AGG_CHUNK or lower PIPELINK_AGG_EDGES_PER_ROW");
  plan->seg_len = knobs.segment;
  plan->build_own_pool = knobs.build_own_pool;
  // PIPELINK_AGG_FORCE_WIDE=1: the 64-bit plan at any size (the tests use it to cover the path
  // that real inputs only take past 2^31 edges).
  const char* force = std::getenv("PIPELINK_AGG_FORCE_WIDE");
  // The margin keeps the staged kernel's int32 edge offsets (up to a few stages past a group's
  // end) from overflowing.
  plan->wide = N >= INT32_MAX || plan->num_edges >= INT32_MAX - 4096 || (force && *force == '1');
  BuildTrace trace(s);
  trace.mark("start");
  if (plan->num_edges > 0) {
    const bool i32 = src.dtype() == DType::i32;
    // The build's status, read back at once by finish_plan: the first bad edge (the sort's
    // kernels' flag, ULLONG_MAX where none), then the totals of segments and long rows, then
    // plan_tail_kernel's count of finished blocks.
    DeviceBuffer status(4 * sizeof(unsigned long long), s);
    auto* f = status.as<unsigned long long>();
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(f, 0xFF, sizeof(unsigned long long), s));
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(f + 1, 0, 3 * sizeof(unsigned long long), s));
    if (plan->wide) {
      if (i32) sort_wide<std::int32_t>(*plan, src, dst, N, s, f, trace);
      else sort_wide<std::int64_t>(*plan, src, dst, N, s, f, trace);
      finish_plan<std::int64_t>(*plan, src, dst, N, s, f, knobs.plan_tail_split, trace);
    } else {
      const float* fw = fold_w && fold_w->dtype() == DType::f32 ? fold_w->data_as<const float>() : nullptr;
      plan->w_in_pairs = fw != nullptr;
      if (i32) sort_narrow<std::int32_t>(*plan, src, dst, N, knobs, s, f, trace, fw, edge_ranges_if_short);
      else sort_narrow<std::int64_t>(*plan, src, dst, N, knobs, s, f, trace, fw, edge_ranges_if_short);
      if (edge_ranges_if_short && *edge_ranges_if_short > 0) return nullptr;
      finish_plan<std::int32_t>(*plan, src, dst, N, s, f, knobs.plan_tail_split, trace);
    }
  } else {
    plan->row_ptr = DeviceBuffer((N + 1) * (plan->wide ? 8 : 4), s);
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(plan->row_ptr.get(), 0, plan->row_ptr.bytes(), s));
  }
  plan->bytes = plan->row_ptr.bytes() + plan->pairs.bytes() + plan->first_row.bytes() + plan->seg_first.bytes() +
                plan->seg_row.bytes() + plan->long_rows.bytes() + plan->order.bytes();
  plan->stream = s;
  trace.mark("tail");
  trace.report(N, plan->num_edges);
  return plan;
}

std::shared_ptr<AggregatePlan::Impl> build_plan(const TensorView& src, const TensorView& dst, std::int64_t N,
                                               void* stream) {
  {
    const cuda::DeviceGuard device_guard(src.device().index);  // the query about src's device's stream
    refuse_capture(as_stream(stream), "aggregate: an AggregatePlan build",
                   "build the plan before the capture and capture its runs");
  }
  return build_plan_for(src, dst, N, stream, nullptr);
}

// ---- planned run: the walk (src/cuda/aggregate_walk.cu) --------------------------------------

// The walk's view of a plan: its fields, for agg::walk_rows in the walk's translation unit.
WalkPlan walk_plan(const CudaPlan& plan) {
  WalkPlan v;
  v.num_nodes = plan.num_nodes;
  v.num_edges = plan.num_edges;
  v.groups = plan.groups;
  v.long_row = plan.long_row;
  v.seg_len = plan.seg_len;
  v.num_segments = plan.num_segments;
  v.num_long = plan.num_long;
  v.src_bits = plan.src_bits;
  v.wide = plan.wide;
  v.compact = plan.compact;
  v.compact24 = plan.compact24;
  v.lidx_in_column = plan.lidx_in_column;
  v.w_in_pairs = plan.w_in_pairs;
  v.row_ptr = plan.row_ptr.as<const void>();
  v.first_row = plan.first_row.as<const void>();
  v.entries = plan.compact ? plan.src_column() : plan.pairs.as<const void>();
  v.seg_first = plan.seg_first.as<const void>();
  v.seg_row = plan.seg_row.as<const void>();
  v.long_rows = plan.long_rows.as<const void>();
  v.order = plan.order.as<const void>();
  return v;
}

template <class T, class P>
void launch_rows(const CudaPlan& plan, const TensorView& x, const TensorView* w, bool wplan, const TensorView& out,
                 const AggregateOptions& opts, cudaStream_t s) {
  walk_rows<T, P>(walk_plan(plan), x, w, wplan, out, opts, s);
}

template <class Fn>
void CudaPlan::on_stream(cudaStream_t s, Fn&& f) {
  const cuda::DeviceGuard device_guard(device.index);
  const bool other_stream = s != stream;
  if (other_stream) wait_for_build(s);
  // Under a capture of s the plan's stream must not wait for the captured work (that would pull
  // it into the capture: "unjoined" at its end). The graph reads the plan at each replay, so the
  // plan must outlive the graph, as any buffer a graph reads.
  const bool hold = other_stream && !stream_capturing(s);
  struct AfterRun {  // also when a launch throws: the plan's frees must wait for what was queued
    CudaPlan& p;
    cudaStream_t s;
    bool on;
    ~AfterRun() {
      if (on) p.hold_frees_for(s);
    }
  } after{*this, s, hold};
  f();
}

template <class T, class P>
__global__ void permute_edges_kernel(const PlanPair<P>* __restrict__ pairs, int src_bits, const T* __restrict__ in,
                                     T* __restrict__ out, std::int64_t E) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < E; k += std::int64_t(gridDim.x) * blockDim.x)
    out[k] = in[pair_id(pairs[k], src_bits)];
}

// ---- w permutation: weights in edge order brought into plan order per call (v18) ------------
//
// The planned run given w in edge order reads w[edge id] in plan order: one random 4-byte read
// per edge, which DRAM serves as 64 bytes (ncu, v11: 3.9 GB on products-like). Given w already in
// plan order the same run took 4.06 ms against 5.24-5.29 (H200, v17). So a call first brings w
// into plan order in two passes whose every global access is coalesced, into E x 4 bytes of
// scratch, and then runs as with w in plan order (the same weights in the same order: the same
// bits):
//   pass 1, a block per tile of T consecutive edges: the tile's w into shared memory at tl[e]
//     (the tile's edges grouped by the bucket of their plan position), then each warp
//     copies whole runs (one bucket's edges of this tile) to that bucket's region of the scratch;
//   pass 2, a block per bucket of T consecutive plan positions: the region into shared memory,
//     then written back in place in plan order through lidx[p].
// Bytes: ~20 an edge (1.26 GB on products-like) against the gather's ~72.
// Measured first as bench/micro/w_permute_micro.cu (H200, products-like, session 15): both passes
// 0.446 ms at T = 49152 (0.502 at 32768, 0.551 at 24576) against 1.595 ms for the gather as a
// kernel of its own; a thread per slot in pass 1 instead of a warp per run: 1.017 ms.
// Tables: tl and lidx, 2 + 2 bytes an edge (2 + 1 with packed lidx, below), and the run tables, 6 bytes per (tile, bucket) pair,
// which grow as E^2 / T^2 (0.15 B/edge on products-like); built at the plan's first run that wants
// them (lazily: one-shot calls and weights in plan order never pay), by a block per bucket that
// counts its positions' tiles in shared memory (wperm_bucket_kernel), two scans and one pass over
// the edges; 4 transient bytes an edge.
constexpr int kWPermThreads = 1024;

using u16 = std::uint16_t;
using u32 = std::uint32_t;

__global__ void compact_srcs_kernel(const EdgePair<std::int32_t>* __restrict__ pairs, std::int32_t* __restrict__ srcs,
                                    std::int64_t E) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < E; k += std::int64_t(gridDim.x) * blockDim.x)
    srcs[k] = pairs[k].src;
}
// The 24-bit column (compact24_src reads it; `lo` is the buffer + compact24_low(E)): src < 2^24,
// so N <= 2^24.
__global__ void compact_srcs24_kernel(const EdgePair<std::int32_t>* __restrict__ pairs, std::uint16_t* __restrict__ lo,
                                      std::int64_t E) {
  unsigned char* const hi_end = reinterpret_cast<unsigned char*>(lo) - 1;
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < E; k += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t v = std::uint32_t(pairs[k].src);
    lo[k] = std::uint16_t(v & 0xffffu);
    hi_end[-k] = static_cast<unsigned char>(v >> 16);
  }
}

// Packed lidx (issue 4's memory: a warm planned call's extra 12.32 B/edge on products-like, the
// plan 8.32 of it): lidx (u16, < T <= 49152) is read only by pass 2, in plan order, as is the
// compact plan's src column, whose top bits are free where N <= 2^24. So the column keeps lidx's
// low byte above the src (kLidxColumnShift) and the tables keep only its high byte: 1 byte an
// edge less (plan 7.32, a warm call 11.32, both measured in v29). Costs: pass 2 reads 4 + 1 bytes
// an edge for lidx instead of 2 (micro, H200, products-like sizes: 0.200 against 0.176 ms, v29);
// every walk masks the src it loads (kWCompactLidx). Measured, the planned call cost 0.11 ms more
// (4.36 against 4.25 ms, `bench --ab`, same rounds, v29), four times the micro's pass-2
// difference; v30-v31 found two thirds of it in the staged walk, with fewer eligible warps (ncu:
// 3.70 against 4.57) on equal DRAM bytes; the SASS reading: its mask sat right after the
// prefetch's load, so each stage waited on it. The mask is now applied a stage later (entry() in
// the staged walk): the walk 3.817 against 3.814 ms for the plain column (v32), so only pass 2's
// +0.04 remains, and the packed column is the default (PIPELINK_AGG_W_PERMUTE_COMPACT=1 keeps the
// plain one; w_permute_compact above). Written after the column (compact_srcs_kernel) and the pairs'
// free, so the plan's first-run peak does not grow: col[k] |= low byte << 24, hi[k] = high byte.
__global__ void pack_lidx_kernel(std::uint32_t* __restrict__ col, const std::uint16_t* __restrict__ lidx,
                                 std::uint8_t* __restrict__ hi, std::int64_t E) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < E; k += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint32_t l = lidx[k];
    col[k] |= (l & 0xFFu) << kLidxColumnShift;
    hi[k] = std::uint8_t(l >> 8);
  }
}
// Pass 2's lidx from a packed column word and its high byte.
__device__ __forceinline__ std::uint32_t packed_lidx(std::uint32_t c, std::uint32_t h) {
  return (c >> kLidxColumnShift) | h << 8;
}

// Bucket b (a block): its plan positions grouped by the tile of their edge, each tile's group a
// run. Any order inside a run serves, as long as tl and lidx agree on it: the ranks come from
// shared-memory atomics (so the tables may differ from build to build; the permuted w, and so the
// run's bits, never do). Writes lidx (each position's place in the bucket's region), q[e] (edge
// e's scratch place) and the run sizes in both layouts (bucket-major: the scratch order;
// tile-major: each tile's shared-memory order). Shared memory: tiles u32 counters and T u16 ranks.
// (Replaced session 15's stable CUB sort of (bucket, tile) keys, whose 20 transient bytes an edge
// and first launches made a plan's first run with w in edge order cost ~23 ms against ~5.)
__global__ void __launch_bounds__(kWPermThreads) wperm_bucket_kernel(const EdgePair<std::int32_t>* __restrict__ pairs,
                                                                     u32* __restrict__ q, u16* __restrict__ lidx,
                                                                     u32* __restrict__ cnt_bt, u32* __restrict__ cnt_tb,
                                                                     std::int64_t E, int T, std::int64_t tiles,
                                                                     std::int64_t nb) {
  extern __shared__ __align__(16) unsigned char wperm_smem[];
  u32* const c = reinterpret_cast<u32*>(wperm_smem);  // [tiles]: counts, then each run's start
  u16* const rk = reinterpret_cast<u16*>(c + tiles);  // [T]: each position's rank in its run
  using Scan = cub::BlockScan<u32, kWPermThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const std::int64_t b = blockIdx.x, p0 = b * T;
  const int len = int(std::min<std::int64_t>(T, E - p0));
  for (std::int64_t i = threadIdx.x; i < tiles; i += kWPermThreads) c[i] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < len; i += kWPermThreads) rk[i] = u16(atomicAdd(c + pairs[p0 + i].id / T, 1u));
  __syncthreads();
  // The counts out, then an exclusive scan of them in place (each thread a contiguous chunk).
  const std::int64_t per = (tiles + kWPermThreads - 1) / kWPermThreads, i0 = threadIdx.x * per,
                     i1 = std::min(tiles, i0 + per);
  u32 sum = 0;
  for (std::int64_t i = i0; i < i1; ++i) {
    const u32 n = c[i];
    cnt_bt[b * tiles + i] = n;
    cnt_tb[i * nb + b] = n;
    sum += n;
  }
  Scan(scan_tmp).ExclusiveSum(sum, sum);
  for (std::int64_t i = i0; i < i1; ++i) {
    const u32 n = c[i];
    c[i] = sum;
    sum += n;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < len; i += kWPermThreads) {
    const std::int32_t e = pairs[p0 + i].id;
    const u32 k = c[e / T] + rk[i];
    lidx[p0 + i] = u16(k);
    q[e] = u32(p0 + k);
  }
}
// tl[e]: edge e's place in its tile's shared memory, from its scratch place k = q[e] (bucket b =
// k / T): its run's start in the tile (s_tb, tile-major exclusive sum of the counts) plus its rank
// in the run (k less the run's first scratch place, d_bt: the bucket-major exclusive sum).
__global__ void wperm_places_kernel(const u32* __restrict__ q, const u32* __restrict__ d_bt,
                                    const u32* __restrict__ s_tb, u16* __restrict__ tl, std::int64_t E, int T,
                                    std::int64_t tiles, std::int64_t nb) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E; e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t k = q[e], b = k / T, t = e / T;
    tl[e] = u16(std::int64_t(s_tb[t * nb + b]) - t * T + (k - std::int64_t(d_bt[b * tiles + t])));
  }
}
__global__ void wperm_tables_kernel(const u32* __restrict__ s_tb, const u32* __restrict__ d_bt, u16* __restrict__ rs,
                                    u32* __restrict__ ds, std::int64_t E, int T, std::int64_t tiles, std::int64_t nb) {
  const std::int64_t n = tiles * (nb + 1);
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / (nb + 1), b = i % (nb + 1);
    if (b == nb) {
      rs[i] = u16(std::min<std::int64_t>(T, E - t * T));
    } else {
      rs[i] = u16(std::int64_t(s_tb[t * nb + b]) - t * T);
      ds[t * nb + b] = d_bt[b * tiles + t];
    }
  }
}

// Pass 1: a block per tile; its run tables staged in shared memory beside its w (read run by run
// from global memory, each warp would wait on a dependent load per run). A warp copies whole runs
// (~39 floats on products-like); a thread per slot (binary search over the run starts) took
// 0.84 ms against 0.27 in the micro. Both passes move 32-bit words: float w in one launch
// (STRIDE 1), float64 w as its two halves (STRIDE 2, half 0 then 1; compact plans only, which
// cannot gather).
// vec (float w, T a multiple of 4; w 16-byte aligned for pass 1, the scratch for pass 2): four
// edges a thread through 16-byte loads of w and 8-byte loads of tl (lidx in pass 2; packed: 16
// bytes of the column and 4 of the high bytes), four
// iterations unrolled. Each block is alone on its SM (T = 49152: 192 KB of shared memory), and one
// 4-byte load a thread before the barrier kept ~6 KB in flight per SM where ~26 KB covers DRAM's
// latency (4.3 TB/s x ~0.8 us / 132 SMs). Measured (H200, v20 micro, T = 49152): both passes 0.452
// -> 0.419 ms; the planned run 4.33 ms against the plan-order run's 3.95 in one process.
template <int STRIDE>
__global__ void __launch_bounds__(kWPermThreads) wperm_pass1_kernel(const u32* __restrict__ w, const u16* __restrict__ tl,
                                                                    const u16* __restrict__ rs, const u32* __restrict__ ds,
                                                                    u32* __restrict__ scratch, std::int64_t E, int T,
                                                                    std::int64_t nb, int half, bool vec) {
  extern __shared__ __align__(16) unsigned char wperm_smem[];
  u32* const sw = reinterpret_cast<u32*>(wperm_smem);
  u32* const dsm = sw + T;
  u16* const rsm = reinterpret_cast<u16*>(dsm + nb);
  const std::int64_t t = blockIdx.x, t0 = t * T;
  const int len = int(std::min<std::int64_t>(T, E - t0));
  int done = 0;
  if constexpr (STRIDE == 1) {
    if (vec) {
      done = len & ~3;
#pragma unroll 4
      for (int i = threadIdx.x * 4; i < done; i += kWPermThreads * 4) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(w + t0 + i));
        const uint2 k = __ldg(reinterpret_cast<const uint2*>(tl + t0 + i));
        sw[k.x & 0xFFFFu] = v.x;
        sw[k.x >> 16] = v.y;
        sw[k.y & 0xFFFFu] = v.z;
        sw[k.y >> 16] = v.w;
      }
    }
  }
  for (int i = done + threadIdx.x; i < len; i += kWPermThreads) sw[tl[t0 + i]] = __ldg(w + (t0 + i) * STRIDE + half);
  for (std::int64_t i = threadIdx.x; i < nb; i += kWPermThreads) dsm[i] = ds[t * nb + i];
  for (std::int64_t i = threadIdx.x; i <= nb; i += kWPermThreads) rsm[i] = rs[t * (nb + 1) + i];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::int64_t b = warp; b < nb; b += kWPermThreads / 32) {
    const int a = rsm[b], n = rsm[b + 1] - a;
    u32* const o = scratch + std::int64_t(dsm[b]) * STRIDE + half;
    for (int j = lane; j < n; j += 32) o[j * STRIDE] = sw[a + j];
  }
}
// Pass 2: a block per bucket, in place (the block reads its whole region before it writes).
// PACKED: lidx from the plan's src column (its low byte) and `hi` (its high byte), see "packed
// lidx" above; else from `lidx`.
template <int STRIDE, bool PACKED>
__global__ void __launch_bounds__(kWPermThreads) wperm_pass2_kernel(u32* scratch, const u16* __restrict__ lidx,
                                                                    const u32* __restrict__ col,
                                                                    const std::uint8_t* __restrict__ hi, std::int64_t E,
                                                                    int T, int half, bool vec) {
  extern __shared__ __align__(16) unsigned char wperm_smem[];
  u32* const sw = reinterpret_cast<u32*>(wperm_smem);
  const std::int64_t p0 = std::int64_t(blockIdx.x) * T;
  const int len = int(std::min<std::int64_t>(T, E - p0));
  int done = 0;
  if constexpr (STRIDE == 1) {
    if (vec) done = len & ~3;
#pragma unroll 4
    for (int i = threadIdx.x * 4; i < done; i += kWPermThreads * 4)
      *reinterpret_cast<uint4*>(sw + i) = *reinterpret_cast<const uint4*>(scratch + p0 + i);
  }
  for (int i = done + threadIdx.x; i < len; i += kWPermThreads) sw[i] = scratch[(p0 + i) * STRIDE + half];
  __syncthreads();
  if constexpr (STRIDE == 1) {
#pragma unroll 4
    for (int i = threadIdx.x * 4; i < done; i += kWPermThreads * 4) {
      if constexpr (PACKED) {
        const uint4 c = __ldg(reinterpret_cast<const uint4*>(col + p0 + i));
        const u32 h = __ldg(reinterpret_cast<const u32*>(hi + p0 + i));
        *reinterpret_cast<uint4*>(scratch + p0 + i) =
            make_uint4(sw[packed_lidx(c.x, h & 0xFFu)], sw[packed_lidx(c.y, (h >> 8) & 0xFFu)],
                       sw[packed_lidx(c.z, (h >> 16) & 0xFFu)], sw[packed_lidx(c.w, h >> 24)]);
      } else {
        const uint2 k = __ldg(reinterpret_cast<const uint2*>(lidx + p0 + i));
        *reinterpret_cast<uint4*>(scratch + p0 + i) = make_uint4(sw[k.x & 0xFFFFu], sw[k.x >> 16], sw[k.y & 0xFFFFu], sw[k.y >> 16]);
      }
    }
  }
  for (int i = done + threadIdx.x; i < len; i += kWPermThreads) {
    const u32 k = PACKED ? packed_lidx(col[p0 + i], hi[p0 + i]) : lidx[p0 + i];
    scratch[(p0 + i) * STRIDE + half] = sw[k];
  }
}

// The tables for tile size T (shrunk to fit the device's shared memory), built on `s` (the plan's
// stream), or nullptr where they would not fit: the (tile, bucket) count, or the device's memory
// for the build's 4 transient bytes an edge beside the 4 kept (then the plan keeps the gather).
std::unique_ptr<WPermTables> build_w_permutation(const CudaPlan& plan, int T, cudaStream_t s) {
  const std::int64_t E = plan.num_edges;
  if (E == 0) return nullptr;
  int optin = 0;
  PIPELINK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, plan.device.index));
  // Pass 1 holds T floats and 6 bytes per bucket. Where that does not fit (sm_80 gives a block
  // 163 KB, sm_86 99 KB, against sm_90's 227 KB), T shrinks in steps of 1024 (not measured there).
  auto smem1_for = [E](std::int64_t tt) {
    const std::int64_t b = (E + tt - 1) / tt;
    return tt * 4 + b * 4 + (b + 1) * 2;
  };
  while (T > 1024 && smem1_for(T) > optin) T -= 1024;
  auto t = std::make_unique<WPermTables>();
  t->T = T;
  t->tiles = t->nb = (E + T - 1) / T;
  const std::int64_t tiles = t->tiles, nb = t->nb, cells = tiles * nb;
  const std::int64_t smem1 = smem1_for(T), smem2 = std::int64_t(T) * 4;
  if (cells >= (std::int64_t(1) << 28) || smem1 > optin || smem2 > optin) return nullptr;
  t->smem1 = int(smem1);
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_pass1_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_pass2_kernel<1, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_pass2_kernel<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_pass1_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_pass2_kernel<2, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_pass2_kernel<2, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  const auto* pairs = plan.pairs.as<const EdgePair<std::int32_t>>();
  // The bucket kernel holds a u32 counter per tile and a u16 rank per position, beside its static
  // scan storage. Its limit is set to the same value for every plan: the attribute belongs to the
  // function, and two plans building tables on two host threads (each under its own wperm_mu)
  // must not lower it under each other's launch.
  cudaFuncAttributes fa{};
  PIPELINK_CUDA_CHECK(cudaFuncGetAttributes(&fa, wperm_bucket_kernel));
  const std::int64_t smem0 = tiles * 4 + std::int64_t(T) * 2, smem0_max = optin - std::int64_t(fa.sharedSizeBytes);
  if (smem0 > smem0_max) return nullptr;
  PIPELINK_CUDA_CHECK(cudaFuncSetAttribute(wperm_bucket_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem0_max)));
  std::size_t scan_bytes = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<const u32*>(nullptr),
                                                    static_cast<u32*>(nullptr), cells, s));
  const auto up = round_up_256;
  const std::size_t eb = up(std::size_t(E) * 4), cb = up(std::size_t(cells) * 4);
  DeviceBuffer arena;
  {  // freed behind this build's kernels: the scratch pool where asked (PIPELINK_AGG_BUILD_POOL=own)
    const ScratchPoolScope scratch(plan.build_own_pool);
    arena = DeviceBuffer::try_make(eb + 4 * cb + up(scan_bytes), s);
  }
  if (!arena.get()) return nullptr;
  t->tl = DeviceBuffer::try_make(std::size_t(E) * 2, s);
  t->lidx = DeviceBuffer::try_make(std::size_t(E) * 2, s);
  t->rs = DeviceBuffer::try_make(std::size_t(tiles * (nb + 1)) * 2, s);
  t->ds = DeviceBuffer::try_make(std::size_t(cells) * 4, s);
  if (!t->tl.get() || !t->lidx.get() || !t->rs.get() || !t->ds.get()) return nullptr;
  char* base = arena.as<char>();
  u32* q = reinterpret_cast<u32*>(base);
  u32* cnt_bt = reinterpret_cast<u32*>(base + eb);
  u32* cnt_tb = reinterpret_cast<u32*>(base + eb + cb);
  u32* d_bt = reinterpret_cast<u32*>(base + eb + 2 * cb);
  u32* s_tb = reinterpret_cast<u32*>(base + eb + 3 * cb);
  void* temp = base + eb + 4 * cb;
  wperm_bucket_kernel<<<unsigned(nb), kWPermThreads, smem0, s>>>(pairs, q, t->lidx.as<u16>(), cnt_bt, cnt_tb, E, T,
                                                                  tiles, nb);
  check_launch();
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, cnt_bt, d_bt, cells, s));
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, cnt_tb, s_tb, cells, s));
  wperm_places_kernel<<<grid_for(E, 256), 256, 0, s>>>(q, d_bt, s_tb, t->tl.as<u16>(), E, T, tiles, nb);
  check_launch();
  wperm_tables_kernel<<<grid_for(tiles * (nb + 1), 256), 256, 0, s>>>(s_tb, d_bt, t->rs.as<u16>(), t->ds.as<u32>(), E, T,
                                                                      tiles, nb);
  check_launch();
  return t;  // arena: freed in stream order behind the kernels that read it
}

// The tables are built once per plan, with the tile size of the first run that asks (a later
// PIPELINK_AGG_W_PERMUTE=T does not rebuild them; `off` is honoured at every run of a plan that
// keeps its edge ids: a compacted plan has none to gather by, and always permutes).
const WPermTables* CudaPlan::weights_permutation(int tile, cudaStream_t s) {
  std::lock_guard lock(wperm_mu);
  if (!wperm_tried) {
    // Not while either stream is being captured into a CUDA graph: the tables would be
    // allocations of that graph. Such runs gather, and a later uncaptured run builds them.
    if (stream_capturing(s) || stream_capturing(stream)) return nullptr;
    // The knob before anything is built: a value changed since run() checked it throws here, with
    // no tables half made and wperm_done not yet created (review, session 19).
    const Compact how = w_permute_compact();
    wperm_tried = true;  // once: a failed build (no room) leaves the plan on the gather
    cudaEvent_t ev = nullptr;
    PIPELINK_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    wperm_done = ev;
    // On the plan's stream, so that the tables are freed there with the plan's other buffers; a
    // run on another stream has waited for the build (wait_for_build) and now waits for this.
    // (So that one run also waits for whatever else is queued on the plan's stream by then.)
    // A build that throws leaves the plan on the gather, which then reports any lasting error.
    std::unique_ptr<WPermTables> t;
    try {
      t = build_w_permutation(*this, tile, stream);
    } catch (const std::exception& e) {
      if (log_level() <= LogLevel::warn)
        ::pipelink::detail::log_message(LogLevel::warn, "aggregate: plan " + std::to_string(id) +
                                                          ": building the w permutation's tables failed (" + e.what() +
                                                          "); w is gathered per edge");
    }
    if (t && how != Compact::keep && !captured) {
      // The pairs become their src column. Freed on the plan's stream: behind every run queued
      // so far (runs hold run_mu while they queue, and a run on another stream makes the plan's
      // stream wait for it: hold_frees_for). A compact plan cannot gather by edge id again.
      // In 24 bits where asked for and N <= 2^24 (w_permute_compact: 3 bytes an edge for 4).
      const bool narrow24 = how == Compact::src24 && num_nodes <= (std::int64_t(1) << 24);
      DeviceBuffer sb = DeviceBuffer::try_make(
          narrow24 ? std::size_t(compact24_bytes(num_edges)) : std::size_t(num_edges) * sizeof(std::int32_t), stream);
      if (sb.get()) {
        if (narrow24)
          compact_srcs24_kernel<<<grid_for(num_edges, 256), 256, 0, stream>>>(
              pairs.as<const EdgePair<std::int32_t>>(),
              reinterpret_cast<std::uint16_t*>(sb.as<unsigned char>() + compact24_low(num_edges)), num_edges);
        else
          compact_srcs_kernel<<<grid_for(num_edges, 256), 256, 0, stream>>>(pairs.as<const EdgePair<std::int32_t>>(),
                                                                           sb.as<std::int32_t>(), num_edges);
        check_launch();
        compact24 = narrow24;
        bytes -= pairs.bytes();
        bytes += sb.bytes();
        pairs.reset();
        srcs = std::move(sb);
        compact = true;
        // Packed lidx where N <= 2^24, after the pairs' free (in stream order, so the high bytes
        // may take their memory): 2 bytes an edge of lidx become 1. Where even that byte finds
        // no room the column stays plain (kWCompact) and lidx whole.
        if (how == Compact::lidx && t && num_nodes <= (std::int64_t(1) << kLidxColumnShift)) {
          // Nothing here may throw past this point: the plan is already compact, and wperm_done
          // and the tables below must still be set (review, session 26). A failed allocation or
          // launch leaves the plain column and the whole lidx.
          try {
            DeviceBuffer hi = DeviceBuffer::try_make(std::size_t(num_edges), stream);
            if (hi.get()) {
              pack_lidx_kernel<<<grid_for(num_edges, 256), 256, 0, stream>>>(srcs.as<std::uint32_t>(), t->lidx.as<const u16>(),
                                                                           hi.as<std::uint8_t>(), num_edges);
              check_launch();
              t->lidx = std::move(hi);  // the u16 lidx freed behind the kernel, in stream order
              lidx_in_column = true;
            }
          } catch (const std::exception& e) {
            if (log_level() <= LogLevel::warn)
              ::pipelink::detail::log_message(LogLevel::warn, "aggregate: plan " + std::to_string(id) +
                                                                  ": packing lidx into the src column failed (" + e.what() +
                                                                  "); the column stays plain");
          }
        }
      }
    }
    // The tables are the plan's before anything else can throw: a compact plan without them
    // cannot run with w (a failed record or log line left it so: a review, session 48). A failed
    // record is made again before a wait (wait_for_wperm).
    if (t) bytes += t->bytes();
    wperm = std::move(t);
    if (cudaEventRecord(wperm_done, stream) == cudaSuccess) wperm_recorded.store(true, std::memory_order_release);
    else (void)cudaGetLastError();
    if (wperm) {
      if (log_level() <= LogLevel::debug)
        ::pipelink::detail::log_message(
            LogLevel::debug, "aggregate: plan " + std::to_string(id) + ": w permutation tables for T = " + std::to_string(wperm->T) +
                                 ", " + std::to_string(wperm->tiles) + " tiles and buckets, " + std::to_string(wperm->bytes()) + " B" +
                                 (compact ? (compact24        ? "; src column 24-bit"
                                             : lidx_in_column ? "; src column 32-bit with lidx's low bytes"
                                                              : "; src column 32-bit")
                                          : "; pairs kept (not compacted)"));
    } else if (log_level() <= LogLevel::info) {
      ::pipelink::detail::log_message(LogLevel::info, "aggregate: plan " + std::to_string(id) +
                                                          ": no w permutation tables (no room, or too many tiles for "
                                                          "T = " + std::to_string(tile) + "); w is gathered per edge");
    }
  }
  if (!wperm) return nullptr;
  if (s != stream) wait_for_wperm(s);
  return wperm.get();
}

// w (edge order; 4- or 8-byte elements) into plan order in `scratch` (E elements, not w), on s.
// `col`: the plan's src column where it holds lidx's low byte (t.lidx then its high byte), else null.
void permute_w_passes(const WPermTables& t, const u32* col, const void* w, void* scratch, std::int64_t E,
                      std::size_t itemsize, cudaStream_t s) {
  const auto* w32 = static_cast<const u32*>(w);
  auto* s32 = static_cast<u32*>(scratch);
  const u16* tl = t.tl.as<const u16>();
  const u16* rs = t.rs.as<const u16>();
  const u32* ds = t.ds.as<const u32>();
  const u16* lidx = t.lidx.as<const u16>();
  const auto* hi = t.lidx.as<const std::uint8_t>();
  const int smem2 = t.T * int(sizeof(u32));
  auto pass2 = [&](auto stride, int half, bool vec) {
    constexpr int S = decltype(stride)::value;
    if (col) wperm_pass2_kernel<S, true><<<int(t.nb), kWPermThreads, smem2, s>>>(s32, nullptr, col, hi, E, t.T, half, vec);
    else wperm_pass2_kernel<S, false><<<int(t.nb), kWPermThreads, smem2, s>>>(s32, lidx, nullptr, nullptr, E, t.T, half, vec);
    check_launch();
  };
  if (itemsize == 4) {
    // tl, lidx and the src column come from the device pool (256-byte aligned); w and scratch may be a caller's
    // (a w view at an offset; permute_weights' output). Pass 1 reads w 16 bytes at a time and
    // writes scratch run by run; pass 2 reads and writes scratch 16 bytes at a time.
    const bool vec1 = t.T % 4 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
    const bool vec2 = t.T % 4 == 0 && reinterpret_cast<std::uintptr_t>(scratch) % 16 == 0;
    wperm_pass1_kernel<1><<<int(t.tiles), kWPermThreads, t.smem1, s>>>(w32, tl, rs, ds, s32, E, t.T, t.nb, 0, vec1);
    check_launch();
    pass2(std::integral_constant<int, 1>{}, 0, vec2);
    return;
  }
  for (int half = 0; half < 2; ++half) {
    wperm_pass1_kernel<2><<<int(t.tiles), kWPermThreads, t.smem1, s>>>(w32, tl, rs, ds, s32, E, t.T, t.nb, half, false);
    check_launch();
    pass2(std::integral_constant<int, 2>{}, half, false);
  }
}

void CudaPlan::permute(const TensorView& w, const TensorView& out, void* stream_arg) {
  if (w_in_pairs) throw Error("aggregate: internal error: permute_weights on a plan with weights in its pairs");
  (void)w_permute_compact();  // bad knobs: before any work
  const cudaStream_t s = as_stream(stream_arg);
  // The plan's device before the capture query (a null stream is the current device's); on_stream
  // holds it again for the work. (Before session 47 the query ran on the caller's device.)
  const cuda::DeviceGuard device_guard(device.index);
  std::lock_guard lock(run_mu);
  // Any capture: a later run may compact the plan under knobs set by then.
  if (!compact && !w_in_pairs && stream_capturing(s)) captured = true;
  on_stream(s, [&] {  // permute: after the build, and the plan's frees after it
    if (num_edges == 0) return;
    if (compact) {  // no edge ids: the two passes, straight into out (w and out do not overlap)
      const WPermTables* t = weights_permutation(0, s);
      if (!t) throw Error("aggregate: internal error: a compact plan without its w permutation tables");
      permute_w_passes(*t, lidx_column(), w.data(), out.data(), num_edges, w.itemsize(), s);
      return;
    }
    const int grid = grid_for(num_edges, 256);
    auto go = [&](auto t) {
      using T = decltype(t);
      if (wide)
        permute_edges_kernel<T, std::int64_t><<<grid, 256, 0, s>>>(pairs.as<const PlanPair<std::int64_t>>(), src_bits,
                                                                   w.data_as<const T>(), out.data_as<T>(), num_edges);
      else
        permute_edges_kernel<T, std::int32_t><<<grid, 256, 0, s>>>(pairs.as<const PlanPair<std::int32_t>>(), src_bits,
                                                                   w.data_as<const T>(), out.data_as<T>(), num_edges);
      check_launch();
    };
    if (w.dtype() == DType::f64) go(double{});
    else go(float{});
  });
}

// The tables a first run given float32 w in edge order would build (run_on's rule), now: that
// run then allocates only its scratch, as every later one does. Why: issue 4 reads the first
// planned call's extra memory, 16.88 B/edge on products-like against 12.81 warm (v23): the
// tables' build arena and the tables themselves fell in it.
// Float64 w: nothing, as run_on builds no tables for it (a compacted plan would then make every
// float64 run permute, with E x 8 bytes of scratch, or fail where that does not fit).
void CudaPlan::prepare_weights(DType weights, void* stream_arg) {
  if (w_in_pairs || wide) return;
  const int tile = w_permute_tile(num_edges, num_segments > 0);  // bad knobs throw here
  (void)w_permute_compact();
  if (weights != DType::f32 || num_edges == 0 || num_nodes == 0 || tile <= 0) return;
  const cudaStream_t s = as_stream(stream_arg);
  const cuda::DeviceGuard device_guard(device.index);  // the capture query on the plan's device
  // weights_permutation builds nothing under capture; nor should the events and waits around it.
  if (stream_capturing(s) || stream_capturing(stream)) return;
  std::lock_guard lock(run_mu);
  on_stream(s, [&] { (void)weights_permutation(tile, s); });
}

void CudaPlan::run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts,
                   bool w_in_plan_order) {
  check_run_knobs();  // bad knobs: before any work
  if (!w_in_pairs) {  // one-shot plans never permute; bad knobs fail here, before any work
    (void)w_permute_tile(num_edges, num_segments > 0);
    (void)w_permute_compact();
  }
  const cudaStream_t s = as_stream(opts.stream);
  const cuda::DeviceGuard device_guard(device.index);  // the capture query on the plan's device
  std::lock_guard lock(run_mu);
  // Any capture, whatever the knobs now: a later run may compact the plan under knobs set by
  // then, and the graph's replays would read the pairs as they were.
  if (!w_in_pairs && !compact && stream_capturing(s)) captured = true;
  on_stream(s, [&] { run_on(x, w, out, opts, w_in_plan_order, s); });
}

void CudaPlan::run_on(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts,
                      bool w_in_plan_order, cudaStream_t s) {
  const bool f64 = x.dtype() == DType::f64;
  // A compact plan's src column was written on the plan's stream after `built` was recorded:
  // every run on another stream waits for it (with or without w).
  if (compact && s != stream) wait_for_wperm(s);
  const TensorView* wrun = w;  // w, or w brought into plan order in `scratch`
  bool wplan = w_in_plan_order;
  DeviceBuffer scratch;  // freed in stream order after the launches below
  TensorView wp;
  if (w && !w_in_plan_order && !w_in_pairs && !wide && num_edges > 0 && x.dim(1) > 0 && num_nodes > 0) {
    // A compact plan always permutes (it has no edge ids); otherwise float32 w where the knob
    // says.
    const bool f32 = !f64 && w->dtype() == DType::f32;
    const int tile = compact || !f32 ? 0 : w_permute_tile(num_edges, num_segments > 0);
    if (compact || tile > 0) {
      if (const WPermTables* t = weights_permutation(tile, s)) {
        // E elements for this call; where the device has no room, the gather below (or, on a
        // compact plan, which cannot gather, an error: also on the run whose table build just
        // compacted the plan. Taking the scratch before the build instead would add its E x 4
        // bytes to every plan's first-run peak, which measured 529.8 MB on products-like without
        // it.)
        const std::size_t isz = w->itemsize(), need = std::size_t(num_edges) * isz;
        scratch = DeviceBuffer::try_make(need, s);
        if (!scratch.get() && compact) {
          std::size_t free_b = 0, total_b = 0;
          PIPELINK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
          throw OutOfMemoryError(need, free_b,
                                 "aggregate: a compact plan's run needs " + std::to_string(need) +
                                     " bytes of scratch to bring w into the plan's order, and the device "
                                     "has no room; pass w in plan order (AggregatePlan::permute_weights) "
                                     "or free device memory");
        }
        if (scratch.get()) {
          permute_w_passes(*t, lidx_column(), w->data(), scratch.get(), num_edges, isz, s);
          wp = TensorView(scratch.get(), w->dtype(), w->device(), {num_edges});
          wrun = &wp;
          wplan = true;
        }
      } else if (compact) {
        throw Error("aggregate: internal error: a compact plan without its w permutation tables");
      }
    }
  }
  if (wide) {
    if (f64) launch_rows<double, std::int64_t>(*this, x, wrun, wplan, out, opts, s);
    else launch_rows<float, std::int64_t>(*this, x, wrun, wplan, out, opts, s);
  } else {
    if (f64) launch_rows<double, std::int32_t>(*this, x, wrun, wplan, out, opts, s);
    else
      launch_rows<float, std::int32_t>(*this, x, wrun, wplan, out, opts, s);
  }
}

AggregateOptions options_of(const OpContext& ctx) {
  AggregateOptions o;
  o.transform = parse_transform(ctx.attr<std::string>("transform"));
  o.accumulate = ctx.attr<bool>("accumulate");
  o.stream = ctx.stream;
  return o;
}

// The lean path's atomic accumulation of every edge of `src`, `dst` (and `w`, or null) into out,
// with no scratch and no index check (see aggregate_lean, below the one-shot, which also uses it
// for the edges left when a later edge range runs out of memory).
struct LeanArgs {
  const TensorView *x, *src, *dst, *w, *out;
  Transform transform;
  cudaStream_t stream;
};
void lean_accumulate(const LeanArgs& a, bool allow_vec4, bool spread);

// One-shot: build the plan, run it, release it (stream-ordered, so no extra sync for the frees).
// Float32 weights go into the plan's pairs in place of the edge ids (build_plan_for's fold_w), so
// the run reads no w of its own: the random 4-byte w[edge id] gather is gone, at no extra build
// work (the init writes w's bits where it wrote the id). The planned run with weights in plan
// order, which reads the same bytes, took 4.41 ms against 5.08 on products-like (46f2e9e55df9).
//
// Edge ranges (PIPELINK_AGG_ONESHOT_CHUNKS=K, and on their own where neither the one sort nor
// destination ranges beside the pairs fit the device, or PIPELINK_AGG_BUILD_MEMORY binds; see
// sort_narrow): the edge list in K ranges, each built and run on its
// own, ranges after the first accumulating into out, each range's plan freed (stream-ordered)
// before the next is built. So the build's transient memory is that of E / K edges (~24 / K bytes
// per edge) and each edge is sorted once, where the destination-range build
// (PIPELINK_AGG_BUILD_CHUNKS) selects over all E for every range. Counted before the run at K = 3:
// the same sort bytes, the run's x rows once, and the output read and written twice more (2 x 1.25
// GB, ~0.6 ms), ~7.7 ms against 7.1; measured 9.07 ms in `bench --ab` rounds against 6.95 for the
// one plan alone at the same commit (products-like, v12, 11a105f); in shuffled rounds 8.54 ms
// against 6.71, and 9.25 for destination ranges (v13, 828e4e5). Each range's build costs ~1.0 ms
// there: its row offsets and segment scans run over all N rows. Repeatable at a forced K (a
// fixed range order), but not planned's bits: each row is added range by range. Unforced (only
// where the whole list's pairs do not fit with room for at most 16 destination ranges' sorts, or
// the build ran out of memory past its sort), K and any splits follow the device's free memory,
// so the bits can differ from call to call: a warning says so.
// A one-shot plan's run. Its only allocation is the hub rows' partial sums (launch_rows), taken
// before any write. PIPELINK_AGG_TEST_RUN_OOM_ABOVE=M (tests only): a plan of more than M edges
// fails here as if those found no room (asking 8 bytes an edge, so that a split asks less),
// before any write, so a test can make the run's fallback happen on any device.
void one_shot_run(CudaPlan& plan, const TensorView& x, const TensorView* w, const TensorView& out,
                  const AggregateOptions& opts, const PlanKnobs& knobs) {
  if (knobs.test_run_oom_above && plan.num_edges > knobs.test_run_oom_above)
    throw OutOfMemoryError(std::uint64_t(plan.num_edges) * 8, 0,
                           "PIPELINK_AGG_TEST_RUN_OOM_ABOVE=" + std::to_string(knobs.test_run_oom_above) +
                               ": a one-shot run of " + std::to_string(plan.num_edges) + " edges");
  plan.run(x, w, out, opts, false);
}

void aggregate_one_shot(OpContext& ctx) {
  const TensorView* w = ctx.has("w") ? &ctx.port("w") : nullptr;
  const TensorView &src = ctx.port("src"), &dst = ctx.port("dst");
  // The call's device for the whole call: the plan it builds is freed at its end, on a stream of
  // that device (the caller's device is given back after).
  const cuda::DeviceGuard device_guard(src.device().index);
  refuse_capture(ctx, "one-shot");
  const std::int64_t E = src.numel(), N = ctx.dim("N");
  const PlanKnobs knobs = plan_knobs();  // a bad knob: before any work
  // The w permutation's knobs too, on every one-shot call: its plan never permutes, but the run
  // checked them only where w was absent or float64 (a plan holding w's bits skipped them), so
  // one bad value failed some one-shot calls and not others (session 46's review).
  (void)w_permute_tile(E, false);
  (void)w_permute_compact();  // one-shot: the compaction knob too
  // Everything this call allocates is freed before it returns: from the scratch pool, where no
  // plan or tensor outlives a call (see ScratchPoolScope).
  const ScratchPoolScope scratch(knobs.oneshot_own_pool);
  const std::int64_t knob = knobs.oneshot_chunks;
  std::int64_t K = std::min(knob, std::max<std::int64_t>(E, 1));
  if (K <= 1) {
    // Knob unset (K = 0): where the one sort does not fit, the build's destination ranges while
    // the whole list's pairs fit with room for at most 16 ranges' sorts (the same plan, so the
    // same bits as every other call), and edge ranges only past that. Measured (H200, v12, 11a105f, one-shot, `bench
    // --ab`): 3 edge ranges 9.07 / 9.68 ms and 508 / 516 MB on products-like / power-law, against destination ranges (K
    // = 4) 9.73 / 10.37 ms and 755 / 771 MB. Those rounds ran in a fixed order with K = 4 right after the edge ranges
    // (a pool effect: docs/perf-notes.md, v12), so the time gap is not settled; the memory gap is. Edge ranges were the
    // first choice until session 43, which chose the bits: their count follows the free memory, and so did the sums.
    std::int64_t edge_ranges = 0;
    std::shared_ptr<CudaPlan> plan;
    bool in_run = false;  // which step ran out of memory, for the warning (as in the ranges below)
    try {
      plan = build_plan_for(src, dst, N, ctx.stream, w, K == 0 ? &edge_ranges : nullptr);
      if (plan) {
        // The run's one allocation is its hub rows' partial sums (launch_rows: segments x F
        // doubles), taken before any write, so out is untouched when it fails. Such a call ran
        // edge ranges only where the build failed until session 48: a device with room for the
        // plan and not for its partials raised instead.
        in_run = true;
        one_shot_run(*plan, ctx.port("x"), w, ctx.port("out"), options_of(ctx), knobs);
        return;
      }
    } catch (const OutOfMemoryError& e) {
      // The sort fitted but a later buffer (row offsets, the work split) did not, or the
      // destination ranges' largest one (a hub row heavier than their estimate) did not, or the
      // run's partial sums did not: two edge ranges, split further below if need be. Nothing was
      // written to out.
      if (K != 0 || E < 2) throw;
      plan.reset();  // its memory back (in stream order) before the ranges' builds
      if (log_level() <= LogLevel::warn)
        ::pipelink::detail::log_message(LogLevel::warn, std::string("aggregate: the one-shot ") +
                                                            (in_run ? "run" : "build") + " ran out of memory (" +
                                                            std::string(e.what()) +
                                                            "); running 2 edge ranges, split further where they do not "
                                                            "fit: the bits can differ from call to call (a plan, or "
                                                            "PIPELINK_AGG_ONESHOT_CHUNKS=K, keeps them)");
      edge_ranges = 2;
    }
    K = std::min(edge_ranges, std::max<std::int64_t>(E, 1));
  }
  // Every range's indices before any output is written (each range's build checks its own again).
  // A later range's build can still fail (out of memory): see finish_lean below.
  const bool lean_spread = lean_spread_order();  // finish_lean's knob: a bad one before any work
  int major = 0;
  PIPELINK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, src.device().index));
  validate_indices("aggregate", &src, &dst, N, as_stream(ctx.stream));
  AggregateOptions opts = options_of(ctx);
  // Unforced ranges come from a 24 bytes/edge estimate of what fits, and the pool's allocation
  // granularity makes it approximate on a nearly full device: a range whose build runs out of
  // memory is split in two and retried (its build wrote nothing to out). A forced K is kept as
  // asked, for its bits, and its out-of-memory error is raised if no range has run yet (out
  // untouched). Once one has, out holds its sums: raising then would lose the caller's data
  // (with accumulate, the old values plus some of the edges), so the edges left, [e0, E), are
  // added on the lean path (atomics, no scratch memory: nothing left to run out of), with a
  // warning that the call is not deterministic.
  const bool adaptive = knob == 0;
  bool ran = false;  // a range's run has written to out
  const TensorView& x = ctx.port("x");
  const TensorView& out = ctx.port("out");
  auto finish_lean = [&](std::int64_t e0, const OutOfMemoryError& e) {
    if (log_level() <= LogLevel::warn)
      ::pipelink::detail::log_message(LogLevel::warn,
                                      "aggregate: a one-shot edge range ran out of memory after earlier "
                                      "ranges had written to out (" +
                                          std::string(e.what()) + "); the edges left, [" + std::to_string(e0) + ", " +
                                          std::to_string(E) +
                                          "), are added on the lean path: this "
                                          "call's sums are not deterministic");
    const TensorView sk = src.slice_rows(e0, E), dk = dst.slice_rows(e0, E);
    std::optional<TensorView> wk;
    if (w) wk = w->slice_rows(e0, E);
    // sm_90's vector reductions where the device has them (the lean variant's own rule).
    lean_accumulate({&x, &sk, &dk, wk ? &*wk : nullptr, &out, opts.transform, as_stream(ctx.stream)}, major >= 9,
                    lean_spread);
  };
  // Ranges left, the next one last: edges [e0, e1), and the bytes of the failed allocation that
  // made the range (0: none) and whether it was the run's. A split that does not shrink the
  // failing allocation (a buffer sized by N, not by the edges) cannot help, and the error is
  // raised; bytes are compared only between failures of the same step (a build's ~24 B an edge
  // against a run's partial sums would stop a split that could still fit).
  struct Range {
    std::int64_t e0, e1;
    std::uint64_t failed_bytes;
    bool failed_in_run;
  };
  std::vector<Range> todo;
  for (std::int64_t k = K; k-- > 0;) todo.push_back({E * k / K, E * (k + 1) / K, 0, false});
  std::int64_t ranges = K;  // so far, splits included
  // PIPELINK_AGG_TEST_RANGE_OOM_ABOVE=M (tests only): a range of more than M edges fails as if
  // its build ran out of memory (asking 24 bytes an edge), so a test can make the splits happen
  // where it wants them, on any device.
  const std::int64_t oom_above = knobs.test_range_oom_above;
  while (!todo.empty()) {
    const Range r = todo.back();
    const std::int64_t e0 = r.e0, e1 = r.e1;
    todo.pop_back();
    if (log_level() <= LogLevel::debug)
      ::pipelink::detail::log_message(LogLevel::debug, "aggregate: one-shot edge range " +
                                                           std::to_string(ranges - std::int64_t(todo.size())) + "/" +
                                                           std::to_string(ranges) + ": edges [" + std::to_string(e0) +
                                                           ", " + std::to_string(e1) + ")");
    const TensorView sk = src.slice_rows(e0, e1), dk = dst.slice_rows(e0, e1);
    std::optional<TensorView> wk;
    if (w) wk = w->slice_rows(e0, e1);
    std::shared_ptr<CudaPlan> plan;
    bool in_run = false;
    try {
      if (oom_above && e1 - e0 > oom_above)
        throw OutOfMemoryError(std::uint64_t(e1 - e0) * 24, 0,
                               "PIPELINK_AGG_TEST_RANGE_OOM_ABOVE=" + std::to_string(oom_above) + ": a range of " +
                                   std::to_string(e1 - e0) + " edges");
      plan = build_plan_for(sk, dk, N, ctx.stream, wk ? &*wk : nullptr);
      // Its run's partial sums are taken before any write: a range whose run finds no room
      // splits as one whose build does (out holds only the earlier ranges' sums).
      in_run = true;
      one_shot_run(*plan, x, wk ? &*wk : nullptr, out, opts, knobs);
    } catch (const OutOfMemoryError& e) {
      plan.reset();
      const bool no_smaller = r.failed_bytes && r.failed_in_run == in_run && e.requested() >= r.failed_bytes;
      if (!adaptive || e1 - e0 < 2 || ranges >= 4096 || no_smaller) {
        if (!ran) throw;
        return finish_lean(e0, e);
      }
      const std::int64_t mid = e0 + (e1 - e0) / 2;
      todo.push_back({mid, e1, e.requested(), in_run});
      todo.push_back({e0, mid, e.requested(), in_run});
      ++ranges;
      if (log_level() <= LogLevel::info)
        ::pipelink::detail::log_message(LogLevel::info, std::string("aggregate: a one-shot edge range's ") +
                                                            (in_run ? "run" : "build") + " ran out of memory (" +
                                                            std::string(e.what()) + "); split in two, " +
                                                            std::to_string(ranges) + " ranges now");
      continue;
    }
    ran = true;
    opts.accumulate = true;
  }
}

// ---- lean: atomic accumulation, zero scratch -------------------------------------------------

// Edge chunks a warp takes whole in the spread order: kLeanChunkSteps warp steps of `groups`
// edges each (64 edges at F = 64, 512 bytes of each index array).
constexpr int kLeanChunkSteps = 32;
__host__ __device__ constexpr std::int64_t lean_chunk_edges(int lpe) { return std::int64_t(32 / lpe) * kLeanChunkSteps; }

// SPREAD: warps take chunks in the spread order, else lane groups take consecutive edges (see
// lean_spread_order()).
template <class T, class I, int VEC, bool SPREAD>
__global__ void __launch_bounds__(256) atomic_edges_kernel(const I* __restrict__ src, const I* __restrict__ dst,
                                                           const T* __restrict__ x, std::int64_t xs,
                                                           const T* __restrict__ w, T* __restrict__ out, std::int64_t os,
                                                           std::int64_t E, std::int64_t F, int lpe, int transform,
                                                           std::uint64_t spread_a) {
  // Groups of `lpe` lanes per edge (F = 64 float32: 16 lanes x float4, two edges per warp step;
  // v1 used a whole warp per edge and left lanes 16-31 idle: 15.1 ms on products-like).
  const int lane = threadIdx.x % 32, groups = 32 / lpe, group = lane / lpe, gl = lane % lpe;
  auto row = [&](std::int64_t s, std::int64_t d, T wt) {
    for (std::int64_t f = std::int64_t(gl) * VEC; f < F; f += std::int64_t(lpe) * VEC) {
      T v[VEC];
      load_vec<T, VEC>(x + s * xs + f, v);
      T* o = out + d * os + f;
      if constexpr (VEC == 4 && sizeof(T) == 4) {
        // sm_90's vector reduction (red.global.add.v4.f32): one atomic per 16 bytes.
        atomicAdd(reinterpret_cast<float4*>(o), make_float4(phi(v[0] * wt, transform), phi(v[1] * wt, transform),
                                                             phi(v[2] * wt, transform), phi(v[3] * wt, transform)));
      } else {
#pragma unroll
        for (int q = 0; q < VEC; ++q) atomicAdd(o + q, phi(v[q] * wt, transform));
      }
    }
  };
  auto edge = [&](std::int64_t e) { row(std::int64_t(src[e]), std::int64_t(dst[e]), w ? __ldg(w + e) : T(1)); };
  const std::int64_t warp = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32,
                     warps = std::int64_t(gridDim.x) * blockDim.x / 32;
  if constexpr (!SPREAD) {
    for (std::int64_t e = warp * groups + group; e < E; e += warps * groups) edge(e);
  } else {
    // Chunk q of the launch is chunk (q * spread_a) mod chunks of the edge list (a bijection:
    // core/spread_order.hpp), so the warps in flight at once work on chunks spread over the list.
    const std::int64_t per_chunk = lean_chunk_edges(lpe), chunks = (E + per_chunk - 1) / per_chunk;
    for (std::int64_t q = warp; q < chunks; q += warps) {
      const std::int64_t e0 = std::int64_t(std::uint64_t(q) * spread_a % std::uint64_t(chunks)) * per_chunk;
      // The warp loads 32 edges' src, dst and w at once (lane l: edge base + l; 128 contiguous
      // bytes of each int32 array) and hands them to the lane groups by shuffles. Each step
      // loading its own 8 bytes of each array instead (session 13's spread loop) was 2-4% slower
      // on random input (H200, lean ms, same rounds: products-like 14.05 against 13.70,
      // power-law 9.16 against 8.82; dst-sorted 8.39 / 8.40 and 7.04 / 6.91). Unrolling that
      // loop by 4 had measured no gain (14.29 against 14.23), so the cost was the index arrays'
      // sector use, not loads in flight.
      for (std::int64_t base = e0; base < e0 + per_chunk && base < E; base += 32) {
        const std::int64_t mine = base + lane;
        const bool have = mine < E;
        const I ms = have ? src[mine] : I(0), md = have ? dst[mine] : I(0);
        const T mw = have && w ? __ldg(w + mine) : T(1);
        for (int k = 0; k < 32 / groups; ++k) {
          const int from = k * groups + group;  // all lanes shuffle; only real edges are added
          const I s = __shfl_sync(0xffffffffu, ms, from), d = __shfl_sync(0xffffffffu, md, from);
          const T wt = w ? __shfl_sync(0xffffffffu, mw, from) : T(1);  // w: the same for the whole warp
          if (base + from < E) row(std::int64_t(s), std::int64_t(d), wt);
        }
      }
    }
  }
}

template <class T, class I, int VEC>
void launch_atomic_vec(const LeanArgs& a, int lpe, bool spread) {
  const TensorView &x = *a.x, &src = *a.src, &dst = *a.dst, &out = *a.out;
  const cudaStream_t s = a.stream;
  const std::int64_t E = src.numel(), F = x.dim(1);
  const T* w = a.w ? a.w->data_as<const T>() : nullptr;
  const int tr = int(a.transform);
  auto launch = [&](auto kernel, std::int64_t warps, std::uint64_t spread_a) {
    kernel<<<grid_for(warps * 32, 256), 256, 0, s>>>(src.data_as<const I>(), dst.data_as<const I>(), x.data_as<const T>(),
                                                     x.stride(0), w, out.data_as<T>(), out.stride(0), E, F, lpe, tr, spread_a);
    check_launch();
  };
  if (spread) {  // a warp a chunk
    const std::int64_t chunks = (E + lean_chunk_edges(lpe) - 1) / lean_chunk_edges(lpe);
    const std::uint64_t a = ::pipelink::detail::spread_multiplier(std::uint64_t(chunks));
    launch(atomic_edges_kernel<T, I, VEC, true>, chunks, a);
  } else {  // a lane group an edge
    launch(atomic_edges_kernel<T, I, VEC, false>, (E * lpe + 31) / 32, 1);
  }
}

template <class T, class I>
void launch_atomic(const LeanArgs& a, bool vec4, bool spread) {
  const std::int64_t E = a.src->numel(), F = a.x->dim(1);
  if (E == 0 || F == 0) return;
  if constexpr (sizeof(T) == 4) {
    if (vec4) return launch_atomic_vec<T, I, 4>(a, lanes_per_edge(F, 4), spread);
  }
  launch_atomic_vec<T, I, 1>(a, lanes_per_edge(F, 1), spread);
}

void lean_accumulate(const LeanArgs& a, bool allow_vec4, bool spread) {
  const TensorView &x = *a.x, &out = *a.out;
  const bool f32 = x.dtype() == DType::f32;
  const bool vec4 = allow_vec4 && f32 && x.dim(1) % 4 == 0 && x.stride(0) % 4 == 0 && out.stride(0) % 4 == 0 &&
                    aligned16(x.data()) && aligned16(out.data());
  const bool i32 = a.src->dtype() == DType::i32;
  if (f32)
    i32 ? launch_atomic<float, std::int32_t>(a, vec4, spread) : launch_atomic<float, std::int64_t>(a, vec4, spread);
  else
    i32 ? launch_atomic<double, std::int32_t>(a, false, spread) : launch_atomic<double, std::int64_t>(a, false, spread);
}

void aggregate_lean(OpContext& ctx, bool allow_vec4) {
  const TensorView &x = ctx.port("x"), &src = ctx.port("src"), &dst = ctx.port("dst"), &out = ctx.port("out");
  const cuda::DeviceGuard device_guard(x.device().index);
  refuse_capture(ctx, "lean");
  const cudaStream_t s = as_stream(ctx.stream);
  const bool spread = lean_spread_order();  // a bad knob: before any work
  validate_indices("aggregate", &src, &dst, ctx.dim("N"), s);
  if (!ctx.attr<bool>("accumulate") && out.numel() > 0) zero_rows(out, s);
  lean_accumulate({&x, &src, &dst, ctx.has("w") ? &ctx.port("w") : nullptr, &out,
                   parse_transform(ctx.attr<std::string>("transform")), s},
                  allow_vec4, spread);
}

// ---- three-op reference on CUDA --------------------------------------------------------------

template <class T, class I>
__global__ void gather_scale_kernel(const T* x, std::int64_t xs, const I* src, const T* w, T* m, std::int64_t ms,
                                    std::int64_t E, std::int64_t F) {
  const std::int64_t total = E * F;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t e = i / F, f = i % F;
    m[e * ms + f] = x[std::int64_t(src[e]) * xs + f] * (w ? w[e] : T(1));
  }
}

template <class T>
__global__ void map_kernel(const T* in, std::int64_t is, T* out, std::int64_t os, std::int64_t R, std::int64_t C,
                           int transform) {
  const std::int64_t total = R * C;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / C, c = i % C;
    out[r * os + c] = phi(in[r * is + c], transform);
  }
}

template <class T, class I>
__global__ void index_add_kernel(T* out, std::int64_t os, const I* dst, const T* v, std::int64_t vs, std::int64_t E,
                                 std::int64_t F) {
  const std::int64_t total = E * F;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t e = i / F, f = i % F;
    atomicAdd(out + std::int64_t(dst[e]) * os + f, v[e * vs + f]);
  }
}

template <class F32, class F64>
void by_dtype_index(DType t, DType idx, F32&& f32, F64&& f64) {
  if (t == DType::f32) idx == DType::i32 ? f32(float{}, std::int32_t{}) : f32(float{}, std::int64_t{});
  else idx == DType::i32 ? f64(double{}, std::int32_t{}) : f64(double{}, std::int64_t{});
}

void gather_scale_cuda(OpContext& ctx) {
  const TensorView &x = ctx.port("x"), &src = ctx.port("src"), &m = ctx.port("m");
  const cudaStream_t s = as_stream(ctx.stream);
  const cuda::DeviceGuard device_guard(x.device().index);
  if (ctx.dim("E") > 0)  // an empty call makes no CUDA call, so a capture may hold it
    refuse_capture(s, "gather_scale: a call", "run it before or after the capture");
  validate_indices("gather_scale", &src, nullptr, ctx.dim("N"), s);
  const std::int64_t E = ctx.dim("E"), F = ctx.dim("F");
  if (E * F == 0) return;
  auto go = [&](auto tv, auto iv) {
    using T = decltype(tv);
    using I = decltype(iv);
    const T* w = ctx.has("w") ? ctx.port("w").data_as<const T>() : nullptr;
    gather_scale_kernel<T, I><<<grid_for(E * F, 256), 256, 0, s>>>(x.data_as<const T>(), x.stride(0),
                                                                   src.data_as<const I>(), w, m.data_as<T>(),
                                                                   m.stride(0), E, F);
  };
  by_dtype_index(x.dtype(), src.dtype(), go, go);
  check_launch();
}

void map_cuda(OpContext& ctx) {
  const TensorView &in = ctx.port("in"), &out = ctx.port("out");
  const cudaStream_t s = as_stream(ctx.stream);
  const cuda::DeviceGuard device_guard(in.device().index);
  const std::int64_t R = ctx.dim("R"), C = ctx.dim("C");
  if (R * C == 0) return;
  const int tr = int(parse_transform(ctx.attr<std::string>("transform"), "map"));
  if (in.dtype() == DType::f32)
    map_kernel<float><<<grid_for(R * C, 256), 256, 0, s>>>(in.data_as<const float>(), in.stride(0), out.data_as<float>(),
                                                          out.stride(0), R, C, tr);
  else
    map_kernel<double><<<grid_for(R * C, 256), 256, 0, s>>>(in.data_as<const double>(), in.stride(0),
                                                           out.data_as<double>(), out.stride(0), R, C, tr);
  check_launch();
}

void index_add_cuda(OpContext& ctx) {
  const TensorView &out = ctx.port("out"), &dst = ctx.port("dst"), &v = ctx.port("values");
  const cudaStream_t s = as_stream(ctx.stream);
  const cuda::DeviceGuard device_guard(out.device().index);
  if (ctx.dim("E") > 0)  // an empty call makes no CUDA call, so a capture may hold it
    refuse_capture(s, "index_add: a call", "run it before or after the capture");
  validate_indices("index_add", nullptr, &dst, ctx.dim("N"), s);
  const std::int64_t E = ctx.dim("E"), F = ctx.dim("F");
  if (E * F == 0) return;
  auto go = [&](auto tv, auto iv) {
    using T = decltype(tv);
    using I = decltype(iv);
    index_add_kernel<T, I><<<grid_for(E * F, 256), 256, 0, s>>>(out.data_as<T>(), out.stride(0), dst.data_as<const I>(),
                                                                v.data_as<const T>(), v.stride(0), E, F);
  };
  by_dtype_index(out.dtype(), dst.dtype(), go, go);
  check_launch();
}

Variant cuda_variant(const char* op, const char* name, int priority, bool deterministic, KernelFn fn, const char* doc) {
  return make_variant(op, name, DeviceKind::cuda, priority, deterministic, std::move(fn), doc);
}

const bool g_cuda_plan_builder = [] {
  pipelink::detail::set_plan_builder(DeviceKind::cuda, &build_plan);
  return true;
}();

}  // namespace
}  // namespace pipelink::cuda

namespace pipelink {

PIPELINK_REGISTER_VARIANT(aggregate_cuda_csr) {
  return cuda::cuda_variant("aggregate", "csr_warp_per_row", 10, true, cuda::aggregate_one_shot,
                            "one-shot: stable radix sort of (dst, edge id), a warp per destination row");
}
PIPELINK_REGISTER_VARIANT(aggregate_cuda_atomic_vec4) {
  Variant v = cuda::cuda_variant("aggregate", "atomic_vec4", 5, false,
                                 [](OpContext& c) { cuda::aggregate_lean(c, true); },
                                 "lean: no scratch, red.global.add.v4.f32 per 16 bytes (sm_90)");
  v.requires_.min_sm = 90;
  v.requires_.features = {"vector_atomics"};
  return v;
}
PIPELINK_REGISTER_VARIANT(aggregate_cuda_atomic_scalar) {
  return cuda::cuda_variant("aggregate", "atomic_scalar", 1, false, [](OpContext& c) { cuda::aggregate_lean(c, false); },
                            "lean: no scratch, one float atomic per element");
}
PIPELINK_REGISTER_VARIANT(gather_scale_cuda) {
  return cuda::cuda_variant("gather_scale", "row_copy", 10, true, cuda::gather_scale_cuda, "thread per element");
}
PIPELINK_REGISTER_VARIANT(map_cuda) {
  return cuda::cuda_variant("map", "elementwise", 10, true, cuda::map_cuda,
                            "thread per element, tanh_f32: tanhf less its clamp (<= 2 ulp)");
}
PIPELINK_REGISTER_VARIANT(index_add_cuda) {
  return cuda::cuda_variant("index_add", "atomic_scalar", 10, false, cuda::index_add_cuda,
                            "one float atomic per element, as torch's index_add_ on CUDA (not deterministic)");
}

}  // namespace pipelink
