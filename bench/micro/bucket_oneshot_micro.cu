// Standalone micro-benchmark (not part of the library build): can a one-shot call sort on 16 key
// bits instead of 22 and sum each bucket of 64 destination rows in shared memory?
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/bucket_oneshot_micro.cu -o bom && ./bom [E]
//
// Data: products-like sizes (N = 2,449,029, E = 61,859,140 unless E is given, F = 64, float32,
// tanh, w per edge), uniform src/dst drawn on the device. Lines are `name  median_ms  (min..max)
// note`, median of 10 after one warm-up.
//
// Why (session 11): the one-shot call is 6.46 ms against issue 3's 6.0: its build 2.45 (init 0.45,
// CUB's three onesweep passes of 12-byte elements for the 22-bit key 1.8, row offsets 0.12) and its
// run ~4.0. Every 22-bit sort measured so far is >= 2.13 ms with the init; a 16-bit key takes two
// passes (build micro A10: 1.58 ms with the init). Sorting dst >> 6 leaves each bucket of 64
// destination rows contiguous, its edges in edge order (the sort is stable), but not the rows
// inside it. Here a warp owns one bucket, keeps its 64 rows' sums in 16 KB of shared memory, and
// walks the bucket's edges in order through a cp.async ring as the staged kernel does (a lane owns
// features 2l and 2l + 1, so an edge is one warp step and two edges never race for a row). No row
// events, no 32-edge blocks: each sum is one float chain in edge order (deterministic).
// Count: the run moves what the staged run moves (x rows 15.8 GB, pairs 0.5, output 0.63), ~4.0
// ms now. Per edge a warp issues the copies (~13 instructions, LI form), two tanh (~36), and a
// shared-memory read-add-write of its float2 (~4) in place of the staged walk's per-stage row
// checks: about the staged kernel's 66 per edge or fewer. Shared memory: 16 KB of sums + the ring
// (S stages x 8 edges x 264 B) a warp, so 8-10 warps an SM against the staged kernel's 32, with
// (S - 1) x 8 rows in flight each. Expect: sort 16 bits ~1.1-1.2 + init ~0.45 + bucket offsets
// ~0.05 + run ~4.0-4.4 = ~5.6-6.1 ms, against 6.46.
// Not here: hub buckets (power-law's rows of 10^5 edges would hold one warp); a production form
// would split a bucket past ~2048 edges into items with partial sums, as the plan splits rows.
//
//   B22  init + CUB SortPairs on 22 bits (the production one-shot's sort), for the same machine
//   K16  init + CUB SortPairs on bits [6, 22) (two passes) + bucket offsets
//   R<S> the bucket run with an S-stage ring (S - 1 stages in flight), W warps a block
// Each run is checked against a float atomic reference (max |a - b| / max |b|).
#include <cub/device/device_radix_sort.cuh>

#include "micro_harness.cuh"

using namespace micro;
constexpr int F = 64, kBucketBits = 6, kRows = 1 << kBucketBits, SE = 8;
int grid_for(i64 n) { return int(std::min<i64>((n + 255) / 256, 65535LL * 32)); }

struct Pair {
  int src;  // src | (dst & 63) << 26 (N < 2^26 here)
  int w;    // float bits
};

__global__ void init_pairs(const i64* src, const i64* dst, const float* w, unsigned* keys, Pair* pairs, i64 E) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const unsigned d = unsigned(dst[e]);
    keys[e] = d;
    pairs[e] = Pair{int(unsigned(src[e]) | ((d & (kRows - 1)) << 26)), __float_as_int(w[e])};
  }
}
// ptr[b] = first position whose key >> shift is >= b, b in [0, B].
__global__ void bucket_search(const unsigned* keys, i64 E, i64 B, int shift, int* ptr) {
  for (i64 b = blockIdx.x * i64(blockDim.x) + threadIdx.x; b <= B; b += i64(gridDim.x) * blockDim.x) {
    i64 lo = 0, hi = E;
    while (lo < hi) {
      const i64 mid = (lo + hi) / 2;
      if (i64(keys[mid] >> shift) < b) lo = mid + 1;
      else hi = mid;
    }
    ptr[b] = int(lo);
  }
}
__global__ void atomic_ref(const i64* src, const i64* dst, const float* w, const float* x, float* out, i64 E) {
  const i64 t = blockIdx.x * i64(blockDim.x) + threadIdx.x;
  const i64 e = t / F;
  if (e >= E) return;
  const int f = int(t % F);
  atomicAdd(out + dst[e] * F + f, tanhf(x[src[e] * F + f] * w[e]));
}

