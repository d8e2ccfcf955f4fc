// Standalone micro-benchmark (not part of the library build): the w permutation's pass 2 with
// lidx (a plan position's index into its bucket's region) read as today, a u16 array, against
// lidx packed into the compact plan's src column: its low 10 bits in the column's spare high bits
// (src < 2^22 on products-like), its high 6 in a u8 array.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/packed_lidx_micro.cu -o plm && ./plm [E]
//   (gpu-check: MICRO=packed_lidx_micro.cu)
//
// Why (docs/perf-notes.md v28, Next 5): issue 4 asks a planned call's extra memory to stay under
// 12 bytes an edge; a warm call takes 12.32 on products-like (the plan 8.32: src column 4, tl 2,
// lidx 2, row offsets and run tables 0.32; the call's scratch 4). Packing lidx takes 1 byte an
// edge off the plan (11.32 warm). What it costs is pass 2 reading 4 + 1 bytes an edge for lidx
// instead of 2: +186 MB on products-like, ~+0.04 ms at copy bandwidth, if pass 2 goes by its bytes
// (4 read + 2 + 4 written today: 10 an edge, 0.62 GB, ~0.15 ms at 4.27 TB/s; measured ~0.167 in
// the planned call, v22). The walk's extra cost (masking the src it loads: one instruction a
// stage of 8 edges) is not measured here.
//
// Lines (median of 10 after a warm-up; products-like sizes unless E is given; T = 49152):
//   P2   pass 2 as in the library (a block per bucket, in place, 16-byte loads of lidx pairs)
//   P2p  the same reading lidx from the packed column and the u8 array
// Both outputs are compared bitwise (same indices, so the same permutation).
#include <cstring>

#include "micro_harness.cuh"

namespace {

using micro::i64;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u8 = std::uint8_t;

constexpr int kThreads = 1024, kT = 49152, kSrcBits = 22;

// Random inputs: scratch words, lidx in [0, len of its bucket), src < 2^kSrcBits.
__global__ void make_inputs(u32* scratch, u16* lidx, u32* col, u8* hi, u32* src_check, i64 E, std::uint64_t seed) {
  for (i64 p = blockIdx.x * i64(blockDim.x) + threadIdx.x; p < E; p += i64(gridDim.x) * blockDim.x) {
    const std::uint64_t h = micro::mix(seed ^ std::uint64_t(p));
    const i64 b0 = p / kT * kT;
    const u32 len = u32(E - b0 < kT ? E - b0 : kT);
    const u32 l = u32((h >> 20) % len), s = u32(h & ((1u << kSrcBits) - 1));
    scratch[p] = u32(micro::mix(h));
    lidx[p] = u16(l);
    col[p] = s | (l & 0x3FFu) << kSrcBits;
    hi[p] = u8(l >> 10);
    src_check[p] = s;
  }
}

// Both forms' first half: the block's bucket of scratch into shared memory (16-byte loads for
// whole quads). Returns the region; p0, len and done (the positions in whole quads) for the rest.
struct Region {
  u32* sw;
  i64 p0;
  int len, done;
};
__device__ __forceinline__ Region load_region(const u32* scratch, i64 E) {
  extern __shared__ __align__(16) unsigned char smem[];
  u32* const sw = reinterpret_cast<u32*>(smem);
  const i64 p0 = i64(blockIdx.x) * kT;
  const int len = int(E - p0 < kT ? E - p0 : kT), done = len & ~3;
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < done; i += kThreads * 4)
    *reinterpret_cast<uint4*>(sw + i) = *reinterpret_cast<const uint4*>(scratch + p0 + i);
  for (int i = done + threadIdx.x; i < len; i += kThreads) sw[i] = scratch[p0 + i];
  __syncthreads();
  return {sw, p0, len, done};
}

// The library's pass 2 (wperm_pass2_kernel, STRIDE 1): the bucket's region into shared memory,
// then out in plan order through lidx, in place.
__global__ void __launch_bounds__(kThreads) pass2_u16(u32* scratch, const u16* __restrict__ lidx, i64 E) {
  const auto [sw, p0, len, done] = load_region(scratch, E);
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < done; i += kThreads * 4) {
    const uint2 k = __ldg(reinterpret_cast<const uint2*>(lidx + p0 + i));
    *reinterpret_cast<uint4*>(scratch + p0 + i) = make_uint4(sw[k.x & 0xFFFFu], sw[k.x >> 16], sw[k.y & 0xFFFFu], sw[k.y >> 16]);
  }
  for (int i = done + threadIdx.x; i < len; i += kThreads) scratch[p0 + i] = sw[lidx[p0 + i]];
}

