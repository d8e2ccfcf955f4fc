#!/usr/bin/env python3
"""Load-balance model of the staged planned run (src/cuda/aggregate_walk.cu, staged_rows_kernel).

Why: power-law's planned run costs ~1.10x products-like per edge on the H200 (v8), although its
hub sources hit L2 more often. The launch's work items are warps: first one per segment of a split
row (rows longer than S edges, in segments of S), then one per group (the rows whose first edge
lies in a chunk of C edges, split rows left out). A warp's time is modelled as its edges (plus a
per-row cost, --row-cost, in edge units); warps start in launch order on 132 x 32 slots, each on
the slot that frees first (greedy list scheduling). The makespan over the ideal (all edges spread
evenly) is the tail the imbalance adds.

Degrees: power-law is the project's R-MAT (scale 21, 63M edges, a = .57, b = c = .19, node ids as
drawn): a destination's bits are 1 with probability b + d = 0.24, MSB first, so row r's expected
in-degree is E * 0.24^k * 0.76^(21 - k) with k = popcount(r); degrees are drawn Poisson around it.
products-like: 2,449,029 rows, Poisson(E / N). --degrees takes power-law's real in-degrees
instead (an .npy of N counts, e.g. np.bincount(dst) of `make_workload("power-law")`'s graph;
they match the model's closely: 7547 rows over 1024 edges holding 40.8% of the edges).

--order weight: the launch order of v40 (src/cuda/aggregate.cu, item_class_counts_kernel): items
in 8 classes of C / 4 by their counted weight (edges + rows * beta), heaviest class first, launch
order within a class. Measured on power-law's real degrees (C = S = 1024, beta = 1, row cost
0.5): 1.065x the ideal plain, 1.014x by weight, 1.006x longest first. products-like has no
split or long rows, so the library keeps its plain order (1.015; by weight it would be 1.011-1.013).

    python3 bench/micro/balance_model.py [--row-cost 0] [--seed 1] [--beta 0] [--degrees power-law.npy]
                                         [--order plain|weight]
"""
from __future__ import annotations

import argparse
import heapq

import numpy as np

SLOTS = 132 * 32


def power_law_degrees(rng: np.random.Generator, scale: int = 21, edges: int = 63_000_000) -> np.ndarray:
    r = np.arange(1 << scale, dtype=np.uint32)
    k = np.zeros(r.shape, dtype=np.int64)
    for b in range(scale):
        k += (r >> b) & 1
    mean = edges * 0.24 ** k * 0.76 ** (scale - k)
    return rng.poisson(mean)


def products_like_degrees(rng: np.random.Generator, n: int = 2_449_029, edges: int = 61_859_140) -> np.ndarray:
    return rng.poisson(edges / n, n)


def items(deg: np.ndarray, chunk: int, seg: int, row_cost: float, beta: float = 0.0) -> tuple[np.ndarray, float]:
    """Work of each warp item in launch order (segments, then groups), and the total.

    beta = 0: group g owns the rows whose first edge lies in [g*C, (g+1)*C). beta > 0: rows are
    counted too, as beta edges each: group g owns the rows r with row_ptr[r] + beta * r in
    [g*C, (g+1)*C), so a long run of empty rows is spread over groups. Production: beta = m / k
    (PIPELINK_AGG_EDGES_PER_ROW / _ROWS_PER_EDGE), 1 since v40 (0.25 from v9).
    """
    split = deg > seg
    nseg = (deg[split] + seg - 1) // seg
    seg_work = []
    for d, n in zip(deg[split], nseg):
        full = [seg] * (int(n) - 1) + [int(d) - seg * (int(n) - 1)]
        seg_work.extend(full)
    row_ptr = np.concatenate([[0], np.cumsum(deg)])
    pos = row_ptr[:-1] + beta * np.arange(len(deg))
    groups = int((row_ptr[-1] + beta * len(deg)) // chunk) + 1
    owner = np.minimum((pos // chunk).astype(np.int64), groups - 1)
    own_edges = np.where(split, 0, deg).astype(np.float64) + row_cost
    group_work = np.bincount(owner, weights=own_edges, minlength=groups)
    work = np.concatenate([np.asarray(seg_work, dtype=np.float64), group_work])
    return work, float(work.sum())


def weight_order(counted: np.ndarray, chunk: int, classes: int = 8) -> np.ndarray:
    """Launch order by weight class (classes of chunk / 4, heaviest first, stable within a class)."""
    cls = np.minimum((counted * 4 // chunk).astype(np.int64), classes - 1)
    return np.concatenate([np.nonzero(cls == c)[0] for c in range(classes - 1, -1, -1)])


def makespan(work: np.ndarray, slots: int = SLOTS) -> float:
    free = [0.0] * slots
    heapq.heapify(free)
    end = 0.0
    for w in work:
        t = heapq.heappop(free) + w
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row-cost", type=float, default=0.0, help="cost of a row in edge units (empty rows too)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--beta", type=float, default=0.0, help="rows counted as beta edges each when forming groups")
    ap.add_argument("--degrees", help="power-law's in-degrees as an .npy (default: the R-MAT model's)")
    ap.add_argument("--order", choices=["plain", "weight"], default="plain", help="the items' launch order")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    power_law = np.load(a.degrees) if a.degrees else power_law_degrees(rng)
    graphs = {"products-like": products_like_degrees(rng), "power-law": power_law}
    print(f"row cost {a.row_cost} edge units, groups count rows as {a.beta} edges; {SLOTS} warp slots; "
          "makespan / ideal (largest item, items)")
    print(f"{'C':>5} {'S':>5}  " + "  ".join(f"{g:>32}" for g in graphs))
    for chunk, seg in [(1024, 2048), (1024, 1024), (512, 1024), (512, 512), (1024, 512), (256, 512)]:
        cells = []
        for deg in graphs.values():
            work, total = items(deg, chunk, seg, a.row_cost, a.beta)
            if a.order == "weight":
                counted, _ = items(deg, chunk, seg, a.beta if a.beta > 0 else 0.0, a.beta)
                work = work[weight_order(counted, chunk)]
            m = makespan(work)
            cells.append(f"{m / (total / SLOTS):.3f} ({int(work.max())}, {len(work)})")
        print(f"{chunk:>5} {seg:>5}  " + "  ".join(f"{c:>32}" for c in cells))


if __name__ == "__main__":
    main()
