// Standalone micro-benchmark (not part of the library build): can a one-shot call lay its edges
// out by destination with a counting scatter instead of a radix sort?
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/scatter_build_micro.cu -o sbm && ./sbm
//
// Why (session 12): the one-shot call is 6.46-6.57 ms against issue 3's 6.0, and its build (init,
// CUB's three onesweep passes of 12-byte elements, row offsets) is 2.40 of it; every sort-based
// form measured since session 5 stayed >= 2.13 ms, and its transient memory is 24 B an edge
// against issue 4's 12. The run after it needs only each row's (src, w) pairs contiguous: not
// their order. A counting scatter gives that in two passes over the indices:
//   H: count[dst[e]] += 1 (int32 atomics on 2.45M counters, ~10 MB: L2-resident)
//   S: row_ptr = exclusive scan of count (CUB)
//   P: pos = row_ptr[d] + atomicSub(&count[d], 1) - 1; pairs[pos] = {src, w} (leaves count at 0)
// Count: H reads dst (8 B an edge, int64), P reads src, dst, w (20 B) and writes 8 B to a random
// place: ~1.8 GB at least, ~0.45 ms at the copy rate, plus 2 x 62M L2 atomics and the partial
// 8-byte writes into 32-byte sectors (the unknowns). Memory: the pairs and two N-int arrays,
// ~8.3 B an edge on products-like.
// The catch: the order inside a row follows the atomics, so the run's sums are not bitwise
// repeatable (within the contract's tolerance, like the lean path), unlike today's one-shot.
//
//   PB   production's build: init (keys, {src, w} pairs) + CUB SortPairs on 22 / 21 bits + row offsets
//   HS   H + S + P, one atomic an edge in each pass
//   HSm  the same with warp-aggregated atomics (match_any: one atomic per distinct destination a
//        warp), for power-law's hub rows
// Checked against PB: the same row_ptr, and each row the same multiset of pairs (a per-row hash).
//
// Measured on the H200 (session 12, 2026-12-01; docs/results/h200-v15-scatter-build-micro.txt),
// correct on both graphs but far slower: products-like PB 2.446, HS 7.98, HSm 8.13 ms (the count
// pass alone 0.72); power-law PB 2.446, HS 6.33, HSm 6.25 (count alone 1.78: the hub rows'
// atomics). The place pass's returning atomics and random 8-byte writes cost ~6-7 ms. Dead.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "micro_harness.cuh"

using namespace micro;
int grid_for(i64 n) { return int(std::min<i64>((n + 255) / 256, 65535LL * 32)); }

struct Pair {
  int src;
  int w;  // float bits
};

__global__ void init_pairs(const i64* src, const i64* dst, const float* w, unsigned* keys, Pair* pairs, i64 E, i64 N,
                           unsigned long long* bad) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const i64 s = src[e], d = dst[e];
    if (std::uint64_t(s) >= std::uint64_t(N) || std::uint64_t(d) >= std::uint64_t(N)) atomicMin(bad, (unsigned long long)e);
    keys[e] = unsigned(d);
    pairs[e] = Pair{int(s), __float_as_int(w[e])};
  }
}

// H: counts, with the index check (a bad edge is not counted; its position is reported).
template <bool M>
__global__ void count_kernel(const i64* src, const i64* dst, i64 E, i64 N, int* cnt, unsigned long long* bad) {
  const unsigned lane = threadIdx.x & 31u, below = (1u << lane) - 1u;
  const i64 stride = i64(gridDim.x) * blockDim.x;
  // Whole-warp trips so that match_any sees every lane.
  for (i64 e0 = (blockIdx.x * i64(blockDim.x) + threadIdx.x) - lane; e0 < E; e0 += stride) {
    const i64 e = e0 + lane;
    i64 d = -1;
    if (e < E) {
      const i64 s = src[e];
      d = dst[e];
      if (std::uint64_t(s) >= std::uint64_t(N) || std::uint64_t(d) >= std::uint64_t(N)) {
        atomicMin(bad, (unsigned long long)e);
        d = -1;
      }
    }
    if constexpr (M) {
      const unsigned peers = __match_any_sync(0xffffffffu, d);
      if (d >= 0 && (peers & below) == 0) atomicAdd(cnt + d, __popc(peers));
    } else {
      if (d >= 0) atomicAdd(cnt + d, 1);
    }
  }
}