// The same with lidx = (col >> kSrcBits) | hi << (32 - kSrcBits): 16 bytes of the column and 4 of
// hi for every 4 positions.
__device__ __forceinline__ u32 packed_index(u32 c, u32 h) { return (c >> kSrcBits) | h << (32 - kSrcBits); }
__global__ void __launch_bounds__(kThreads) pass2_packed(u32* scratch, const u32* __restrict__ col, const u8* __restrict__ hi,
                                                         i64 E) {
  const auto [sw, p0, len, done] = load_region(scratch, E);
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < done; i += kThreads * 4) {
    const uint4 c = __ldg(reinterpret_cast<const uint4*>(col + p0 + i));
    const u32 h = __ldg(reinterpret_cast<const u32*>(hi + p0 + i));
    *reinterpret_cast<uint4*>(scratch + p0 + i) =
        make_uint4(sw[packed_index(c.x, h & 0xFFu)], sw[packed_index(c.y, (h >> 8) & 0xFFu)],
                   sw[packed_index(c.z, (h >> 16) & 0xFFu)], sw[packed_index(c.w, h >> 24)]);
  }
  for (int i = done + threadIdx.x; i < len; i += kThreads) scratch[p0 + i] = sw[packed_index(col[p0 + i], hi[p0 + i])];
}

// The walk's side: every packed entry's src is its low kSrcBits bits.
__global__ void check_srcs(const u32* col, const u32* src, i64 E, unsigned long long* bad) {
  for (i64 p = blockIdx.x * i64(blockDim.x) + threadIdx.x; p < E; p += i64(gridDim.x) * blockDim.x)
    if ((col[p] & ((1u << kSrcBits) - 1)) != src[p]) atomicAdd(bad, 1ull);
}

}  // namespace

int main(int argc, char** argv) {
  const i64 E = micro::edge_count_arg(argc, argv);
  if (E < 0) return 2;
  const i64 buckets = (E + kT - 1) / kT;
  const int smem = kT * int(sizeof(u32));
  std::printf("packed lidx micro: E = %lld, T = %d (%lld buckets), src bits %d\n", (long long)E, kT, (long long)buckets,
              kSrcBits);
  u32 *scratch, *init, *col, *src, *out_a;
  u16* lidx;
  u8* hi;
  unsigned long long* bad;
  CK(cudaMalloc(&scratch, E * 4));
  CK(cudaMalloc(&init, E * 4));
  CK(cudaMalloc(&col, E * 4));
  CK(cudaMalloc(&src, E * 4));
  CK(cudaMalloc(&out_a, E * 4));
  CK(cudaMalloc(&lidx, E * 2));
  CK(cudaMalloc(&hi, E + 16));
  CK(cudaMalloc(&bad, sizeof(unsigned long long)));
  CK(cudaMemset(bad, 0, sizeof(unsigned long long)));
  make_inputs<<<1024, 256>>>(init, lidx, col, hi, src, E, 42);
  check_srcs<<<1024, 256>>>(col, src, E, bad);
  CK(cudaFuncSetAttribute(pass2_u16, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(pass2_packed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const unsigned grid = unsigned(buckets);
  // The check: each form once from the same scratch, outputs compared bitwise.
  CK(cudaMemcpy(scratch, init, E * 4, cudaMemcpyDeviceToDevice));
  pass2_u16<<<grid, kThreads, smem>>>(scratch, lidx, E);
  CK(cudaMemcpy(out_a, scratch, E * 4, cudaMemcpyDeviceToDevice));
  CK(cudaMemcpy(scratch, init, E * 4, cudaMemcpyDeviceToDevice));
  pass2_packed<<<grid, kThreads, smem>>>(scratch, col, hi, E);
  CK(cudaDeviceSynchronize());
  std::vector<u32> a(E), b(E);
  CK(cudaMemcpy(a.data(), out_a, E * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), scratch, E * 4, cudaMemcpyDeviceToHost));
  unsigned long long nbad = 0;
  CK(cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost));
  const bool same = std::memcmp(a.data(), b.data(), std::size_t(E) * 4) == 0;
  std::printf("packed form gives the same permutation: %s; packed srcs read back: %s\n", same ? "OK" : "MISMATCH",
              nbad ? "MISMATCH" : "OK");
  micro::report("P2   pass 2, lidx u16 (as the library)", micro::timed([&] { pass2_u16<<<grid, kThreads, smem>>>(scratch, lidx, E); }),
                "10 B/edge");
  micro::report("P2p  pass 2, lidx packed in the src column + u8",
                micro::timed([&] { pass2_packed<<<grid, kThreads, smem>>>(scratch, col, hi, E); }), "13 B/edge");
  micro::report("copy of E x 4 bytes (scale)", micro::timed([&] { CK(cudaMemcpyAsync(out_a, init, E * 4, cudaMemcpyDeviceToDevice)); }),
                "8 B/edge");
  return same && !nbad ? 0 : 1;
}
