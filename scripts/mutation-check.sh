#!/usr/bin/env bash
# Breaks the code on purpose, one mutation at a time, and checks that the test written for that
# branch fails. Runs on a GPU machine (the mutated branches are CUDA ones), in a copy of the tree,
# so the checkout is never modified. A mutation that the tests do not catch fails the script.
#   usage: OUT=/some/dir scripts/mutation-check.sh      (gpu-check.sh runs it with MUTANTS=1)
#          MUTANT_ONLY=<part of a name>[|<another>]: only the mutants whose names contain one. Results so far: docs/results/h200-mutants.txt
#          MUTANT_TEXTS=1: only check that every mutant's text is found (no GPU, no build; scripts/test.sh runs it)
#          MUTANT_SPLIT_COMPILE=N|off: nvcc --split-compile=N for the mutants' builds (default 0: every core; see below)
#          (frees-not-ordered: caught at 6245a1e817c8 and a2cd4a9; permute-not-ordered: missed at
#          1706ad606597 and a2cd4a9, caught once the stream test queued busy work before it).
set -uo pipefail
cd "$(dirname "$0")/.."

# name @ file @ text to replace @ replacement @ which occurrence (1-based) @ gtest filter that must fail
mutations=(
  "frees not ordered after cross-stream runs@src/cuda/aggregate.cu@PIPELINK_CUDA_CHECK_NOEXCEPT(cudaStreamWaitEvent(stream, used, 0));@(void)used;@1@CudaAggregate.PlanBuiltOnOneStreamRunsOnAnother"
  "row classification finds no long rows@src/cuda/aggregate.cu@d > long_row && d <= seg_len};@false};@1@CudaAggregate.PlanCountsItsSegmentsAndLongRows"
  "row classification counts a split row once@src/cuda/aggregate.cu@return {d > seg_len ? (d + seg_len - 1) / seg_len : 0,@return {d > seg_len ? 1 : 0,@1@CudaAggregate.PlanCountsItsSegmentsAndLongRows"
  "segment totals skip long rows@src/cuda/aggregate.cu@      lng += rc.long_row;@      lng += 0;@1@CudaAggregate.PlanCountsItsSegmentsAndLongRows"
  "staged kernel leaves empty rows unwritten@src/cuda/aggregate_walk.cu@if (rend == rbeg) write_row();@if (false) write_row();@2@CudaAggregate.SplitRowsAnywhereAndRunsOfEmptyRows"
  "staged fast stage skips its closing event@src/cuda/aggregate_walk.cu@if (fast && k0 + SE == ev) event(ev);@(void)0;@1@CudaAggregate.StagedAndRegisterWalksGiveTheSameBits"
  "permute not ordered on its stream@src/cuda/aggregate.cu@on_stream(s, [&] {  // permute: after the build, and the plan's frees after it@([&](auto f) { f(); })([&] {@1@CudaAggregate.PlanBuiltOnOneStreamRunsOnAnother"
  "event walk flushes blocks of 16 edges@src/cuda/aggregate_walk.cu@ev = min(rend, kk + 32);@ev = min(rend, kk + 16);@1@CudaAggregate.StagedWalkMatchesTheCpuOrderBitwise"
  "one-shot staged stage drops the weights in its pairs@src/cuda/aggregate_walk.cu@wts[js * SE + lane] = __int_as_float(p.id);@wts[js * SE + lane] = 1.f;@1@CudaAggregate.StagedKernelEveryTransformAndRowPaddedViews"
  "one-shot register walk drops the weights in its pairs@src/cuda/aggregate_common.cuh@if (wmode == kWInPairs) return __int_as_float(e.id);@if (wmode == kWInPairs) return 1.f;@1@CudaAggregate.FeatureWidthsBothIndexTypes"
  "one-shot ranges overwrite each other@src/cuda/aggregate.cu@    opts.accumulate = true;@    (void)0;@1@CudaAggregate.OneShotInEdgeRanges"
  "li copies give both half-warps the same edge@src/cuda/aggregate_walk.cu@const int e = c * 2 + (lane >> 4);@const int e = c * 2;@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "one-shot ranges skip the index check@src/cuda/aggregate.cu@validate_indices(\"aggregate\", &src, &dst, N, as_stream(ctx.stream));@(void)0;@1@CudaAggregate.OneShotInEdgeRanges"
  "one-shot ranges all take the first weights@src/cuda/aggregate.cu@if (w) wk = w->slice_rows(e0, e1);@if (w) wk = w->slice_rows(0, e1 - e0);@1@CudaAggregate.OneShotInEdgeRanges"
  "ranges sort one bit short@src/cuda/aggregate.cu@bits_for(hi - lo), s));@bits_for(hi - lo) - 1, s));@1@CudaAggregate.PlanBuiltInDestinationRangesIsTheSamePlan"
  "build memory cap ignored@src/cuda/aggregate.cu@const bool capped = chunks == 0 && knobs.build_memory > 0 && arena_bytes > knobs.build_memory;@const bool capped = false;@1@CudaAggregate.BuildMemoryCapSortsRangesAndOneShotRunsEdgeRanges"
  "short one-shot keeps one plan@src/cuda/aggregate.cu@K == 0 ? &edge_ranges : nullptr@nullptr@1@CudaAggregate.BuildMemoryCapSortsRangesAndOneShotRunsEdgeRanges"
  "short one-shot runs edge ranges where its pairs fit@src/cuda/aggregate.cu@bool edge_ranges = edge_ranges_if_short && (capped || kept_short);@bool edge_ranges = edge_ranges_if_short;@1@CudaAggregate.OneShotOnAFullDeviceRunsEdgeRanges"
  "one-shot destination ranges past their limit@src/cuda/aggregate.cu@short_build::one_shot_destination_ranges(E, double(free_b), temp, knobs.test_oneshot_dest_ranges) == 0@false@1@CudaAggregate.OneShotOnAFullDeviceRunsEdgeRanges"
  "status slots never take a second page@src/cuda/aggregate.cu@if (refused()) return;@if (refused() || slots() > 0) return;@1@CudaAggregate.StatusSlotsPastOnePage"
  "later edge range raises and loses the earlier sums@src/cuda/aggregate.cu@        return finish_lean(e0, e);@        throw;@1@CudaAggregate.OneShotLaterRangeOutOfMemoryLosesNoEdge"
  "cuda relu turns NaN into 0@src/cuda/aggregate_common.cuh@return v < 0.f ? 0.f : v;@return v > 0.f ? v : 0.f;@1@CudaAggregate.NonFiniteValuesPassThroughEveryTransform"
  "staged walk's relu turns NaN into 0@src/cuda/aggregate_walk.cu@return v < 0.f ? 0.f : v;  // NaN stays NaN@return v > 0.f ? v : 0.f;  // NaN stays NaN@1@CudaAggregate.NonFiniteValuesPassThroughEveryTransform"
  "full-device one-shot allocates the pairs it cannot hold@src/cuda/aggregate.cu@else if (!capped) kept = DeviceBuffer::try_make(E * sizeof(Pair), s);@else if (!capped) kept = DeviceBuffer(E * sizeof(Pair), s);@1@CudaAggregate.OneShotOnAFullDeviceRunsEdgeRanges"
  "unsigned li copies for any row stride@src/cuda/aggregate_walk.cu@const bool li_unsigned = (issue == 2 || (issue == 3 && TR != 1)) && xs >= 0 && xs < (std::int64_t(1) << 29);@const bool li_unsigned = (issue == 2 || (issue == 3 && TR != 1)) && xs >= 0;@1@CudaAggregate.RowStridesPastFourGigabytes"
  "signed li copies for any row stride@src/cuda/aggregate_walk.cu@const bool li_signed = issue == 1 && xs > -(std::int64_t(1) << 29) && xs < (std::int64_t(1) << 29);@const bool li_signed = issue == 1;@1@CudaAggregate.RowStridesPastFourGigabytes"
  "one-shot run short of memory raises where edge ranges fit@src/cuda/aggregate.cu@one_shot_run(*plan, ctx.port(\"x\"), w, ctx.port(\"out\"), options_of(ctx), knobs);@try { one_shot_run(*plan, ctx.port(\"x\"), w, ctx.port(\"out\"), options_of(ctx), knobs); } catch (const OutOfMemoryError& e) { throw Error(e.what()); }@1@CudaAggregate.OneShotRunOutOfMemoryRunsEdgeRanges"
  "edge range's run short of memory not split@src/cuda/aggregate.cu@one_shot_run(*plan, x, wk ? &*wk : nullptr, out, opts, knobs);@try { one_shot_run(*plan, x, wk ? &*wk : nullptr, out, opts, knobs); } catch (const OutOfMemoryError& e) { throw Error(e.what()); }@1@CudaAggregate.OneShotRunOutOfMemoryRunsEdgeRanges"
  "edge-range split drops its second half@src/cuda/aggregate.cu@      todo.push_back({mid, e1, e.requested(), in_run});@      (void)mid;@1@CudaAggregate.OneShotEdgeRangesSplitWhereABuildRunsOutOfMemory"
  "lean spread skips a chunk's last 32 edges@src/cuda/aggregate.cu@base < e0 + per_chunk && base < E; base += 32@base + 32 < e0 + per_chunk && base < E; base += 32@1@CudaAggregate.LeanSpreadOrderCountsEveryEdgeOnce"
  "spread multiplier not coprime with the chunk count@src/core/spread_order.hpp@while (std::gcd(a, q) != 1) a += 2;@(void)0;@1@CudaAggregate.LeanSpreadOrderCountsEveryEdgeOnce"
  "lean spread shuffles from the group's first lane@src/cuda/aggregate.cu@const int from = k * groups + group;@const int from = k * groups;@1@CudaAggregate.LeanSpreadOrderCountsEveryEdgeOnce"
  "tanh_f32 takes the exp form from 0.15@src/cuda/tanh_f32.cuh@return a >= __uint_as_float(0x3F19999Au) ? big : small;@return a >= __uint_as_float(0x3E19999Au) ? big : small;@1@CudaAggregate.TanhIsFaithfulInEveryFloatKernel"
  "w permutation pass 1 drops each run's last weight@src/cuda/aggregate.cu@for (int j = lane; j < n; j += 32) o[j * STRIDE] = sw[a + j];@for (int j = lane; j < n - 1; j += 32) o[j * STRIDE] = sw[a + j];@1@CudaAggregate.WeightPermutationGivesTheGatherBits"
  "w permutation 16-byte pass 1 swaps a pair@src/cuda/aggregate.cu@        sw[k.x >> 16] = v.y;@        sw[k.x >> 16] = v.x;@1@CudaAggregate.WeightPermutationGivesTheGatherBits"
  "w permutation 16-byte path on a misaligned w@src/cuda/aggregate.cu@const bool vec1 = t.T % 4 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;@const bool vec1 = t.T % 4 == 0;@1@CudaAggregate.WeightPermutationGivesTheGatherBits"
  "w permutation 16-byte pass 2 on a misaligned output@src/cuda/aggregate.cu@const bool vec2 = t.T % 4 == 0 && reinterpret_cast<std::uintptr_t>(scratch) % 16 == 0;@const bool vec2 = t.T % 4 == 0;@1@CudaAggregate.WeightPermutationKernelsOnASmallGraph"
  "w permutation lidx disagrees with tl@src/cuda/aggregate.cu@    lidx[p0 + i] = u16(k);@    lidx[p0 + i] = u16(k ^ 1);@1@CudaAggregate.WeightPermutationGivesTheGatherBits"
  "w permutation never used@src/cuda/aggregate.cu@const int tile = compact || !f32 ? 0 : w_permute_tile(num_edges, num_segments > 0);@const int tile = compact || !f32 ? 0 : 0 * w_permute_tile(num_edges, num_segments > 0);@1@CudaAggregate.WeightPermutationGivesTheGatherBits"
  "compact staged walk takes the previous src@src/cuda/aggregate_walk.cu@if (wmode == kWCompact || wmode == kWCompactLidx) return EdgePair<std::int32_t>{gs[k], 0};@if (wmode == kWCompact || wmode == kWCompactLidx) return EdgePair<std::int32_t>{gs[k > 0 ? k - 1 : k], 0};@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "24-bit src column drops the high byte@src/cuda/aggregate.cu@hi_end[-k] = static_cast<unsigned char>(v >> 16);@hi_end[-k] = static_cast<unsigned char>((v >> 16) & 0x7f);@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "24-bit staged walk takes the previous src@src/cuda/aggregate_walk.cu@compact24_parts(pairs, kbase + k)@compact24_parts(pairs, kbase + (k > 0 ? k - 1 : k))@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "24-bit staged walk skips the deferred join@src/cuda/aggregate_walk.cu@if (wmode == kWCompact24) p = EdgePair<std::int32_t>{compact24_join(p), 0};@if (wmode == kWCompact24) p.id = 0;@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "24-bit register walk takes the previous src@src/cuda/aggregate_common.cuh@return Pair{compact24_src(pairs, k), 0};@return Pair{compact24_src(pairs, k > 0 ? k - 1 : k), 0};@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "24-bit src column past 2^24 nodes@src/cuda/aggregate.cu@num_nodes <= (std::int64_t(1) << 24);@num_nodes <= (std::int64_t(1) << 25);@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "compact float64 w permutes one half@src/cuda/aggregate.cu@  for (int half = 0; half < 2; ++half) {@  for (int half = 0; half < 1; ++half) {@1@CudaAggregate.WeightPermutationCompactPlanGivesTheSameBits"
  "unsigned LI copies take negative strides@src/cuda/aggregate_walk.cu@(issue == 2 || (issue == 3 && TR != 1)) && xs >= 0 && xs < (std::int64_t(1) << 29);@(issue == 2 || (issue == 3 && TR != 1)) && xs < (std::int64_t(1) << 29);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "wide-address copies take the wrong piece@src/cuda/aggregate_walk.cu@x + std::int64_t(sr) * xs + q * 4);@x + std::int64_t(sr) * xs + (q ^ 1) * 4);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "first radix pass ranks lanes in reverse@src/cuda/aggregate.cu@base + __popc(peers & lt);@base + __popc(peers & ~lt) - 1;@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "first radix pass skips the warps' bases@src/cuda/aggregate.cu@    wh[w][d] = total;@    wh[w][d] = 0;@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "first radix pass, warp counts miss bad destinations@src/cuda/aggregate.cu@    bad_bits |= std::uint32_t(in && narrow_index_bad(dv[r], N)) << r;@    bad_bits |= 0u;@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "first radix pass, warp form adds the tile's starts twice@src/cuda/aggregate.cu@(WC ? 0u : lstart[d]) + base@lstart[d] + base@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "first radix pass, warp form writes out from zero starts@src/cuda/aggregate.cu@lstart[threadIdx.x] = b[threadIdx.x];@lstart[threadIdx.x] = 0;@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "first radix pass, warp bases without the tile's starts@src/cuda/aggregate.cu@std::uint16_t(lstart[i % kFirstDigits] + (&wh[0][0])[i]);@std::uint16_t((&wh[0][0])[i]);@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "first radix pass, late w read by the source row@src/cuda/aggregate.cu@p.id = __float_as_int(fw[p.id]);@p.id = __float_as_int(fw[p.src]);@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "compact plan's walk compiled for weights in the pairs@src/cuda/aggregate_walk.cu@return launch(staged_rows_kernel<TR, warps, I, kWCompact>);@return launch(staged_rows_kernel<TR, warps, I, kWInPairs>);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "one-shot walk compiled for weights by edge id@src/cuda/aggregate_walk.cu@return launch(staged_rows_kernel<TR, warps, I, kWInPairs>);@return launch(staged_rows_kernel<TR, warps, I, kWById>);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "packed column's staged walk drops src bits past 16@src/cuda/aggregate_walk.cu@unsigned(p.src) & kLidxColumnSrcMask@unsigned(p.src) & 0xFFFFu@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "packed column's register walk drops src bit 23@src/cuda/aggregate_common.cuh@reinterpret_cast<const std::uint32_t*>(pairs)[k] & kLidxColumnSrcMask@reinterpret_cast<const std::uint32_t*>(pairs)[k] & 0x7FFFFFu@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "packed lidx loses its high byte in pass 2@src/cuda/aggregate.cu@return (c >> kLidxColumnShift) | h << 8;@return c >> kLidxColumnShift;@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "packed lidx past 2^24 nodes@src/cuda/aggregate.cu@num_nodes <= (std::int64_t(1) << kLidxColumnShift)@num_nodes <= (std::int64_t(1) << 25)@1@CudaAggregate.CompactPlanSrcColumnWidths"
  "msd row starts take the bucket before@src/cuda/aggregate.cu@while (b.v[d + 1] <= p) ++d;@while (b.v[d + 1] < p) ++d;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd level pass 2 sorts one bit short@src/cuda/msd_levels.hpp@dmask2 = (1u << std::max(shift - kLevelBits, 0)) - 1;@dmask2 = (1u << std::max(shift - kLevelBits - 1, 0)) - 1;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd first pass scatters by the low digit@src/cuda/aggregate.cu@mask, shift, offsets, keys.as<K16>()@mask, 0, offsets, keys.as<K16>()@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd hand-back ignored@src/cuda/aggregate.cu@if (!arena.get()) return false;@if (false) return false;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd one level pass leaves its pairs in the scratch@src/cuda/aggregate.cu@PIPELINK_CUDA_CHECK(cudaMemcpyAsync(kept.as<Pair>() + p0, sp, n * sizeof(Pair), cudaMemcpyDeviceToDevice, st));@(void)sp;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd level cells drop the tile@src/cuda/msd_levels.hpp@std::int64_t(d) * sp.tiles + sp.t;@std::int64_t(d) * sp.tiles;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd level ranks equal digits in reverse@src/cuda/aggregate.cu@const std::uint32_t lp = st.lstart[d] + base + __popc(peers & lt);@const std::uint32_t lp = st.lstart[d] + base + __popc(peers) - 1 - __popc(peers & lt);@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd rows chunks keep their first places@src/cuda/aggregate.cu@rows[threadIdx.x] += (threadIdx.x + 1 < kLevelDigits ? st.lstart[threadIdx.x + 1] : std::uint32_t(tn)) - st.lstart[threadIdx.x];@(void)tn;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd direct rows start one place late@src/cuda/aggregate.cu@row_ptr[row_of(threadIdx.x)] = std::uint32_t(first + st.lstart[threadIdx.x]);@row_ptr[row_of(threadIdx.x)] = std::uint32_t(first + st.lstart[threadIdx.x] + 1);@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd ignores ONESHOT_W=late@src/cuda/aggregate.cu@knobs.oneshot_msd && !knobs.oneshot_w_late : knobs.build_msd;@knobs.oneshot_msd : knobs.build_msd;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "build sort knob ignored@src/cuda/aggregate.cu@!knobs.oneshot_w_late : knobs.build_msd;@!knobs.oneshot_w_late : false;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "packed column's walk compiled for the plain column@src/cuda/aggregate_walk.cu@return launch(staged_rows_kernel<TR, warps, I, kWCompactLidx>);@return launch(staged_rows_kernel<TR, warps, I, kWCompact>);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "row starts skip the suffix minimum@src/cuda/aggregate.cu@(void)row_ptr_suffix_min(rp, N, keys.Alternate(), min_bytes, s);@if (false) (void)row_ptr_suffix_min(rp, N, keys.Alternate(), min_bytes, s);@1@CudaAggregate.RowStartsScanIsTheSearch"
  "row starts at every edge of a row@src/cuda/aggregate.cu@ && k[j] != prev)@)@1@CudaAggregate.RowStartsScanIsTheSearch"
  "one-shot scratch in the default pool@src/cuda/aggregate.cu@const ScratchPoolScope scratch(knobs.oneshot_own_pool);@const ScratchPoolScope scratch(false);@1@CudaAggregate.OneShotAllocatesFromTheScratchPoolOnly"
  "scratch pool scope never opens@src/cuda/runtime.cu@if (on_) ++g_scratch_scope;@(void)on_;@1@CudaAggregate.OneShotAllocatesFromTheScratchPoolOnly"
  "build pool knob ignored by the w tables' arena@src/cuda/aggregate.cu@const ScratchPoolScope scratch(plan.build_own_pool);@const ScratchPoolScope scratch(false);@1@CudaAggregate.BuildPoolKnobPutsTheBuildArenasInTheScratchPool"
  "build pool knob ignored by the sort's arena@src/cuda/aggregate.cu@const ScratchPoolScope scratch(knobs.build_own_pool);@const ScratchPoolScope scratch(false);@3@CudaAggregate.BuildPoolKnobPutsTheBuildArenasInTheScratchPool"
  "msd sample finds no skew@src/cuda/aggregate.cu@mine += c > s.big ? c : 0u;@mine += 0u;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "own hist misses each warp's last round@src/cuda/aggregate.cu@if (32 * r < lim) atomicAdd(&hh[@if (32 * r + 32 < lim) atomicAdd(&hh[@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "scatter hist flushes nothing@src/cuda/aggregate.cu@hs.template flush<kFirstThreads>(hh);  // the block's counts out, once@(void)hh;@1@CudaAggregate.FusedFirstRadixPassIsTheSamePlan"
  "plan tail's last block reports a clean build@src/cuda/aggregate.cu@host[threadIdx.x] = atomicAdd(status + threadIdx.x, 0ull);@host[threadIdx.x] = threadIdx.x == 0 ? ~0ull : 0ull;@1@CudaAggregate.PlanTailOneKernelIsTheTwo"
  "msd empty buckets' rows unwritten@src/cuda/aggregate.cu@if (threadIdx.x < kLevelDigits && row_of(threadIdx.x) < N) row_ptr[row_of(threadIdx.x)] = bt.start[j];@(void)0;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "msd rows before the first batch's unwritten@src/cuda/aggregate.cu@if (lead > 0) PIPELINK_CUDA_CHECK(cudaMemsetAsync(rp, 0, lead * sizeof(std::uint32_t), s));@(void)lead;@1@CudaAggregate.OneShotMsdSortGivesTheOneSortsBits"
  "row weight drops edges per row@src/cuda/aggregate.cu@return k > 0 ? r * m / k : 0;@return k > 0 ? r / k : 0;@1@CudaAggregate.RowWeightSizesTheWorkSplit"
  "gathering walk compiled as plan order@src/cuda/aggregate_walk.cu@return launch(staged_rows_kernel<TR, warps, I, kWById>);@return launch(staged_rows_kernel<TR, warps, I, kWPlanOrder>);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "plan-order walk compiled as gathering@src/cuda/aggregate_walk.cu@return launch(staged_rows_kernel<TR, warps, I, kWPlanOrder>);@return launch(staged_rows_kernel<TR, warps, I, kWById>);@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "held slots not restarted with the ring@src/cuda/aggregate_walk.cu@int islot = 0, cslot = 0;@int islot = kb > 0, cslot = 0;@1@CudaAggregate.PlanKnobsKeepTheBitsOfUnsplitRows"
  "staged walk does not restart after a split row@src/cuda/aggregate_walk.cu@jumped = r >= r1 || rbeg != kk;@jumped = r >= r1;@1@CudaAggregate.PlanKnobsKeepTheBitsOfUnsplitRows"
  "held walk reads a stale slot@src/cuda/aggregate_walk.cu@cslot = cslot == S - 1 ? 0 : cslot + 1;@cslot = cslot == S - 2 ? 0 : cslot + 1;@1@CudaAggregate.StagedIssueVariantsGiveTheSameBits"
  "item order not the default@src/cuda/knobs.cpp@k.item_order = !knob_is_second(@k.item_order = knob_is_second(@1@CudaAggregate.ItemOrderKeepsTheBits"
  "item order drops the rank within a warp@src/cuda/aggregate.cu@+ before + rank] = std::int32_t(i);@+ before] = std::int32_t(i);@1@CudaAggregate.ItemOrderKeepsTheBits"
  "one-shot skips the w permutation tile knob@src/cuda/aggregate.cu@  (void)w_permute_tile(E, false);@  (void)E;@1@CudaAggregate.WeightPermutationKnobErrorsComeFirst"
  "one-shot skips the w permutation compaction knob@src/cuda/aggregate.cu@(void)w_permute_compact();  // one-shot: the compaction knob too@(void)0;@1@CudaAggregate.WeightPermutationKnobErrorsComeFirst"
  "force wide knob ignored@src/cuda/aggregate.cu@|| (force && *force == '1');@|| (force && false);@1@CudaAggregate.WidePlanLayoutAtSmallSizes"
  "cap ranges take the whole list's temp each@src/cuda/short_build.hpp@return ranges_for(16.0 + temp / double(std::max<std::int64_t>(E, 1)), E, cap);@return ranges_for(16.0, E, cap - temp);@1@CudaAggregate.BuildMemoryCapBelowTheSortsTempStillSortsInRanges"
  "gather_scale capture not refused@src/cuda/aggregate.cu@    refuse_capture(s, \"gather_scale: a call\", \"run it before or after the capture\");@    (void)0;@1@CudaCapture.ThreeOpReferenceOpsRefuseACaptureAndTouchNothing"
  "index_add capture not refused@src/cuda/aggregate.cu@    refuse_capture(s, \"index_add: a call\", \"run it before or after the capture\");@    (void)0;@1@CudaCapture.ThreeOpReferenceOpsRefuseACaptureAndTouchNothing"
  "build pool knob ignored by the msd build's keys@src/cuda/aggregate.cu@const ScratchPoolScope scratch(knobs.build_own_pool);@const ScratchPoolScope scratch(false);@1@CudaAggregate.BuildPoolKnobPutsTheBuildArenasInTheScratchPool"
)