// P: each edge to its row's next free slot from the end.
template <bool M>
__global__ void place_kernel(const i64* src, const i64* dst, const float* w, i64 E, i64 N, const int* row_ptr,
                             int* cnt, Pair* pairs) {
  const unsigned lane = threadIdx.x & 31u, below = (1u << lane) - 1u;
  const i64 stride = i64(gridDim.x) * blockDim.x;
  for (i64 e0 = (blockIdx.x * i64(blockDim.x) + threadIdx.x) - lane; e0 < E; e0 += stride) {
    const i64 e = e0 + lane;
    i64 d = -1, s = 0;
    if (e < E) {
      s = src[e];
      d = dst[e];
      if (std::uint64_t(s) >= std::uint64_t(N) || std::uint64_t(d) >= std::uint64_t(N)) d = -1;
    }
    int pos = 0;
    if constexpr (M) {
      const unsigned peers = __match_any_sync(0xffffffffu, d);
      const int leader = __ffs(peers) - 1, rank = __popc(peers & below);
      int top = 0;
      if (d >= 0 && rank == 0) top = atomicSub(cnt + d, __popc(peers));
      top = __shfl_sync(0xffffffffu, top, leader);
      pos = top - 1 - rank;
    } else {
      if (d >= 0) pos = atomicSub(cnt + d, 1) - 1;
    }
    if (d >= 0) pairs[row_ptr[d] + pos] = Pair{int(s), __float_as_int(w[e])};
  }
}

// Per-row hash of the multiset of pairs (sum of a mix of each pair), host side.
static std::uint64_t hpair(const Pair& p) {
  std::uint64_t z = (std::uint64_t(std::uint32_t(p.src)) << 32) | std::uint32_t(p.w);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void lines(const char* label, const i64* src, const i64* dst, const float* w, i64 N, i64 E, int end_bit) {
  unsigned *ka, *kb;
  Pair *pa, *pb, *out;
  int *rp_ref, *rp, *cnt;
  unsigned long long* bad;
  CK(cudaMalloc(&ka, E * 4));
  CK(cudaMalloc(&kb, E * 4));
  CK(cudaMalloc(&pa, E * 8));
  CK(cudaMalloc(&pb, E * 8));
  CK(cudaMalloc(&out, E * 8));
  CK(cudaMalloc(&rp_ref, (N + 1) * 4));
  CK(cudaMalloc(&rp, (N + 1) * 4));
  CK(cudaMalloc(&cnt, (N + 1) * 4));
  CK(cudaMalloc(&bad, 8));
  std::size_t tb_sort = 0, tb_scan = 0;
  {
    cub::DoubleBuffer<unsigned> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, tb_sort, k, p, std::uint32_t(E), 0, end_bit));
    CK(cub::DeviceScan::ExclusiveSum(nullptr, tb_scan, cnt, rp, int(N + 1)));
  }
  void *tsort, *tscan;
  CK(cudaMalloc(&tsort, tb_sort));
  CK(cudaMalloc(&tscan, tb_scan));
  cub::DoubleBuffer<unsigned> k(ka, kb);
  cub::DoubleBuffer<Pair> p(pa, pb);
  auto production = [&] {
    CK(cudaMemsetAsync(bad, 0xFF, 8));
    init_pairs<<<grid_for(E), 256>>>(src, dst, w, ka, pa, E, N, bad);
    k = cub::DoubleBuffer<unsigned>(ka, kb);
    p = cub::DoubleBuffer<Pair>(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(tsort, tb_sort, k, p, std::uint32_t(E), 0, end_bit));
    row_ptr_search<<<grid_for(N + 1), 256>>>(k.Current(), E, N, rp_ref);
  };
  auto scatter = [&](auto count, auto place) {
    return [&, count, place] {
      CK(cudaMemsetAsync(bad, 0xFF, 8));
      CK(cudaMemsetAsync(cnt, 0, (N + 1) * 4));
      count<<<grid_for(E), 256>>>(src, dst, E, N, cnt, bad);
      CK(cub::DeviceScan::ExclusiveSum(tscan, tb_scan, cnt, rp, int(N + 1)));
      place<<<grid_for(E), 256>>>(src, dst, w, E, N, rp, cnt, out);
    };
  };
  production();
  CK(cudaDeviceSynchronize());
  std::vector<Pair> ref(E), got(E);
  std::vector<int> ref_rp(N + 1), got_rp(N + 1);
  CK(cudaMemcpy(ref.data(), p.Current(), E * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ref_rp.data(), rp_ref, (N + 1) * 4, cudaMemcpyDeviceToHost));
  std::vector<std::uint64_t> ref_h(N, 0);
  i64 largest = 0;
  for (i64 r = 0; r < N; ++r) {
    largest = std::max<i64>(largest, ref_rp[r + 1] - ref_rp[r]);
    for (int i = ref_rp[r]; i < ref_rp[r + 1]; ++i) ref_h[r] += hpair(ref[i]);
  }
  std::printf("%s: N=%lld E=%lld, largest row %lld edges\n", label, (long long)N, (long long)E, (long long)largest);
  char name[96];
  std::snprintf(name, sizeof name, "PB   %s: init + CUB on %d bits + row offsets", label, end_bit);
  report(name, timed(production));
  auto check_and_time = [&](const char* tag, const std::function<void()>& f) {
    CK(cudaMemset(out, 0xFF, E * 8));
    CK(cudaMemset(rp, 0xFF, (N + 1) * 4));
    f();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    CK(cudaMemcpy(got.data(), out, E * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got_rp.data(), rp, (N + 1) * 4, cudaMemcpyDeviceToHost));
    i64 bad_rp = 0, bad_rows = 0;
    for (i64 r = 0; r <= N; ++r) bad_rp += got_rp[r] != ref_rp[r];
    if (!bad_rp)
      for (i64 r = 0; r < N; ++r) {
        std::uint64_t h = 0;
        for (int i = got_rp[r]; i < got_rp[r + 1]; ++i) h += hpair(got[i]);
        bad_rows += h != ref_h[r];
      }
    char note[128];
    std::snprintf(note, sizeof note, "%lld row offsets and %lld rows' pairs differ%s", (long long)bad_rp,
                  (long long)bad_rows, bad_rp || bad_rows ? "  ** MISMATCH **" : "");
    std::snprintf(name, sizeof name, "%s %s", tag, label);
    report(name, timed(f), note);
  };
  check_and_time("HS  ", scatter(count_kernel<false>, place_kernel<false>));
  check_and_time("HSm ", scatter(count_kernel<true>, place_kernel<true>));
  {  // the passes alone (uniform atomics)
    std::snprintf(name, sizeof name, "H    %s: the count pass alone", label);
    report(name, timed([&] { count_kernel<false><<<grid_for(E), 256>>>(src, dst, E, N, cnt, bad); }));
  }
  CK(cudaFree(ka));
  CK(cudaFree(kb));
  CK(cudaFree(pa));
  CK(cudaFree(pb));
  CK(cudaFree(out));
  CK(cudaFree(rp_ref));
  CK(cudaFree(rp));
  CK(cudaFree(cnt));
  CK(cudaFree(bad));
  CK(cudaFree(tsort));
  CK(cudaFree(tscan));
}

