// The plan build's CUB passes on packed 8-byte keys instead of 4-byte keys with 8-byte pairs.
//
// Today (products-like, H200, v26 trace): after the fused first pass (the low 6 dst bits), CUB
// sorts the remaining 16 bits in two onesweep passes of (u32 key, 8-byte pair): 24 bytes an edge a
// pass, 1.185 ms; the row offsets then scan the sorted u32 keys (0.086 ms). Packed: key = the
// remaining dst bits at the top, then src, then the edge id (16 + 22 + 26 = 64 bits on
// products-like), sorted keys-only on the top bits: 16 bytes an edge a pass (predicted ~0.79 ms).
// The packed key has no room for the low 6 dst bits, so the row offsets come from an in-degree
// count (atomics on N counters, held in L2) and a scan instead of the sorted keys, and the pairs
// need one unpacking pass (16 bytes an edge) unless the plan's readers take the packed form.
// This micro times each piece on the same synthetic edges and checks the packed result against
// the pairs sort bitwise.
//
// Measured (H200, 2026-12-03, docs/results/h200-v27-packed-sort-micro.txt): A 1.215 ms, B 1.038
// (0.85x for 2/3 of the bytes: CUB's passes are not bound by their bytes alone), C 0.262, the
// in-degree atomics 0.66 against 0.118 for the read alone, the scan 0.02. B + C + D + E = 1.98
// against A + the row-offset scan (~1.30): the packed form loses by ~0.7 ms and was not built.
#include "build_sort_inputs.cuh"

using namespace micro;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

using Pair = SortPair;

__global__ void unpack(u64* keys, i64 E, int ib, u64 smask, u64 imask) {
  for (i64 k = blockIdx.x * i64(blockDim.x) + threadIdx.x; k < E; k += i64(gridDim.x) * blockDim.x) {
    const u64 v = keys[k];
    reinterpret_cast<Pair*>(keys)[k] = Pair{int((v >> ib) & smask), int(v & imask)};
  }
}
__global__ void indegree(const i64* dst, i64 E, u32* deg) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x)
    atomicAdd(deg + dst[e], 1u);
}
__global__ void read_only(const i64* dst, i64 E, u32* sink) {
  u32 acc = 0;
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) acc += u32(dst[e]);
  if (acc == 0xFFFFFFFFu) *sink = acc;
}
__global__ void pack(const u32* keys, const Pair* pairs, u64* out, i64 E, int low, int sb, int ib) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x)
    out[e] = (u64(keys[e]) >> low << (sb + ib)) | (u64(unsigned(pairs[e].src)) << ib) | u64(unsigned(pairs[e].id));
}