__device__ __forceinline__ void cp16(unsigned s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// One warp per bucket of 64 rows. Shared memory a warp: sums [64][64] floats, then the ring:
// S stages of SE rows [SE][64] floats and SE (local row, w) pairs.
template <int S>
__host__ __device__ constexpr int warp_smem() {
  return (kRows * F + S * SE * F) * 4 + S * SE * 8;
}
template <int S, int W>
__global__ void __launch_bounds__(W * 32) bucket_run(const int* __restrict__ bptr, const Pair* __restrict__ pairs,
                                                     const float* __restrict__ x, float* __restrict__ out, i64 N,
                                                     i64 buckets) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 b = blockIdx.x * i64(W) + wib;
  if (b >= buckets) return;
  float* const acc = reinterpret_cast<float*>(smem + wib * warp_smem<S>());
  float* const ring = acc + kRows * F;
  int2* const meta = reinterpret_cast<int2*>(ring + S * SE * F);
  for (int i = lane; i < kRows * F / 4; i += 32) reinterpret_cast<float4*>(acc)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  const int k0 = bptr[b], n = bptr[b + 1] - k0;
  const Pair* gp = pairs + k0;
  // LI copies: lane copies 16-byte piece (lane & 15) of edge 2c + (lane >> 4), c < SE / 2.
  const unsigned ring_s = static_cast<unsigned>(__cvta_generic_to_shared(ring)) +
                          unsigned(((lane >> 4) * F + (lane & 15) * 4) * 4);
  const char* const xq = reinterpret_cast<const char*>(x + (lane & 15) * 4);
  Pair pnext{0, 0};
  if (lane < SE && lane < n) pnext = gp[lane];
  auto issue = [&](int j) {
    const int kb = j * SE;
    const Pair p = pnext;
    if (lane < SE && kb + SE + lane < n) pnext = gp[kb + SE + lane];
    if (kb < n) {
      const unsigned slot = ring_s + unsigned((j % S) * SE * F * 4);
#pragma unroll
      for (int c = 0; c < SE / 2; ++c) {
        const int e = c * 2 + (lane >> 4);
        const int sr = __shfl_sync(0xffffffffu, p.src, e) & ((1 << 26) - 1);
        if (kb + e < n) cp16(slot + unsigned(c * 2 * F * 4), xq + i64(sr) * (F * 4));
      }
      if (lane < SE && kb + lane < n) meta[(j % S) * SE + lane] = make_int2(int(unsigned(p.src) >> 26), p.w);
    }
    commit();
  };
#pragma unroll
  for (int j = 0; j < S - 1; ++j) issue(j);
  __syncwarp();
  const int steps = (n + SE - 1) / SE;
  for (int j = 0; j < steps; ++j) {
    issue(j + S - 1);
    wait_groups<S - 1>();
    __syncwarp();
    const float* srow = ring + (j % S) * SE * F;
    const int2* sm = meta + (j % S) * SE;
    const int m = min(SE, n - j * SE);
    if (m == SE) {
#pragma unroll
      for (int u = 0; u < SE; u += 4) {
        float2 t[4];
        int loc[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int2 md = sm[u + q];
          const float2 v = reinterpret_cast<const float2*>(srow + (u + q) * F)[lane];
          const float wt = __int_as_float(md.y);
          t[q] = make_float2(tanhf(v.x * wt), tanhf(v.y * wt));
          loc[q] = md.x;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // in edge order: a row hit twice adds in that order
          float2* a = reinterpret_cast<float2*>(acc + loc[q] * F) + lane;
          float2 s = *a;
          s.x += t[q].x;
          s.y += t[q].y;
          *a = s;
        }
      }
    } else {
      for (int u = 0; u < m; ++u) {
        const int2 md = sm[u];
        const float2 v = reinterpret_cast<const float2*>(srow + u * F)[lane];
        const float wt = __int_as_float(md.y);
        float2* a = reinterpret_cast<float2*>(acc + md.x * F) + lane;
        float2 s = *a;
        s.x += tanhf(v.x * wt);
        s.y += tanhf(v.y * wt);
        *a = s;
      }
    }
    __syncwarp();
  }
  wait_groups<0>();
  __syncwarp();
  const i64 r0 = b * kRows;
  const int rows = int(min(i64(kRows), N - r0));
  float4* o = reinterpret_cast<float4*>(out + r0 * F);
  for (int i = lane; i < rows * F / 4; i += 32) o[i] = reinterpret_cast<const float4*>(acc)[i];
}