// R-MAT edges as src/core/graph.cpp's rmat_graph draws them (quadrants a, b, c, d; row = src,
// column = dst; no relabelling), from splitmix64 hashes instead of its generator.
__global__ void gen_rmat(i64* src, i64* dst, float* w, i64 E, int scale, double a, double b, double c,
                         std::uint64_t seed) {
  const auto th = [](double p) { return std::uint64_t(p * 4294967296.0); };
  const std::uint64_t ta = th(a), tab = th(a + b), tabc = th(a + b + c);
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    std::uint64_t row = 0, col = 0;
    for (int level = 0; level < scale; ++level) {
      const std::uint64_t r = mix(seed * 13 + std::uint64_t(e) * 64 + level) & 0xffffffffu;
      const bool pa = r >= ta, pb = r >= tab, pc = r >= tabc;
      row = (row << 1) | std::uint64_t(pb);
      col = (col << 1) | std::uint64_t(pa ^ pb ^ pc);
    }
    src[e] = i64(row);
    dst[e] = i64(col);
    w[e] = 2.f * unit(mix(seed * 7 + 2 + std::uint64_t(e))) - 1.f;
  }
}

int main() {
  const i64 N = 2449029, E = 61859140;
  i64 *src, *dst;
  float* w;
  CK(cudaMalloc(&src, E * 8));
  CK(cudaMalloc(&dst, E * 8));
  CK(cudaMalloc(&w, E * 4));
  gen_edges<<<2048, 256>>>(src, dst, w, E, N, 1);
  CK(cudaDeviceSynchronize());
  lines("products-like", src, dst, w, N, E, 22);
  CK(cudaFree(src));
  CK(cudaFree(dst));
  CK(cudaFree(w));
  const i64 Np = i64(1) << 21, Ep = 63000000;
  CK(cudaMalloc(&src, Ep * 8));
  CK(cudaMalloc(&dst, Ep * 8));
  CK(cudaMalloc(&w, Ep * 4));
  gen_rmat<<<2048, 256>>>(src, dst, w, Ep, 21, 0.57, 0.19, 0.19, 1);
  CK(cudaDeviceSynchronize());
  lines("power-law", src, dst, w, Np, Ep, 21);
  return 0;
}