# MUTANT_TEXTS=1: only check that every mutant's text is found in the tree as it stands (no GPU,
# no build; scripts/test.sh runs it, so a mutant whose code moved fails CI instead of costing a
# device call: session 22's "writes out from zero starts" could not apply on the H200).
if [ -n "${MUTANT_TEXTS:-}" ]; then
  bad=0
  for m in "${mutations[@]}"; do
    IFS='@' read -r name file old new nth filter <<<"$m"
    python3 - "$file" "$old" "$nth" <<'EOF2' || { echo "MUTANT $name: text not found in $file"; bad=1; }
import sys
path, old, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = open(path).read()
i = -1
for _ in range(nth):
    i = s.find(old, i + 1)
    if i < 0:
        sys.exit(1)
EOF2
  done
  [ $bad -eq 0 ] && echo "mutation-check: all ${#mutations[@]} mutant texts apply"
  exit $bad
fi
OUT=${OUT:-$PWD/out/mutants}
mkdir -p "$OUT"
log=$OUT/mutants.log
: >"$log"
work=$(mktemp -d /tmp/pipelink-mutants.XXXXXX) || exit 2
trap 'rm -rf "$work"' EXIT
if git rev-parse --git-dir >/dev/null 2>&1; then  # tracked and untracked-not-ignored files that exist
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    xargs -0 cp --parents -t "$work" || { echo "copying the tree failed"; exit 2; }
else
  tar --exclude=./build --exclude=./.deps --exclude=./out -cf - . | tar -C "$work" -xf - || { echo "copying the tree failed"; exit 2; }
