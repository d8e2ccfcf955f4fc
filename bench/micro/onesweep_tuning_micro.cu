// CUB's onesweep passes of the plan build, (u32 key, 8-byte pair) over bits [6, 22), under other
// tunings than CCCL's sm_90 default for this type (384 threads, nominal 30 four-byte items a
// thread, 15 at 8 bytes: OnesweepPolicyKey32 in tuning_radix_sort.cuh; CUB tuned its small keys
// per size, not this one). One configuration a binary (TH, IT, RK as macros: the block threads,
// the nominal items, 0 for RADIX_RANK_MATCH_EARLY_COUNTS_ANY and 1 for ..._ATOMIC_OR), so that a
// sweep compiles on every core. The same sort (stable, the same bits), so the pairs must equal the
// default's bitwise: each binary checks that.
//   for c in 384:30:0 384:24:0 ...; do IFS=: read t i r <<<"$c"; nvcc ... -DTH=$t -DIT=$i -DRK=$r; done
// Measured (H200, 2026-12-03, docs/results/h200-v27-onesweep-tuning.txt; the default 1.210-1.213
// ms in every binary): 384 x 15 (the default's own policy) 1.209, 448 x 13 1.209, 384 x 15 with
// the atomic-or rank 1.223, 256 x 15 1.271, 512 x 10 1.278, 384 x 10 1.269, 256 x 20 1.290,
// 384 x 12 1.336, 256 x 12 1.340; every larger tile (352 x 18, 512 x 12 and 15, 320 x 20) fails
// ptxas: the onesweep kernel's static shared memory is capped at 48 KB. The default is as fast as
// any tuning that compiles: not taken into the build.
#include "build_sort_inputs.cuh"

#ifndef TH
#define TH 384
#endif
#ifndef IT
#define IT 30
#endif
#ifndef RK
#define RK 0
#endif

using namespace micro;
using u32 = std::uint32_t;

using Pair = SortPair;

using Base = cub::detail::radix::policy_hub<u32, Pair, u32>::Policy900;
struct Hub {
  struct Policy : cub::ChainedPolicy<900, Policy, Policy> {
    static constexpr bool ONESWEEP = true;
    static constexpr int ONESWEEP_RADIX_BITS = 8;
    using HistogramPolicy = Base::HistogramPolicy;
    using ExclusiveSumPolicy = Base::ExclusiveSumPolicy;
    using OnesweepPolicy = cub::AgentRadixSortOnesweepPolicy<
        TH, IT, Pair, 1, RK == 0 ? cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY : cub::RADIX_RANK_MATCH_EARLY_COUNTS_ATOMIC_OR,
        cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT, 8>;
    using ScanPolicy = Base::ScanPolicy;
    using DownsweepPolicy = Base::DownsweepPolicy;
    using AltDownsweepPolicy = Base::AltDownsweepPolicy;
    using UpsweepPolicy = Base::UpsweepPolicy;
    using AltUpsweepPolicy = Base::AltUpsweepPolicy;
    using SingleTilePolicy = Base::SingleTilePolicy;
    using SegmentedPolicy = Base::SegmentedPolicy;
    using AltSegmentedPolicy = Base::AltSegmentedPolicy;
  };
  using MaxPolicy = Policy;
};
using Tuned = cub::DispatchRadixSort<cub::SortOrder::Ascending, u32, Pair, u32, cub::detail::identity_decomposer_t, Hub>;


int main(int argc, char** argv) {
  const i64 E = edge_count_arg(argc, argv), N = 2449029;
  if (E < 0) return 1;
  const int low = 6, end_bit = 22;
  const BuildSortInputs in = draw_build_sort_inputs(E, N);
  const int blocks = in.blocks;
  const i64 *src = in.src, *dst = in.dst;
  u32 *ka = in.ka, *kb = in.kb, *k0 = in.k0;
  Pair *pa = in.pa, *pb = in.pb, *p0 = in.p0, *ref = in.ref;
  std::size_t t1 = 0, t2 = 0;
  {
    cub::DoubleBuffer<u32> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, t1, k, p, u32(E), 0, end_bit));
    CK(Tuned::Dispatch(nullptr, t2, k, p, u32(E), low, end_bit, true, 0));
  }
  void* temp = dalloc<char>(i64(std::max(t1, t2)));
  // The first pass's order (stable on the low 6 bits), untimed; every sample starts from it.
  first_pass_order(src, dst, E, low, blocks, ka, kb, pa, pb, temp, std::max(t1, t2), k0, p0);
  using OP = Hub::Policy::OnesweepPolicy;
  std::vector<float> td, tt;
  Pair* out = nullptr;
  for (int r = 0; r < 23; ++r) {  // interleaved, the first of each a warm-up
    const bool tuned = r % 2;
    CK(cudaMemcpy(ka, k0, E * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(pa, p0, E * 8, cudaMemcpyDeviceToDevice));
    cub::DoubleBuffer<u32> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    const float ms = once_ms([&] {
      if (tuned) CK(Tuned::Dispatch(temp, t2, k, p, u32(E), low, end_bit, true, 0));
      else CK(cub::DeviceRadixSort::SortPairs(temp, t1, k, p, u32(E), low, end_bit));
    });
    if (r >= 2) (tuned ? tt : td).push_back(ms);
    if (r == 0) CK(cudaMemcpy(ref, p.Current(), E * 8, cudaMemcpyDeviceToDevice));
    out = p.Current();
  }
  char name[96];
  std::snprintf(name, sizeof name, "tuned TH %d IT %d RK %d: %d threads x %d items", TH, IT, RK, int(OP::BLOCK_THREADS),
                int(OP::ITEMS_PER_THREAD));
  report("default SortPairs", td, "", 56);
  report(name, tt, "", 56);
  std::vector<Pair> h1(E), h2(E);
  CK(cudaMemcpy(h1.data(), ref, E * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h2.data(), out, E * 8, cudaMemcpyDeviceToHost));
  i64 bad = 0;
  for (i64 i = 0; i < E; ++i) bad += h1[i].src != h2[i].src || h1[i].id != h2[i].id;
  std::printf("check: %lld of %lld pairs differ\n", (long long)bad, (long long)E);
  return bad ? 2 : 0;
}
