#!/usr/bin/env python3
"""Where the staged walk restarts its ring, modelled on the host (no GPU needed).

The staged walk (staged_rows_kernel in src/cuda/aggregate.cu) starts a new pass of its ring of
stages after it skips a split row (a row longer than the segment length S, summed by other
warps) when the group still has rows after it, and opens its first pass past a split row when a
group begins with one. A test of that code needs a graph where either happens; with the chunk
C <= S (the default) it never does. This model runs the work split (group_rows_part: row r goes
to group g when row_ptr[r] + r * m / k lies in [g*C, (g+1)*C)) and the walk's settle() over the
degrees of CudaAggregate.PlanKnobsKeepTheBitsOfUnsplitRows, for its knob sets where C > S.

  scripts/walk-restarts-model.py            # the test's degrees as they are
  scripts/walk-restarts-model.py --old      # without the rows added in session 40 (0 and 0)
"""
import bisect
import sys


def degrees(old):
    n = 3000
    deg = [0] * n
    for r in range(2000):
        deg[r] = (r * 7) % 301
    for r in range(2600, n):
        deg[r] = r % 5
    deg[17] += 5000
    deg[1999] += 2049
    if not old:  # keep in step with the test
        for r, d in {2610: 120, 2660: 140, 2710: 105, 2760: 130, 2810: 115, 2860: 150, 2900: 600}.items():
            deg[r] = d
    return deg


def model(deg, S, C, k, m):
    """(restarts with rows left, groups whose first pass opens past a split row)"""
    n = len(deg)
    rp = [0]
    for d in deg:
        rp.append(rp[-1] + d)
    eb = (lambda r: r * m // k) if k > 0 else (lambda r: 0)
    groups = (rp[-1] + eb(n)) // C + 1
    keys = [rp[r] + eb(r) for r in range(n)]
    first = [n if g == groups else bisect.bisect_left(keys, g * C) for g in range(groups + 1)]
    restarts = opened_past = 0
    for g in range(groups):
        r0, r1 = first[g], first[g + 1]

        def settle(r):  # past empty rows and split rows
            while r < r1 and (deg[r] == 0 or deg[r] > S):
                r += 1
            return r

        r = settle(r0)
        opened_past += r < r1 and any(deg[q] > S for q in range(r0, r))
        while r < r1:
            nxt = settle(r + 1)
            restarts += nxt < r1 and any(deg[q] > S for q in range(r + 1, nxt))
            r = nxt
    return restarts, opened_past


if __name__ == "__main__":
    deg = degrees("--old" in sys.argv[1:])
    # The test's knob sets with C > S: (segment, chunk, rows_per_edge k, edges_per_row m).
    for name, knobs in {"S=100 C=256": (100, 256, 1, 1), "S=512 C=1024 rows_per_edge=8": (512, 1024, 8, 1),
                        "S=100 C=256 edges_per_row=64": (100, 256, 1, 64)}.items():
        restarts, opened = model(deg, *knobs)
        print(f"{name}: {restarts} restarts with rows left, {opened} groups opening past a split row")