fi
DEPS=$PWD/.deps/root/usr
export LD_LIBRARY_PATH=$DEPS/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# Until session 50 each mutant recompiled src/cuda/aggregate.cu, one translation unit: ~80 s a
# mutant on the GPU machine (session 49: three mutants and the first build in 280 s), most of a
# mutants step. Since the walk's split (perf-notes v53) a mutant recompiles its own unit only
# (aggregate.cu or aggregate_walk.cu; a mutant of aggregate_common.cuh both).
# nvcc's --split-compile runs cicc's and ptxas's optimizations on several threads: 40.5 -> 33.7 s
# on this 2-core machine with 2 (cicc 14.9 -> 12.1 s, ptxas 11.0 -> 6.8; the host compiler's
# 10.7 s stays serial), more with the GPU machine's 16 (0: every core). Its SASS differs from the
# normal build's (register choices and order in some kernels; every kernel's register and shared
# counts the same), so it is for these builds only, whose tests judge a mutant's semantics, not
# its speed; the baselines below run on the same build. MUTANT_SPLIT_COMPILE=off: as the normal build.
split=()
[ "${MUTANT_SPLIT_COMPILE:-0}" != off ] && split=(-DCMAKE_CUDA_FLAGS="--split-compile=${MUTANT_SPLIT_COMPILE:-0}")
cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPELINK_CUDA=ON -DCMAKE_PREFIX_PATH="$DEPS" \
  -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu "${split[@]}" >>"$log" 2>&1 || { echo "configure failed (see $log)"; exit 2; }