int main(int argc, char** argv) {
  const i64 E = edge_count_arg(argc, argv), N = 2449029;
  if (E < 0) return 1;
  const int low = 6, end_bit = 22, sb = 22, ib = 26;
  const BuildSortInputs in = draw_build_sort_inputs(E, N);
  const int blocks = in.blocks;
  const i64 *src = in.src, *dst = in.dst;
  u32 *ka = in.ka, *kb = in.kb, *k0 = in.k0;
  Pair *pa = in.pa, *pb = in.pb, *p0 = in.p0, *ref = in.ref;
  u64 *qa = dalloc<u64>(E), *qb = dalloc<u64>(E), *q0 = dalloc<u64>(E);
  u32 *deg = dalloc<u32>(N + 1), *rp = dalloc<u32>(N + 1), *sink = dalloc<u32>(1);
  int* rp_ref = dalloc<int>(N + 1);
  std::size_t t1 = 0, t2 = 0, t3 = 0;
  {
    cub::DoubleBuffer<u32> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, t1, k, p, u32(E), 0, end_bit));
    cub::DoubleBuffer<u64> q(qa, qb);
    CK(cub::DeviceRadixSort::SortKeys(nullptr, t2, q, u32(E), sb + ib, 64));
    CK(cub::DeviceScan::ExclusiveSum(nullptr, t3, deg, rp, N + 1));
  }
  void* temp = dalloc<char>(i64(std::max({t1, t2, t3})));
  // The first pass's output order: both forms start every sample from it, as in the build.
  first_pass_order(src, dst, E, low, blocks, ka, kb, pa, pb, temp, t1, k0, p0);
  pack<<<blocks, 256>>>(k0, p0, q0, E, low, sb, ib);
  CK(cudaDeviceSynchronize());
  std::printf("packed sort micro: E %lld, N %lld, %d SMs; packed key: rest %d + src %d + id %d bits\n", (long long)E,
              (long long)N, blocks / 8, end_bit - low, sb, ib);
  constexpr int R = 11;  // the first of each is a warm-up
  std::vector<float> ta, tb, tc, td, t0, te;
  const u32* sorted_keys = nullptr;
  for (int r = 0; r < R; ++r) {
    CK(cudaMemcpy(ka, k0, E * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(pa, p0, E * 8, cudaMemcpyDeviceToDevice));
    cub::DoubleBuffer<u32> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    const float ms = once_ms([&] { CK(cub::DeviceRadixSort::SortPairs(temp, t1, k, p, u32(E), low, end_bit)); });
    if (r > 0) ta.push_back(ms);
    CK(cudaMemcpy(ref, p.Current(), E * 8, cudaMemcpyDeviceToDevice));
    sorted_keys = k.Current();
  }
  row_ptr_search<<<blocks, 256>>>(sorted_keys, E, N, rp_ref);
  report("A SortPairs u32 key + 8 B pair, bits [6,22)", ta);
  u64* sorted_q = nullptr;
  for (int r = 0; r < R; ++r) {
    CK(cudaMemcpy(qa, q0, E * 8, cudaMemcpyDeviceToDevice));
    cub::DoubleBuffer<u64> q(qa, qb);
    const float ms = once_ms([&] { CK(cub::DeviceRadixSort::SortKeys(temp, t2, q, u32(E), sb + ib, 64)); });
    if (r > 0) tb.push_back(ms);
    sorted_q = q.Current();
  }
  report("B SortKeys u64 packed, bits [48,64)", tb);
  u64* q_keep = sorted_q == qa ? qb : qa;  // the other buffer keeps a copy for each unpack sample
  CK(cudaMemcpy(q_keep, sorted_q, E * 8, cudaMemcpyDeviceToDevice));
  for (int r = 0; r < R; ++r) {
    CK(cudaMemcpy(sorted_q, q_keep, E * 8, cudaMemcpyDeviceToDevice));
    const float ms = once_ms([&] { unpack<<<blocks, 256>>>(sorted_q, E, ib, (u64(1) << sb) - 1, (u64(1) << ib) - 1); });
    if (r > 0) tc.push_back(ms);
  }
  report("C unpack u64 -> (src, id) in place", tc);
  for (int r = 0; r < R; ++r) {
    const float ms = once_ms([&] {
      CK(cudaMemsetAsync(deg, 0, (N + 1) * 4));
      indegree<<<blocks, 256>>>(dst, E, deg);
    });
    if (r > 0) td.push_back(ms);
  }
  report("D in-degree: memset + atomicAdd a dst (int64)", td);
  for (int r = 0; r < R; ++r) {
    const float ms = once_ms([&] { read_only<<<blocks, 256>>>(dst, E, sink); });
    if (r > 0) t0.push_back(ms);
  }
  report("D0 the same read of dst, no atomics", t0);
  for (int r = 0; r < R; ++r) {
    const float ms = once_ms([&] { CK(cub::DeviceScan::ExclusiveSum(temp, t3, deg, rp, N + 1)); });
    if (r > 0) te.push_back(ms);
  }
  report("E ExclusiveSum of N + 1 degrees", te);
  // Checks: the unpacked pairs equal the pairs sort's, and the scanned degrees its row offsets.
  std::vector<Pair> h1(E), h2(E);
  CK(cudaMemcpy(h1.data(), ref, E * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h2.data(), sorted_q, E * 8, cudaMemcpyDeviceToHost));
  i64 bad = 0;
  for (i64 i = 0; i < E; ++i) bad += h1[i].src != h2[i].src || h1[i].id != h2[i].id;
  std::vector<u32> r1(N + 1);
  std::vector<int> r2(N + 1);
  CK(cudaMemcpy(r1.data(), rp, (N + 1) * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r2.data(), rp_ref, (N + 1) * 4, cudaMemcpyDeviceToHost));
  i64 badr = 0;
  for (i64 i = 0; i <= N; ++i) badr += i64(r1[i]) != i64(r2[i]);
  std::printf("check: %lld of %lld pairs differ, %lld of %lld row offsets differ\n", (long long)bad, (long long)E,
              (long long)badr, (long long)N + 1);
  return bad || badr ? 2 : 0;
}