template <int S, int W>
void run_line(const char* name, const int* bptr, const Pair* pairs, const float* x, float* out, i64 N, i64 B,
              const float* ref, std::vector<float>& host_a, const std::vector<float>& host_ref) {
  const int smem = W * warp_smem<S>();
  CK(cudaFuncSetAttribute(bucket_run<S, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bucket_run<S, W>, W * 32, smem));
  const int grid = int((B + W - 1) / W);
  CK(cudaMemset(out, 0xFF, size_t(N) * F * 4));  // poison
  auto t = timed([&] { bucket_run<S, W><<<grid, W * 32, smem>>>(bptr, pairs, x, out, N, B); });
  CK(cudaMemcpy(host_a.data(), out, host_a.size() * 4, cudaMemcpyDeviceToHost));
  double md = 0, mr = 0;
  for (size_t i = 0; i < host_a.size(); ++i) {
    md = std::max(md, double(std::fabs(host_a[i] - host_ref[i])));
    mr = std::max(mr, double(std::fabs(host_ref[i])));
  }
  char note[160];
  std::snprintf(note, sizeof note, "%d warps an SM, %d rows in flight a warp; max|d|/max|ref| %.2e%s", per_sm * W,
                (S - 1) * SE, md / mr, md / mr < 1e-5 ? "" : "  ** MISMATCH **");
  report(name, t, note);
  (void)ref;
}

int main(int argc, char** argv) {
  const i64 N = 2449029, E = argc > 1 ? std::atoll(argv[1]) : 61859140;
  const i64 B = (N + kRows - 1) / kRows;
  i64 *src, *dst;
  float *w, *x, *out, *ref;
  unsigned *ka, *kb;
  Pair *pa, *pb;
  int* bptr;
  CK(cudaMalloc(&src, E * 8));
  CK(cudaMalloc(&dst, E * 8));
  CK(cudaMalloc(&w, E * 4));
  CK(cudaMalloc(&x, N * F * 4));
  CK(cudaMalloc(&out, N * F * 4));
  CK(cudaMalloc(&ref, N * F * 4));
  CK(cudaMalloc(&ka, E * 4));
  CK(cudaMalloc(&kb, E * 4));
  CK(cudaMalloc(&pa, E * 8));
  CK(cudaMalloc(&pb, E * 8));
  CK(cudaMalloc(&bptr, (B + 1) * 4));
  gen_edges<<<2048, 256>>>(src, dst, w, E, N, 1);
  gen_x<<<2048, 256>>>(x, N * F, 1);
  CK(cudaMemset(ref, 0, N * F * 4));
  atomic_ref<<<int((E * F + 255) / 256), 256>>>(src, dst, w, x, ref, E);
  CK(cudaDeviceSynchronize());
  std::vector<float> host_ref(size_t(N) * F), host_a(size_t(N) * F);
  CK(cudaMemcpy(host_ref.data(), ref, host_ref.size() * 4, cudaMemcpyDeviceToHost));
  std::printf("N=%lld E=%lld F=%d buckets of %d rows: %lld\n", (long long)N, (long long)E, F, kRows, (long long)B);

  size_t temp_bytes = 0;
  {
    cub::DoubleBuffer<unsigned> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k, p, std::uint32_t(E), 0, 22));
  }
  void* temp;
  CK(cudaMalloc(&temp, temp_bytes));
  auto sort = [&](int lo, int hi, cub::DoubleBuffer<unsigned>& k, cub::DoubleBuffer<Pair>& p) {
    init_pairs<<<grid_for(E), 256>>>(src, dst, w, ka, pa, E);
    k = cub::DoubleBuffer<unsigned>(ka, kb);
    p = cub::DoubleBuffer<Pair>(pa, pb);
    size_t tb = temp_bytes;
    CK(cub::DeviceRadixSort::SortPairs(temp, tb, k, p, std::uint32_t(E), lo, hi));
  };
  cub::DoubleBuffer<unsigned> k(ka, kb);
  cub::DoubleBuffer<Pair> p(pa, pb);
  report("B22  init + sort on 22 bits (production's)", timed([&] { sort(0, 22, k, p); }));
  report("K16  init + sort on bits [6, 22)", timed([&] { sort(kBucketBits, 22, k, p); }));
  report("K16p init + sort + bucket offsets", timed([&] {
           sort(kBucketBits, 22, k, p);
           bucket_search<<<grid_for(B + 1), 256>>>(k.Current(), E, B, kBucketBits, bptr);
         }));
  sort(kBucketBits, 22, k, p);
  bucket_search<<<grid_for(B + 1), 256>>>(k.Current(), E, B, kBucketBits, bptr);
  CK(cudaDeviceSynchronize());
  const Pair* sp = p.Current();
  run_line<3, 2>("R3   bucket run, 3-stage ring, 2 warps a block", bptr, sp, x, out, N, B, ref, host_a, host_ref);
  run_line<5, 2>("R5   bucket run, 5-stage ring, 2 warps a block", bptr, sp, x, out, N, B, ref, host_a, host_ref);
  run_line<8, 2>("R8   bucket run, 8-stage ring, 2 warps a block", bptr, sp, x, out, N, B, ref, host_a, host_ref);
  run_line<5, 1>("R5w1 bucket run, 5-stage ring, 1 warp a block", bptr, sp, x, out, N, B, ref, host_a, host_ref);
  run_line<12, 1>("R12w1 bucket run, 12-stage ring, 1 warp a block", bptr, sp, x, out, N, B, ref, host_a, host_ref);
  return 0;
}