build() { cmake --build "$work/build" --target test_cuda_aggregate test_cuda_capture -j "$(nproc)" >>"$log" 2>&1; }
# A filter's test binary, by its suite: CudaCapture (tests/cuda/test_cuda_capture.cpp), else
# test_cuda_aggregate.
bin_for() { case $1 in CudaCapture.*) echo test_cuda_capture ;; *) echo test_cuda_aggregate ;; esac; }
# Runs one gtest filter within $2 seconds (60 unless given); prints its exit status (124/137:
# killed by the timeout). A run that executed no test prints "none".
run_filter() {
  local out rc
  out=$(timeout -k 10 "${2:-60}" "$work/build/tests/$(bin_for "$1")" --gtest_filter="$1" 2>&1)
  rc=$?
  printf '%s\n' "$out" >>"$log"
  if [ $rc -eq 0 ] && ! grep -qE '^\[  PASSED  \] [1-9]' <<<"$out"; then echo none; else echo $rc; fi
}

fail=0
selected=()
for m in "${mutations[@]}"; do
  IFS='@' read -r name file old new nth filter <<<"$m"
  if [ -n "${MUTANT_ONLY:-}" ]; then  # MUTANT_ONLY=frees: the mutants whose name has it; "a|b": either
    keep=
    IFS='|' read -r -a parts <<<"$MUTANT_ONLY"
    for part in "${parts[@]}"; do [[ -n "$part" && "$name" == *"$part"* ]] && keep=1; done
    [ -z "$keep" ] && continue
  fi
  selected+=("$m")
