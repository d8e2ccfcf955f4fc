#pragma once
// Shared by the build-sort micros (packed_sort_micro.cu, onesweep_tuning_micro.cu): the plan
// build's sort input as its fused first pass leaves it, (u32 dst key, (src, edge id) pair) stable
// on the low `low` dst bits, made once by CUB and untimed, so every timed sample starts from the
// order the build's CUB passes see.
#include <cub/cub.cuh>

#include "micro_harness.cuh"

namespace micro {

struct SortPair {
  int src, id;
};

__global__ void init_sort_pairs(const i64* src, const i64* dst, unsigned* keys, SortPair* pairs, i64 E) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    keys[e] = unsigned(dst[e]);
    pairs[e] = SortPair{int(src[e]), int(e)};
  }
}

/// products-like's edges drawn (seed 1) and the sort buffers both micros use.
struct BuildSortInputs {
  i64 E, N;
  int blocks;
  i64 *src, *dst;
  unsigned *ka, *kb, *k0;
  SortPair *pa, *pb, *p0, *ref;
};
inline BuildSortInputs draw_build_sort_inputs(i64 E, i64 N) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  BuildSortInputs in{E, N, sms * 8, dalloc<i64>(E), dalloc<i64>(E), dalloc<unsigned>(E), dalloc<unsigned>(E),
                     dalloc<unsigned>(E), dalloc<SortPair>(E), dalloc<SortPair>(E), dalloc<SortPair>(E), dalloc<SortPair>(E)};
  float* w = dalloc<float>(E);
  gen_edges<<<in.blocks, 256>>>(in.src, in.dst, w, E, N, 1);
  CK(cudaDeviceSynchronize());
  CK(cudaFree(w));
  return in;
}

/// Keys and pairs of (src, dst) into (k0, p0), stable on the low `low` bits of dst; ka, kb, pa, pb
/// and temp (at least CUB's temp bytes for E pairs) are scratch.
inline void first_pass_order(const i64* src, const i64* dst, i64 E, int low, int blocks, unsigned* ka, unsigned* kb,
                             SortPair* pa, SortPair* pb, void* temp, std::size_t temp_bytes, unsigned* k0, SortPair* p0) {
  init_sort_pairs<<<blocks, 256>>>(src, dst, ka, pa, E);
  cub::DoubleBuffer<unsigned> k(ka, kb);
  cub::DoubleBuffer<SortPair> p(pa, pb);
  CK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, k, p, unsigned(E), 0, low));
  CK(cudaMemcpy(k0, k.Current(), E * 4, cudaMemcpyDeviceToDevice));
  CK(cudaMemcpy(p0, p.Current(), E * 8, cudaMemcpyDeviceToDevice));
}

}  // namespace micro
