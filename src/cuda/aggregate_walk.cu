// The planned run's walk: the register walk (csr_rows_kernel), the staged walk through shared
// memory (staged_rows_kernel: float32, F = 64), the split rows' segments and their combine, and
// the launches that pick among them. A translation unit of its own (perf-notes v53): the walk is
// ~65% of the aggregate's SASS, and its plan arrives as plain fields (agg::WalkPlan), filled by
// CudaPlan in aggregate.cu. Shared internals: aggregate_common.cuh.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/aggregate_common.cuh"
#include "cuda/check.cuh"
#include "cuda/knobs.hpp"
#include "cuda/memory.cuh"
#include "pipelink/error.hpp"

namespace pipelink::cuda {
namespace agg {
namespace {

using namespace knobs;  // cuda/knobs.hpp: the PIPELINK_AGG_* knobs and their defaults

using detail::DeviceBuffer;

// The planned run, v5: a group of `lpe` lanes (F = 64 float32: 16 lanes x one float4, two
// groups per warp) owns a group of consecutive rows of ~C edges (balanced by edge count, and by
// rows too with PIPELINK_AGG_ROWS_PER_EDGE: see group_rows_kernel) and walks their edges as one stream: lpe edges' (src, id) pairs
// per load, one per lane, broadcast by shuffles; U rows gathered before any is used. Each row is
// summed in edge order: float within blocks of 32 edges, blocks added in double. The order
// depends on the plan only, so the output is bitwise deterministic (and the same for any C or
// grid). Rows longer than kLongRow edges are skipped here and summed by segments_kernel.
// v2 (a warp per row, 8 rows in flight) took 7.2 ms on products-like; the flat walk 6.0 ms in
// bench/micro/aggregate_micro.cu (a pure 256-byte row gather of the same edges: 3.3-3.7 ms).
template <class T, class P, int VEC, int CH>
__global__ void __launch_bounds__(256) csr_rows_kernel(const P* __restrict__ row_ptr, const P* __restrict__ first_row,
                                                       const PlanPair<P>* __restrict__ pairs, const T* __restrict__ x,
                                                       std::int64_t xs, const T* __restrict__ w, T* __restrict__ out,
                                                       std::int64_t os, std::int64_t groups, std::int64_t F, int lpe,
                                                       int transform, bool accumulate, std::int64_t long_row,
                                                       int src_bits, int wmode) {
  constexpr int U = 4;
  const int lane = threadIdx.x % 32, gl = lane % lpe;
  const unsigned gm = lpe == 32 ? 0xffffffffu : ((1u << lpe) - 1u) << (lane / lpe * lpe);
  const std::int64_t g = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / lpe;
  if (g >= groups) return;
  const std::int64_t r0 = first_row[g], r1 = first_row[g + 1];
  if (r0 >= r1) return;
  const std::int64_t kbase = row_ptr[r0];
  const P n = P(std::int64_t(row_ptr[r1]) - kbase);  // this group's edges, relative to kbase
  const std::int64_t tile = std::int64_t(lpe) * VEC * CH;
  for (std::int64_t f0 = 0; f0 < F; f0 += tile) {
    // Row ends (relative), lpe rows at a time, one per lane.
    std::int64_t r = r0, rbase = r0;
    P my_end = rbase + gl < r1 ? P(std::int64_t(row_ptr[rbase + gl + 1]) - kbase) : n;
    P rbeg = 0, rend = __shfl_sync(gm, my_end, 0, lpe);
    T part[CH][VEC];
    double acc[CH][VEC];
    auto reset = [&] {  // a row's sums start at 0 (here, and after each row is written)
#pragma unroll
      for (int j = 0; j < CH; ++j)
#pragma unroll
        for (int q = 0; q < VEC; ++q) {
          part[j][q] = T(0);
          acc[j][q] = 0.0;
        }
    };
    reset();
    auto next_row = [&] {
      ++r;
      if (r - rbase >= lpe) {
        rbase = r;
        my_end = rbase + gl < r1 ? P(std::int64_t(row_ptr[rbase + gl + 1]) - kbase) : n;
      }
      rbeg = rend;
      rend = __shfl_sync(gm, my_end, int(r - rbase), lpe);
    };
    auto write_row = [&] {  // row r's sum (empty rows: 0, or unchanged when accumulating)
      const bool blocked = rend - rbeg > 32;
      if (!(accumulate && rend == rbeg)) {
        T* o = out + r * os;
#pragma unroll
        for (int j = 0; j < CH; ++j) {
          const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
#pragma unroll
          for (int q = 0; q < VEC; ++q) {
            if (f + q >= F) break;
            const double sum = blocked ? acc[j][q] + double(part[j][q]) : double(part[j][q]);
            o[f + q] = blocked ? T(accumulate ? double(o[f + q]) + sum : sum)
                               : (accumulate ? T(o[f + q] + part[j][q]) : part[j][q]);
          }
        }
      }
      reset();
    };
    auto settle = [&] {  // past empty rows (written) and long rows (left to segments_kernel)
      while (r < r1 && (rend == rbeg || std::int64_t(rend - rbeg) > long_row)) {
        if (rend == rbeg) write_row();
        next_row();
      }
    };
    settle();
    P k0 = rbeg;
    while (r < r1) {
      const P cn = n - k0 < P(lpe) ? n - k0 : P(lpe);
      std::int64_t my_src = 0;
      T my_w = T(1);
      if (P(gl) < cn) {
        const PlanPair<P> e = load_pair(pairs, kbase + std::int64_t(k0) + gl, wmode);
        my_src = pair_src(e, src_bits);
        if (w) my_w = edge_weight(w, wmode, kbase + std::int64_t(k0) + gl, e, src_bits);
      }
      bool jumped = false;
      for (int t0 = 0; t0 < int(cn) && !jumped; t0 += U) {
        T v[U][CH][VEC];
#pragma unroll
        for (int u = 0; u < U; ++u) {  // issue U rows' loads before using any of them
          const std::int64_t sr = __shfl_sync(gm, my_src, (t0 + u) % lpe, lpe);
          const bool live = t0 + u < int(cn);
#pragma unroll
          for (int j = 0; j < CH; ++j) {
            const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
            if (live && f < F) load_vec<T, VEC>(x + sr * xs + f, v[u][j]);
            else
#pragma unroll
              for (int q = 0; q < VEC; ++q) v[u][j][q] = T(0);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const T wt = __shfl_sync(gm, my_w, (t0 + u) % lpe, lpe);
          if (t0 + u < int(cn) && !jumped) {
            const P k = k0 + P(t0 + u);
#pragma unroll
            for (int j = 0; j < CH; ++j)
#pragma unroll
              for (int q = 0; q < VEC; ++q) part[j][q] += phi(v[u][j][q] * wt, transform);
            if (((k - rbeg + 1) & 31) == 0 && k + 1 < rend) {  // a full 32-edge block inside the row
#pragma unroll
              for (int j = 0; j < CH; ++j)
#pragma unroll
                for (int q = 0; q < VEC; ++q) {
                  acc[j][q] += double(part[j][q]);
                  part[j][q] = T(0);
                }
            }
            if (k + 1 == rend) {
              write_row();
              next_row();
              settle();
              // Long rows skipped: continue at their end; past the group's last row: stop.
              jumped = r >= r1 || rbeg != k + 1;
            }
          }
        }
      }
      k0 = jumped ? rbeg : k0 + cn;
    }
  }
}

// ---- planned run, v6/v7: staged rows ---------------------------------------------------------
// The common case (float32, F = 64, a 32-bit plan, 16-byte aligned x rows, unit column stride):
// a warp owns a group's rows as csr_rows_kernel's lane groups do, but copies the x rows and w of
// kStageEdges edges at a time into a per-warp ring of kStages shared-memory stages with cp.async,
// and sums stage j while the next ones are in flight. In-flight rows hold no registers (ptxas,
// sm_90: 59 per thread under __launch_bounds__(64, 16), against csr_rows_kernel's 80), so
// occupancy is set by shared memory: 32 warps per SM, each with two
// stages (16 rows) in flight. A lane owns features 2l and 2l+1, so row changes are warp-uniform
// and each output row is one coalesced 256-byte store. Rows of up to kLongRow edges are summed
// in the same order as csr_rows_kernel sums them (float within 32-edge blocks, blocks in double);
// longer rows and segments in that order too, which differs from segments_kernel's shuffle tree,
// so their bits depend on the path taken (each path is bitwise deterministic).
// bench/micro/aggregate_micro.cu, products-like on the H200 (same run): 5.36-5.41 ms against
// 7.28 ms for the register-held walk; stages of 16 edges (16 warps/SM) 5.93, of 32 edges 10.3+.
// Production at 5a2ae4ed6a8c: products-like 6.97 (v5 kernels, A/B) -> 5.76 ms; v7 (fast stages,
// 2-warp blocks) at 3dafadb3b78a: 5.30 ms, power-law 7.84 -> 6.04 ms.
// Warps per block: the warps share nothing, but a block keeps its shared memory until its slowest
// warp ends. ncu on power-law with 8 warps per block: 27% achieved occupancy against 50%
// theoretical (a warp with a 2048-edge segment holds seven finished ones' stages); 2 warps per
// block keep the SM at 32 warps (16 blocks of 12.5 KB plus the driver's 1 KB each). 1-warp
// blocks (32 of 7.3 KB, largest carveout) were no faster (A/B in one process at d170973:
// products-like 5.70 vs 5.67 ms, power-law 5.97 vs 6.00 ms) and were dropped.
// The walk, v8 (A/B at d170973, interleaved medians of 10): each stage keeps the next "event" --
// a 32-edge block end inside the row (flush to double) or the row's end -- as one edge position,
// so an edge of a stage that is not fast costs one comparison instead of the row and block tests
// of v7. power-law 6.00 -> 5.68 ms; products-like 5.35 ms against v7's 5.30 in the main table
// (no measured difference). Same adds in the same order as v7, so the same bits.
constexpr int kStageEdges = 8, kStages = 3, kStagedWarps = 2, kStagedF = 64;
constexpr int staged_smem_bytes(int warps) { return warps * kStages * kStageEdges * (kStagedF + 1) * int(sizeof(float)); }

// cp.async exists from sm_80 on; staged_fits() keeps older devices off this kernel, and a build
// for an older architecture compiles it to a trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define PIPELINK_NO_CP_ASYNC 1
#endif
// To a shared-window address (the staged kernel's LI copies compute it once per lane).
__device__ __forceinline__ void cp_async16_s(unsigned smem, const void* gmem) {
#ifdef PIPELINK_NO_CP_ASYNC
  __trap();
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem), "l"(gmem) : "memory");
#endif
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  cp_async16_s(static_cast<unsigned>(__cvta_generic_to_shared(smem)), gmem);
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
#ifdef PIPELINK_NO_CP_ASYNC
  __trap();
#else
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(gmem) : "memory");
#endif
}
__device__ __forceinline__ void cp_commit() {
#ifndef PIPELINK_NO_CP_ASYNC
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_wait() {
#ifndef PIPELINK_NO_CP_ASYNC
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// ISSUE 3's shared addresses: `hold` hides how a value was computed, so that ptxas keeps it in a
// register instead of recomputing it where it is used (it rebuilt the warp's shared base from
// SR_CgaCtaId in every stage); the loads take such addresses directly.
__device__ __forceinline__ void hold(unsigned& v) { asm volatile("mov.u32 %0, %0;" : "+r"(v)); }
__device__ __forceinline__ float2 lds_f2(unsigned a) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ float lds_f(unsigned a) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}

// The transform as a compile-time constant: a runtime switch per element costs the staged
// kernel its instruction-level parallelism (eight independent tanh chains per lane).
template <int TR>
__device__ __forceinline__ float phi_c(float v) {
  if constexpr (TR == 0) return v;
  else if constexpr (TR == 1) return tanh_f32(v);
  else if constexpr (TR == 2)
    return v < 0.f ? 0.f : v;  // NaN stays NaN (H200, v46: this form missed it)
  else if constexpr (TR == 3) return sigmoid_f32(v);
  else return tanhf(v);  // TR 4: tanhf itself, for the A/B of PIPELINK_AGG_TANH=libm
}

// Work items: warps [0, num_split) take one segment of a split row each (seg_len edges; its
// double sum goes to partial[item], added per row in segment order by combine_segments_kernel),
// the others one group of rows each. Launched heaviest first where the plan built an order
// (split or long rows, PIPELINK_AGG_ITEM_ORDER=weight, the default since v41; see order_items),
// else segments first: either way hub rows start early and run beside the row groups in one
// launch (power-law: 22.8% of the edges lie in 1758 split rows).
// LI (the default since v12; PIPELINK_AGG_STAGED_ISSUE=0 selects the wide-address copies, which
// also serve row strides of 2^29 floats or more, and negative ones by default): a stage's copies from addresses whose per-lane
// parts are computed once. The wide-address issue (SASS, sm_90, tanh, from
// one LDGDEPBAR to the next) is 165 instructions for a stage's 8 edges, ~20 of the 66-68 per edge
// that ncu counted (v11, the kernel issue-bound at 90%): per 16-byte copy it reloads x and xs
// from the constant bank, converts the shared pointer (S2R + LEA), multiplies src by the 64-bit
// stride in three IMADs and scales it by 4 in two LEAs. LI keeps a shared address and an x
// address per lane and the row stride in bytes as a signed 32-bit value (negative strides are
// legal): 108 instructions a stage, ~7 fewer per edge (an unsigned stride took 100; the default
// since session 19, negative strides taking the wide copies: ISSUE below). Same copies,
// same bits. Measured (H200, v12): planned on power-law 4.70 against 5.13 ms and 4.74 against
// 5.16 (`bench --ab`, one process, two calls), on products-like 5.08-5.13 under both (the
// w[edge id] gather bounds it there); w in plan order on products-like 4.13-4.15 against 4.50-4.55
// and one-shot 6.51-6.58 against 6.87-6.95 (separate calls); one-shot A/B with shuffled rounds
// 6.82 against 6.88 (no measured difference). Lean does not use this kernel.
//
// ISSUE: 0 the wide-address copies; 1 LI with a signed stride (v12-v21; PIPELINK_AGG_STAGED_ISSUE=
// signed); 2 LI with an unsigned one (the default since session 19; row strides of 0 to 2^29 - 1
// floats, others take the wide copies). In SASS (nvcc 13.0, sm_90, staged_rows_kernel<1, 2, ...>)
// the signed form's `xq + std::int64_t(sr) * xsb` multiplied the sign-extended operands as 64-bit
// numbers (SHF.R.S32.HI, three IMADs, IADD3, MOV: ~6 instructions a 16-byte copy, four copies a
// lane each stage of 8 edges); the unsigned one is an IMAD.WIDE.U32 with x's address as its
// addend (~3 with the moves): the kernel 3624 -> 3568 instructions, its loop's issue 131 -> 121.
// The walk is issue-bound: 2-3 instructions an edge cost ~0.16 ms on products-like (v22's 24-bit
// column), so ~1.5 fewer should give ~0.09. Measured in v23 (H200, the same rounds): the signed
// form 1.022x the unsigned one's time on the planned call; PIPELINK_AGG_STAGED_ISSUE=signed A/Bs it.
// 3 (opt-in, PIPELINK_AGG_STAGED_ISSUE=held; session 39): 2's copies, with
// the stage slot kept as a running count instead of j % S, and the lane's shared addresses held
// in registers (`hold`) and read by explicit ld.shared. In 2's SASS (nvcc 13.0, sm_90,
// <1, 2, 2, kWCompactLidx>) every stage rebuilt the warp's shared base (S2R SR_CgaCtaId, MOV,
// LEA), divided j by 3 (IMAD.WIDE.U32, SHF, IMAD) and rebuilt the slot addresses from them, in
// the issue and again before the loads: 3 cuts a fast stage of 8 edges from ~374 to ~340
// instructions (issue 79 -> 70, the loads' setup 28 -> 20, the two halves' tanh 96 + 94 -> 83 +
// 90), ~4 fewer an edge of ~47, at 62-64 registers against 59 (the launch bound's cap; no
// spills). The walk looked issue-bound (88% of issue slots, v41), so the prediction was a planned
// run 3-7% faster on products-like. Measured (v43, H200, 035b125, bench --ab, same rounds):
// products-like planned 0.998x (4.35 / 4.35 ms), one-shot 0.999x; power-law planned 0.987x, w in
// plan order 0.972x. Memory, not issue, sets the products-like walk's time, so 3 stays opt-in.
// Same copies, same adds in the same order: the same bits.
//
// WM: the weights' mode as a compile-time constant (-1: read from `wmode` at run time). The hot
// forms (tanh, LI copies: the planned call's kWCompactLidx (the default where N <= 2^24) and
// kWCompact (=1, or N > 2^24) with weights, the one-shot's kWInPairs, since v40 kWById, the
// planned call of plans that gather w: power-law's, whose split rows turn the permutation off,
// and since v41 kWPlanOrder, w from permute_weights on such plans)
// are instantiated with theirs, so that a stage's plan-entry load and weight copy carry no
// branches on the mode or on w being null (SASS, sm_90, <1, 2, 2>: each stage reloaded the mode
// from the constant bank and branched on it twice, and tested w for null twice). Measured on
// products-like in v29: 1.007x planned, 1.011x one-shot for the runtime mode in the same rounds.
// power-law's gathering walk ran the runtime form until v40 (ptxas: 64 registers, the compiled
// form 63); PIPELINK_AGG_STAGED_WMODE=runtime A/Bs it. Measured in v41 (H200, d302abd, same
// rounds, random order), runtime against compiled: power-law planned 1.139x (4.68 against 4.11 ms),
// one-shot 1.081x; products-like planned 1.056x (its arms spread 4.35-5.04 ms), one-shot 1.059x
// (tight arms). Each under the bench's 1.5x rule; power-law's repeated in call 6: 1.118x / 1.068x.
// The same calls' power-law "w in plan order" row, still in the runtime form (kWPlanOrder: a plan
// that keeps its ids), ran 4.45 ms against the gathering walk's 4.02, so v41 compiles that mode
// too; predicted from the 1.139x: ~3.6-3.8 ms there. Measured (v41 call 6, 4d0bca5): 3.71 ms (4.13
// in call 3, another start), the same bits as the runtime form (StagedIssueVariantsGiveTheSameBits);
// ptxas 59 registers against the runtime form's 64.
template <int TR, int W, int ISSUE = 0, int WM = -1>
__global__ void __launch_bounds__(W * 32, 32 / W)
    staged_rows_kernel(const std::int32_t* __restrict__ row_ptr, const std::int32_t* __restrict__ first_row,
                       const EdgePair<std::int32_t>* __restrict__ pairs, const float* __restrict__ x, std::int64_t xs,
                       const float* __restrict__ w, float* __restrict__ out, std::int64_t os, std::int64_t groups,
                       bool accumulate, std::int64_t max_row, const std::int32_t* __restrict__ seg_first,
                       const std::int32_t* __restrict__ seg_row, std::int64_t num_split, double* __restrict__ partial,
                       int wmode_arg, const std::int32_t* __restrict__ order) {
  constexpr int F = kStagedF, SE = kStageEdges, S = kStages;
  // A compile-time mode comes with weights (the host picks it only then).
  const int wmode = WM >= 0 ? WM : wmode_arg;
  const bool has_w = WM >= 0 || w != nullptr;
  extern __shared__ __align__(16) unsigned char staged_smem[];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  // The launch slot's item: itself, or its place in the plan's order (heaviest first, see
  // item_class_counts_kernel).
  std::int64_t item = blockIdx.x * std::int64_t(W) + wib;
  if (order) {
    if (item >= num_split + groups) return;
    item = order[item];
  }
  const bool seg = item < num_split;
  const std::int64_t g = item - num_split;
  if (!seg && g >= groups) return;
  float* const rows = reinterpret_cast<float*>(staged_smem) + wib * (S * SE * (F + 1));
  float* const wts = rows + S * SE * F;
  int r0 = 0, r1 = 1, kbase = 0, n = 0;
  if (seg) {  // one row of its own: the segment's edges
    const int row = seg_row[item], row_begin = row_ptr[row], row_end = row_ptr[row + 1];
    kbase = row_begin + int(item - seg_first[row]) * int(max_row);  // max_row: the plan's segment length
    n = min(int(max_row), row_end - kbase);
  } else {
    r0 = first_row[g];
    r1 = first_row[g + 1];
    if (r0 >= r1) return;
    kbase = row_ptr[r0];
    n = row_ptr[r1] - kbase;  // this group's edges, relative to kbase
  }
  const float* const wq = w_plan_order(wmode) && has_w ? w + kbase : w;  // in plan order: wq[k], else w[edge id]
  // The group's plan entries: pairs, or a compact plan's src column (kWCompact, kWCompact24,
  // kWCompactLidx).
  const EdgePair<std::int32_t>* const gp = pairs + kbase;
  const std::int32_t* const gs = reinterpret_cast<const std::int32_t*>(pairs) + kbase;
  // The 24-bit column's addresses from `pairs` and kbase at each use, not from two more pointers
  // held through the walk: with those (4 registers under a 64-register launch bound) the planned
  // call ran 4.64-4.65 ms whichever column the plan held (session 19, `bench --ab`, same rounds),
  // against 4.48 for the 32-bit column in the build before them.
  // The packed column (kWCompactLidx) comes back raw, its lidx byte still on top, and the 24-bit
  // column (kWCompact24) as its two loaded parts: issue() masks or joins them a stage later, where
  // they are used. Masked here, the mask sat 5 instructions after the column's load in the same
  // stage (SASS, sm_90), so every stage waited out the load that pnext exists to hide: ncu (H200,
  // products-like, v31) read the walk 2.6% slower at locked clocks than the plain column's on
  // equal DRAM bytes, with eligible warps a scheduler 3.70 against 4.57. The 24-bit join had the
  // same shape (its byte permute right after its two loads; not measured apart).
  auto entry = [&](int k) {
    if (wmode == kWCompact || wmode == kWCompactLidx) return EdgePair<std::int32_t>{gs[k], 0};
    if (wmode == kWCompact24) return compact24_parts(pairs, kbase + k);
    return gp[k];
  };
  // Row ends (relative), 32 rows at a time, one per lane.
  int r = r0, rbase = r0;
  int win = !seg && rbase + lane < r1 ? row_ptr[rbase + lane + 1] - kbase : n;
  int rbeg = 0, rend = __shfl_sync(0xffffffffu, win, 0);
  float2 part = make_float2(0.f, 0.f);
  double acc0 = 0.0, acc1 = 0.0;
  auto next_row = [&] {
    ++r;
    if (r - rbase >= 32) {
      rbase = r;
      win = rbase + lane < r1 ? row_ptr[rbase + lane + 1] - kbase : n;
    }
    rbeg = rend;
    rend = __shfl_sync(0xffffffffu, win, r - rbase);
  };
  auto write_row = [&] {  // row r's sum (empty rows: 0, or unchanged when accumulating)
    if (seg) {
      reinterpret_cast<double2*>(partial + item * F)[lane] = make_double2(acc0 + double(part.x), acc1 + double(part.y));
    } else if (!(accumulate && rend == rbeg)) {
      float2* o = reinterpret_cast<float2*>(out + std::int64_t(r) * os) + lane;
      float2 v = part;
      if (rend - rbeg > 32) {
        double a = acc0 + double(part.x), b = acc1 + double(part.y);
        if (accumulate) {
          const float2 old = *o;
          a += double(old.x);
          b += double(old.y);
        }
        v = make_float2(float(a), float(b));
      } else if (accumulate) {
        const float2 old = *o;
        v = make_float2(old.x + part.x, old.y + part.y);
      }
      *o = v;
    }
    part = make_float2(0.f, 0.f);
    acc0 = acc1 = 0.0;
  };
  auto settle = [&] {  // past empty rows (written) and split rows (their segments are other warps' items)
    while (r < r1 && (rend == rbeg || (!seg && rend - rbeg > max_row))) {
      if (rend == rbeg) write_row();
      next_row();
    }
  };
  settle();
  // LI: lane copies 16-byte piece (lane & 15) of edge 2c + (lane >> 4) of a stage, c < SE / 2.
  unsigned piece_s = static_cast<unsigned>(__cvta_generic_to_shared(rows)) +
                     unsigned(((lane >> 4) * F + (lane & 15) * 4) * int(sizeof(float)));
  // ISSUE 3: this lane's place in a stage's rows (its two features) and the weights' slots.
  unsigned lane_s = 0, wts_s = 0;
  if constexpr (ISSUE == 3) {
    lane_s = static_cast<unsigned>(__cvta_generic_to_shared(rows)) + unsigned(lane * 2 * int(sizeof(float)));
    wts_s = static_cast<unsigned>(__cvta_generic_to_shared(wts));
    hold(piece_s);
    hold(lane_s);
    hold(wts_s);
  }
  const char* const xq = reinterpret_cast<const char*>(x + (lane & 15) * 4);
  // Bytes a row, modulo 2^32 (no signed overflow where the wide copies serve |xs| >= 2^29): the
  // host picks ISSUE 2 for 0 <= xs < 2^29 and ISSUE 1 for |xs| < 2^29, where this is exact.
  const int xsb = int(unsigned(xs) * unsigned(sizeof(float)));
  while (r < r1) {  // one pass of the ring per run of rows between split rows
    const int kb = rbeg;
    EdgePair<std::int32_t> pnext{0, 0};
    if (lane < SE && kb + lane < n) pnext = entry(kb + lane);
    // ISSUE 3: the slots of the next issue and of the next stage read. cslot always equals islot
    // right after the stage's issue(j + S - 1), but read from islot the held form's fast stage
    // took ~21 more instructions in SASS (nvcc 13.0, sm_90, kWCompactLidx: 284 against 263).
    int islot = 0, cslot = 0;
    auto issue = [&](int j) {  // stage j: edges kb + j*SE ..., into slot j % S
      const int k0 = kb + j * SE;
      int js = j % S;
      if constexpr (ISSUE == 3) {  // issue() runs for j = 0, 1, 2, ... in order
        js = islot;
        islot = islot == S - 1 ? 0 : islot + 1;
      }
      EdgePair<std::int32_t> p = pnext;
      if (wmode == kWCompactLidx) p.src = std::int32_t(unsigned(p.src) & kLidxColumnSrcMask);  // see entry()
      if (wmode == kWCompact24) p = EdgePair<std::int32_t>{compact24_join(p), 0};
      const int kn = k0 + SE + lane;
      if (lane < SE && kn < n) pnext = entry(kn);
      if (k0 < n) {
        if constexpr (ISSUE > 0) {
          const unsigned slot_s = piece_s + unsigned(js * SE * F * int(sizeof(float)));
#pragma unroll
          for (int c = 0; c < SE / 2; ++c) {
            const int e = c * 2 + (lane >> 4);
            const int sr = __shfl_sync(0xffffffffu, p.src, e);
            if (k0 + e < n) {
              const char* const xr = ISSUE >= 2 ? xq + std::uint64_t(unsigned(sr)) * unsigned(xsb)  // sr >= 0, xsb >= 0
                                                : xq + std::int64_t(sr) * xsb;
              cp_async16_s(slot_s + unsigned(c * 2 * F * int(sizeof(float))), xr);
            }
          }
        } else {
          float* srow = rows + (j % S) * SE * F;
#pragma unroll
          for (int c = 0; c < SE / 2; ++c) {  // SE rows of 16 16-byte pieces, 32 pieces per step
            const int piece = c * 32 + lane, e = piece >> 4, q = piece & 15;
            const int sr = __shfl_sync(0xffffffffu, p.src, e);
            if (k0 + e < n) cp_async16(srow + e * F + q * 4, x + std::int64_t(sr) * xs + q * 4);
          }
        }
        if (has_w && lane < SE && k0 + lane < n) {
          // kWInPairs: a plain store into the slot; the stage's reader passes the same
          // cp_wait + __syncwarp as for the copies, and the slot's last reader synced before.
          if (wmode == kWInPairs)
            wts[js * SE + lane] = __int_as_float(p.id);
          else
            cp_async4(wts + js * SE + lane, wq + (w_plan_order(wmode) ? k0 + lane : p.id));
        }
      }
      cp_commit();  // empty groups too: wait_group counts stay uniform
    };
#pragma unroll
    for (int j = 0; j < S - 1; ++j) issue(j);
    bool jumped = false;
    // The next event: the current row's end, or the end of its 32-edge block if that comes first.
    int ev = min(rend, rbeg + 32);
    auto event = [&](int kk) {  // after edge kk - 1, where kk == ev
      if (kk == rend) {
        write_row();
        next_row();
        settle();
        // Past the group's last row, or a split row skipped: restart the ring after it. (A split
        // row is always its group's last row while the chunk C <= the segment length, the
        // default, so there the second test is a guard: scripts/mutation-check.sh found it
        // unreachable in v7's walk. PlanKnobsKeepTheBitsOfUnsplitRows reaches it with shorter
        // segments since session 40; before, its graph had no short row after a split one in a
        // group, and the held form's restart mutant went uncaught on the H200.)
        jumped = r >= r1 || rbeg != kk;
        ev = min(rend, rbeg + 32);
      } else {
        acc0 += double(part.x);
        acc1 += double(part.y);
        part = make_float2(0.f, 0.f);
        ev = min(rend, kk + 32);
      }
    };
    for (int j = 0; !jumped; ++j) {
      issue(j + S - 1);
      cp_wait<S - 1>();
      __syncwarp();
      int cs = j % S;
      if constexpr (ISSUE == 3) {
        cs = cslot;
        cslot = cslot == S - 1 ? 0 : cslot + 1;
      }
      const float* srow = rows + cs * SE * F;
      const float* sw = wts + cs * SE;
      const int k0 = kb + j * SE;
      // Fast stage: all SE edges lie in the current row and no 32-edge block ends before the
      // stage's last edge, so the sums need no per-edge checks (same adds, same order, same bits).
      // ncu on products-like before this: 82.7 instructions per edge, issue slots 90% busy: the
      // per-edge row and block checks, not the memory, set the pace.
      const bool fast = k0 + SE <= ev;
#pragma unroll
      for (int e0 = 0; e0 < SE; e0 += 4) {
        float2 t[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {  // four edges' values before any is added: 8 chains per lane
          float2 v;
          float wt;
          if constexpr (ISSUE == 3) {
            v = lds_f2(lane_s + unsigned((cs * SE + e0 + u) * F * int(sizeof(float))));
            wt = has_w ? lds_f(wts_s + unsigned((cs * SE + e0 + u) * int(sizeof(float)))) : 1.f;
          } else {
            v = reinterpret_cast<const float2*>(srow + (e0 + u) * F)[lane];
            wt = has_w ? sw[e0 + u] : 1.f;
          }
          t[u] = make_float2(phi_c<TR>(v.x * wt), phi_c<TR>(v.y * wt));
        }
        if (fast) {
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            part.x += t[u].x;
            part.y += t[u].y;
          }
          continue;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int k1 = k0 + e0 + u + 1;  // every row ends at an event, so no edge past n is added
          if (!jumped) {
            part.x += t[u].x;
            part.y += t[u].y;
            if (k1 == ev) event(k1);
          }
        }
      }
      if (fast && k0 + SE == ev) event(ev);  // the stage's last edge ends a row or a block
      __syncwarp();
    }
    cp_wait<0>();  // drain the stages issued past the jump before the ring is reused
    __syncwarp();
  }
}

// Long rows and segments of split rows: a warp per item (a long row, or seg_len edges of a split
// row, the last segment maybe shorter), split into lane groups as in csr_rows_kernel; the groups
// combine in a fixed shuffle tree after each 32-edge batch and batches add in double. Items
// [0, num_split) are segments: their sums go to `partial` (double), added per row in segment order
// by combine_segments_kernel; the others are long rows, written to `out`. Deterministic.
template <class T, class P, int VEC, int CH>
__global__ void __launch_bounds__(256) segments_kernel(const P* __restrict__ row_ptr, const PlanPair<P>* __restrict__ pairs,
                                                       int src_bits,
                                                       const T* __restrict__ x, std::int64_t xs, const T* __restrict__ w,
                                                       std::int64_t items, std::int64_t F, int lpe, int transform,
                                                       const P* __restrict__ seg_first, const P* __restrict__ seg_row,
                                                       std::int64_t num_split, const P* __restrict__ long_rows,
                                                       double* __restrict__ partial, T* __restrict__ out,
                                                       std::int64_t os, bool accumulate, std::int64_t seg_len,
                                                       int wmode) {
  constexpr int U = 4;
  const std::int64_t item = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (item >= items) return;
  const int groups = 32 / lpe, group = lane / lpe, gl = lane % lpe;
  const bool split = item < num_split;
  const std::int64_t row = std::int64_t(split ? seg_row[item] : long_rows[item - num_split]);
  const std::int64_t row_end = std::int64_t(row_ptr[row + 1]);
  const std::int64_t begin =
      std::int64_t(row_ptr[row]) + (split ? (item - std::int64_t(seg_first[row])) * seg_len : 0);
  const std::int64_t end = split && begin + seg_len < row_end ? begin + seg_len : row_end;
  const std::int64_t tile = std::int64_t(lpe) * VEC * CH;
  for (std::int64_t f0 = 0; f0 < F; f0 += tile) {
    double acc[CH][VEC];
#pragma unroll
    for (int j = 0; j < CH; ++j)
#pragma unroll
      for (int q = 0; q < VEC; ++q) acc[j][q] = 0.0;
    for (std::int64_t k0 = begin; k0 < end; k0 += 32) {
      const std::int64_t k = k0 + lane;
      std::int64_t my_src = 0;
      T my_w = T(1);
      if (k < end) {
        const PlanPair<P> e = load_pair(pairs, k, wmode);
        my_src = pair_src(e, src_bits);
        if (w) my_w = edge_weight(w, wmode, k, e, src_bits);
      }
      const int n = int(end - k0 < 32 ? end - k0 : 32);
      T batch[CH][VEC];
#pragma unroll
      for (int j = 0; j < CH; ++j)
#pragma unroll
        for (int q = 0; q < VEC; ++q) batch[j][q] = T(0);
      for (int t0 = 0; t0 < n; t0 += groups * U) {
        T v[U][CH][VEC];
        T wt[U];
        bool live[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int t = t0 + u * groups + group;
          const std::int64_t sr = __shfl_sync(0xffffffffu, my_src, t & 31);
          wt[u] = __shfl_sync(0xffffffffu, my_w, t & 31);
          live[u] = t < n;
#pragma unroll
          for (int j = 0; j < CH; ++j) {
            const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
            if (live[u] && f < F) load_vec<T, VEC>(x + sr * xs + f, v[u][j]);
            else
#pragma unroll
              for (int q = 0; q < VEC; ++q) v[u][j][q] = T(0);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (live[u])
#pragma unroll
            for (int j = 0; j < CH; ++j)
#pragma unroll
              for (int q = 0; q < VEC; ++q) batch[j][q] += phi(v[u][j][q] * wt[u], transform);
      }
      for (int off = 16; off >= lpe; off /= 2)
#pragma unroll
        for (int j = 0; j < CH; ++j)
#pragma unroll
          for (int q = 0; q < VEC; ++q) batch[j][q] += __shfl_down_sync(0xffffffffu, batch[j][q], off);
#pragma unroll
      for (int j = 0; j < CH; ++j)
#pragma unroll
        for (int q = 0; q < VEC; ++q) acc[j][q] += double(batch[j][q]);
    }
    if (group == 0) {
#pragma unroll
      for (int j = 0; j < CH; ++j) {
        const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
#pragma unroll
        for (int q = 0; q < VEC; ++q) {
          if (f + q >= F) break;
          if (split) {
            partial[item * F + f + q] = acc[j][q];
          } else {
            T& o = out[row * os + f + q];
            o = T(accumulate ? double(o) + acc[j][q] : acc[j][q]);
          }
        }
      }
    }
  }
}

// One warp per split row: its segments' partial sums, added in segment order (deterministic).
template <class T, class P>
__global__ void combine_segments_kernel(const P* __restrict__ seg_first, std::int64_t N, const double* __restrict__ partial,
                                        T* __restrict__ out, std::int64_t os, std::int64_t F, bool accumulate) {
  const std::int64_t row = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const std::int64_t s0 = std::int64_t(seg_first[row]), s1 = std::int64_t(seg_first[row + 1]);
  if (s0 == s1) return;
  for (std::int64_t f = lane; f < F; f += 32) {
    double sum = accumulate ? double(out[row * os + f]) : 0.0;
    for (std::int64_t i = s0; i < s1; ++i) sum += partial[i * F + f];
    out[row * os + f] = T(sum);
  }
}

template <class T>
__global__ void zero_strided_kernel(T* p, std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < rows * cols;
       i += std::int64_t(gridDim.x) * blockDim.x)
    p[(i / cols) * rs + (i % cols) * cs] = T(0);
}




// Whether the staged kernel can run on a device: the code the device runs must come from sm_80+
// PTX (a build for an older architecture, JIT-compiled on a newer GPU, has the trap instead of
// cp.async), which implies a device of sm_80 or newer. Looked up once per device (run() has made
// it current).
bool staged_supported(int dev) {
  static std::atomic<int> known[64];  // 0 unknown, 1 no, 2 yes
  if (dev < 0 || dev >= 64) return false;
  int v = known[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    cudaFuncAttributes a{};
    PIPELINK_CUDA_CHECK(cudaFuncGetAttributes(&a, staged_rows_kernel<1, kStagedWarps>));
    v = a.ptxVersion >= 80 ? 2 : 1;
    known[dev].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

// Whether the staged kernel takes this run: float32, F = 64, a 32-bit plan, x rows 16-byte
// aligned with unit column stride, out rows 8-byte aligned. PIPELINK_AGG_STAGED=0 turns it off
// (the v5 kernels then run: for A/B measurements). Needs sm_80 (cp.async).
template <class T, class P>
bool staged_fits(const TensorView& x, const TensorView& out, std::int64_t F) {
  static const bool enabled = [] {
    const char* v = std::getenv("PIPELINK_AGG_STAGED");
    return !(v && std::string(v) == "0");
  }();
  if constexpr (!std::is_same_v<T, float> || !std::is_same_v<P, std::int32_t>) {
    return false;
  } else {
    return enabled && staged_supported(x.device().index) && F == kStagedF && x.stride(1) == 1 && x.stride(0) % 4 == 0 && aligned16(x.data()) &&
           out.stride(1) == 1 && out.stride(0) % 2 == 0 && (reinterpret_cast<std::uintptr_t>(out.data()) & 7u) == 0;
  }
}

struct StagedSegments {  // the split rows' segments, summed by the staged kernel too
  const std::int32_t* seg_first;
  const std::int32_t* seg_row;
  std::int64_t count;
  double* partial;
  std::int64_t seg_len;  // rows longer than this are split (and the staged walk skips them)
  const std::int32_t* order;  // the items' launch order (nullptr: segments, then groups)
};

template <int TR>
void launch_staged_tr(const std::int32_t* rp, const std::int32_t* fr, const EdgePair<std::int32_t>* pp, const float* xp,
                      std::int64_t xs, const float* wp, int wmode, float* op, std::int64_t os, std::int64_t groups,
                      bool acc, const StagedSegments& sg, cudaStream_t s) {
  // Shared-memory attributes are per device: set once per device and transform. The opt-in above
  // 48 KiB is not needed at 1-2 warps per block (12.5 KB) but keeps larger stage configurations
  // working.
  static std::atomic<std::uint64_t> opted{0};
  int dev = 0;
  PIPELINK_CUDA_CHECK(cudaGetDevice(&dev));
  const std::uint64_t bit = dev < 64 ? std::uint64_t(1) << dev : 0;
  // The LI copies (see the kernel) unless PIPELINK_AGG_STAGED_ISSUE=0; "signed" takes v12-v21's
  // signed-stride LI. Read at each launch (one getenv, well under a microsecond against a 4-8 ms
  // run), so that a test compares them in one process and `bench --ab` interleaves them. LI holds
  // the row stride in bytes as a 32-bit value: 0 <= xs < 2^29 (unsigned) or |xs| < 2^29 (signed),
  // else the wide-address copies. Checked by CudaPlan::run before any work (staged_issue_knob).
  const int issue = staged_issue_knob();
  const bool li_signed = issue == 1 && xs > -(std::int64_t(1) << 29) && xs < (std::int64_t(1) << 29);
  // "held" (3) has the unsigned form's range; instantiated for tanh only (the hot forms).
  const bool li_held = TR == 1 && issue == 3 && xs >= 0 && xs < (std::int64_t(1) << 29);
  const bool li_unsigned = (issue == 2 || (issue == 3 && TR != 1)) && xs >= 0 && xs < (std::int64_t(1) << 29);
  constexpr int warps = kStagedWarps;
  const int grid = int((sg.count + groups + warps - 1) / warps);
  // The hot forms of copy form I (2, or 3 under "held") with the weights' mode compiled in: f on
  // each, to set their shared-memory attribute (launch_compiled below switches over the same five
  // modes: a mode added to one belongs in the other).
  auto each_compiled = [](auto issue_c, auto&& f) {
    constexpr int I = decltype(issue_c)::value;
    f(staged_rows_kernel<TR, kStagedWarps, I, kWCompact>);
    f(staged_rows_kernel<TR, kStagedWarps, I, kWCompactLidx>);
    f(staged_rows_kernel<TR, kStagedWarps, I, kWInPairs>);
    f(staged_rows_kernel<TR, kStagedWarps, I, kWById>);
    f(staged_rows_kernel<TR, kStagedWarps, I, kWPlanOrder>);
  };
  auto launch = [&](auto kernel) {
    if (!bit || !(opted.load(std::memory_order_acquire) & bit)) {
      auto opt_in = [](auto k) {
        PIPELINK_CUDA_CHECK(
            cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, staged_smem_bytes(kStagedWarps)));
      };
      opt_in(staged_rows_kernel<TR, kStagedWarps, 0>);
      opt_in(staged_rows_kernel<TR, kStagedWarps, 1>);
      opt_in(staged_rows_kernel<TR, kStagedWarps, 2>);
      if constexpr (TR == 1) {
        opt_in(staged_rows_kernel<TR, kStagedWarps, 3>);
        each_compiled(std::integral_constant<int, 2>{}, opt_in);
        each_compiled(std::integral_constant<int, 3>{}, opt_in);
      }
      opted.fetch_or(bit, std::memory_order_acq_rel);
    }
    kernel<<<grid, warps * 32, staged_smem_bytes(warps), s>>>(rp, fr, pp, xp, xs, wp, op, os, groups, acc, sg.seg_len,
                                                              sg.seg_first, sg.seg_row, sg.count, sg.partial, wmode,
                                                              sg.order);
  };
  // The weights' mode as a constant in the hot forms (see the kernel's WM), unless
  // PIPELINK_AGG_STAGED_WMODE=runtime (for A/B; the same bits). tanh only: other transforms
  // instantiate no such form.
  auto launch_runtime_mode = [&] {
    if constexpr (TR == 1) {
      if (li_held) return launch(staged_rows_kernel<TR, warps, 3>);
    }
    if (li_unsigned) return launch(staged_rows_kernel<TR, warps, 2>);
    if (li_signed) return launch(staged_rows_kernel<TR, warps, 1>);
    launch(staged_rows_kernel<TR, warps, 0>);
  };
  auto launch_compiled = [&](auto issue_c) {
    constexpr int I = decltype(issue_c)::value;
    switch (wmode) {
      case kWCompact:
        return launch(staged_rows_kernel<TR, warps, I, kWCompact>);
      case kWCompactLidx:
        return launch(staged_rows_kernel<TR, warps, I, kWCompactLidx>);
      case kWInPairs:
        return launch(staged_rows_kernel<TR, warps, I, kWInPairs>);
      case kWById:
        return launch(staged_rows_kernel<TR, warps, I, kWById>);
      case kWPlanOrder:
        return launch(staged_rows_kernel<TR, warps, I, kWPlanOrder>);
      default:
        return launch_runtime_mode();  // kWCompact24
    }
  };
  if constexpr (TR == 1) {
    if (!wp || staged_wmode_runtime() || !(li_held || li_unsigned))
      launch_runtime_mode();
    else if (li_held)
      launch_compiled(std::integral_constant<int, 3>{});
    else
      launch_compiled(std::integral_constant<int, 2>{});
  } else {
    launch_runtime_mode();
  }
  check_launch();
}

void launch_staged(const std::int32_t* rp, const std::int32_t* fr, const EdgePair<std::int32_t>* pp, const float* xp,
                   std::int64_t xs, const float* wp, int wmode, float* op, std::int64_t os, std::int64_t groups, int tr,
                   bool acc, const StagedSegments& sg, cudaStream_t s) {
  if (tr == 1 && staged_tanh_libm()) tr = 4;
  auto go = [&](auto tr_c) {
    launch_staged_tr<decltype(tr_c)::value>(rp, fr, pp, xp, xs, wp, wmode, op, os, groups, acc, sg, s);
  };
  using std::integral_constant;
  switch (tr) {
    case 0:
      return go(integral_constant<int, 0>{});
    case 1:
      return go(integral_constant<int, 1>{});
    case 4:
      return go(integral_constant<int, 4>{});
    case 2:
      return go(integral_constant<int, 2>{});
    default:
      return go(integral_constant<int, 3>{});
  }
}

// Calls f(std::integral_constant<int, VEC>, std::integral_constant<int, CH>) with the vector
// width and feature tiles a launch needs: one place for the four instantiations of each kernel.
template <int kVec, class Fn>
void with_vec_tiles(bool vec_ok, bool two_chunks, Fn&& f) {
  using std::integral_constant;
  if (vec_ok && two_chunks) f(integral_constant<int, kVec>{}, integral_constant<int, 2>{});
  else if (vec_ok) f(integral_constant<int, kVec>{}, integral_constant<int, 1>{});
  else if (two_chunks) f(integral_constant<int, 1>{}, integral_constant<int, 2>{});
  else f(integral_constant<int, 1>{}, integral_constant<int, 1>{});
}

}  // namespace

// Zeroes out's rows: one 2-D memset when rows are evenly pitched; otherwise (a zero or negative
// row stride, legal for some views) an element-wise kernel.
void zero_rows(const TensorView& out, cudaStream_t s) {
  const std::size_t item = out.itemsize();
  const std::int64_t R = out.dim(0), C = out.dim(1);
  if (R * C == 0) return;
  if (out.stride(1) == 1 && (R == 1 || out.stride(0) >= C)) {
    PIPELINK_CUDA_CHECK(cudaMemset2DAsync(out.data(), std::size_t(R == 1 ? C : out.stride(0)) * item, 0,
                                          std::size_t(C) * item, std::size_t(R), s));
    return;
  }
  if (item == 8)
    zero_strided_kernel<double><<<grid_for(R * C, 256), 256, 0, s>>>(out.data_as<double>(), R, C, out.stride(0), out.stride(1));
  else
    zero_strided_kernel<float><<<grid_for(R * C, 256), 256, 0, s>>>(out.data_as<float>(), R, C, out.stride(0), out.stride(1));
  check_launch();
}

template <class T, class P>
void walk_rows(const WalkPlan& plan, const TensorView& x, const TensorView* w, bool wplan, const TensorView& out,
                 const AggregateOptions& opts, cudaStream_t s) {
  const std::int64_t N = plan.num_nodes, F = x.dim(1);
  if (N == 0 || F == 0) return;
  if (plan.num_edges == 0) {
    if (!opts.accumulate) zero_rows(out, s);
    return;
  }
  constexpr int kVec = sizeof(T) == 4 ? 4 : 2;
  const bool vec_ok = F % kVec == 0 && x.stride(0) % kVec == 0 && aligned16(x.data());
  const int vec = vec_ok ? kVec : 1;
  const int lpe = lanes_per_edge(F, vec);
  const bool two_chunks = (F + vec - 1) / vec > 32;  // F > 128 float32 with float4: two vectors per lane per tile
  const auto* rp = static_cast<const P*>(plan.row_ptr);
  // A 24-bit column is read from its low halves, past the high bytes (compact24_src); a column
  // with lidx's low bytes is masked before use (kWCompactLidx: where read here; a stage after
  // its prefetch in the staged walk, see entry() there).
  const auto* pp = static_cast<const PlanPair<P>*>(plan.entries);
  const int sb = plan.src_bits;
  // A one-shot plan's pairs hold the weights (built from this call's w, float32): the kernels
  // read them there, and `wp` only says that there are weights.
  if (plan.w_in_pairs && (!w || w->dtype() != DType::f32 || plan.wide || wplan))
    throw Error("aggregate: internal error: a plan with weights in its pairs run without its float32 weights");
  if (plan.compact && w && !wplan)
    throw Error("aggregate: internal error: a compact plan run with w in edge order (no edge ids to gather by)");
  const int wmode = plan.w_in_pairs ? kWInPairs
                    : plan.compact  ? (plan.compact24        ? kWCompact24
                                       : plan.lidx_in_column ? kWCompactLidx
                                                             : kWCompact)
                    : wplan         ? kWPlanOrder
                                    : kWById;
  const T* wp = plan.w_in_pairs ? reinterpret_cast<const T*>(pp) : w ? w->data_as<const T>() : nullptr;
  const T* xp = x.data_as<const T>();
  T* op = out.data_as<T>();
  const std::int64_t xs = x.stride(0), os = out.stride(0);
  const int tr = int(opts.transform);
  const bool acc = opts.accumulate;
  const bool staged = staged_fits<T, P>(x, out, F);
  DeviceBuffer partial(std::size_t(plan.num_segments * F) * sizeof(double), s);
  if (staged) {
    const StagedSegments sg{static_cast<const std::int32_t*>(plan.seg_first),
                            static_cast<const std::int32_t*>(plan.seg_row),
                            plan.num_segments,
                            partial.as<double>(),
                            plan.seg_len,
                            static_cast<const std::int32_t*>(plan.order)};
    launch_staged(reinterpret_cast<const std::int32_t*>(rp), static_cast<const std::int32_t*>(plan.first_row),
                  reinterpret_cast<const EdgePair<std::int32_t>*>(pp), reinterpret_cast<const float*>(xp), xs,
                  reinterpret_cast<const float*>(wp), wmode, reinterpret_cast<float*>(op), os, plan.groups, tr, acc, sg,
                  s);
  } else {
    const auto* fr = static_cast<const P*>(plan.first_row);
    const std::int64_t G = plan.groups;
    const int grid = int((G * lpe + 255) / 256);
    with_vec_tiles<kVec>(vec_ok, two_chunks, [&](auto v, auto ch) {
      csr_rows_kernel<T, P, decltype(v)::value, decltype(ch)::value><<<grid, 256, 0, s>>>(rp, fr, pp, xp, xs, wp, op, os, G, F, lpe, tr, acc, plan.long_row,
                                                            sb, wmode);
    });
    check_launch();
  }
  // Items: the segments of split rows, then the long rows (the staged kernel sums both itself).
  if (!staged && plan.num_segments + plan.num_long > 0) {
    const std::int64_t S = plan.num_segments, items = S + plan.num_long;
    const P* sf = static_cast<const P*>(plan.seg_first);
    const P* sr = static_cast<const P*>(plan.seg_row);
    const P* lr = static_cast<const P*>(plan.long_rows);
    double* pa = partial.as<double>();
    const int grid = int((items * 32 + 255) / 256);
    with_vec_tiles<kVec>(vec_ok, two_chunks, [&](auto v, auto ch) {
      segments_kernel<T, P, decltype(v)::value, decltype(ch)::value><<<grid, 256, 0, s>>>(rp, pp, sb, xp, xs, wp, items, F, lpe, tr, sf, sr, S, lr, pa, op,
                                                            os, acc, plan.seg_len, wmode);
    });
    check_launch();
  }
  if (plan.num_segments > 0) {
    const P* sf = static_cast<const P*>(plan.seg_first);
    combine_segments_kernel<T, P><<<int((N * 32 + 255) / 256), 256, 0, s>>>(sf, N, partial.as<const double>(), op, os, F,
                                                                           acc);
    check_launch();
  }
}

template void walk_rows<float, std::int32_t>(const WalkPlan&, const TensorView&, const TensorView*, bool,
                                             const TensorView&, const AggregateOptions&, cudaStream_t);
template void walk_rows<float, std::int64_t>(const WalkPlan&, const TensorView&, const TensorView*, bool,
                                             const TensorView&, const AggregateOptions&, cudaStream_t);
template void walk_rows<double, std::int32_t>(const WalkPlan&, const TensorView&, const TensorView*, bool,
                                              const TensorView&, const AggregateOptions&, cudaStream_t);
template void walk_rows<double, std::int64_t>(const WalkPlan&, const TensorView&, const TensorView*, bool,
                                              const TensorView&, const AggregateOptions&, cudaStream_t);

}  // namespace agg
}  // namespace pipelink::cuda