done
build || { echo "the unmutated tree does not build (see $log)"; exit 2; }
# Baselines first, on the unmutated build: each filter must run at least one test and pass,
# or its mutant's failure would prove nothing. Once a filter (session 36: three mutants of one
# test ran its ~35 s baseline three times and the deadline cut the mutants), and timed: a
# mutant's run may take 3x its baseline plus 10 s (at least 20, at most 60) before it counts
# as hung (a hang cost the full 60 s before).
declare -A limit=()
for m in "${selected[@]}"; do
  IFS='@' read -r name file old new nth filter <<<"$m"
  [ -n "${limit[$filter]:-}" ] && continue
  echo "=== baseline $filter" >>"$log"
  t0=$SECONDS
  rc=$(run_filter "$filter")
  took=$((SECONDS - t0))
  lim=$((3 * took + 10))
  [ $lim -lt 20 ] && lim=20
  [ $lim -gt 60 ] && lim=60
  limit[$filter]=$lim
  echo "baseline $filter: ${took}s, mutants get ${lim}s" >>"$log"
  case $rc in
    0) ;;
    none) echo "BASELINE $filter: ran no test (no GPU here?); mutants not judged"; fail=1 ;;
    *) echo "BASELINE $filter: fails without a mutation (exit $rc, see $log)"; fail=1 ;;
  esac
done
[ $fail -eq 0 ] || exit 1
for m in "${selected[@]}"; do
  IFS='@' read -r name file old new nth filter <<<"$m"
  cp "$work/$file" "$work/$file.orig"
  if ! python3 - "$work/$file" "$old" "$new" "$nth" <<'EOF'
import sys
path, old, new, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = open(path).read()
i = -1
for _ in range(nth):
    i = s.find(old, i + 1)
    if i < 0:
        sys.exit(f"occurrence {nth} of {old!r} not found")
open(path, "w").write(s[:i] + new + s[i + len(old):])
EOF
  then echo "MUTANT $name: could not apply (code moved?)"; fail=1; continue; fi
  echo "=== $name" >>"$log"
  if build; then
    rc=$(run_filter "$filter" "${limit[$filter]}")
    case $rc in
      0) echo "MUTANT $name: NOT caught by $filter"; fail=1 ;;
      1) echo "MUTANT $name: caught by $filter (test failed)" ;;
      124|137) echo "MUTANT $name: caught by $filter (hung: killed after ${limit[$filter]} s, 3x its baseline + 10)" ;;
      134|139) echo "MUTANT $name: caught by $filter (crashed: exit $rc)" ;;
      *) echo "MUTANT $name: not judged: $filter exited $rc (see $log)"; fail=1 ;;
    esac
  else
    echo "MUTANT $name: does not build"; fail=1
  fi
  cp "$work/$file.orig" "$work/$file" && touch "$work/$file"  # newer than the mutant's object: rebuilt
done
exit $fail
