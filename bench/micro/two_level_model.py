"""A model of the two-level plan build's index arithmetic (src/cuda/two_level_sort.cuh), for
checking it on a machine without a GPU: after CUB's stable sort on the key's top bits, the rank
kernel (buckets of at most CAP edges) and the count / scan / place kernels (bigger buckets, over
CAP-edge chunks of the sorted array) must put every edge where a stable sort on the whole key puts
it, and write the same row offsets. It mirrors the kernels' blocks, sides, chunk ranges, the
striped element order and the warp-match ranking step by step; it does not model timing, memory
or barriers (the GPU test TwoLevelBuildIsTheSamePlan and compute-sanitizer check those).

    python3 bench/micro/two_level_model.py [--cases 300] [--seed 1]
"""
import argparse
import random

LO, THREADS = 6, 256
ROWS = 1 << LO


def stable_positions(digits, base, cap):
    """two_level::stable_positions: the elements in striped order j * THREADS + t, a step of
    THREADS at a time; in each step warp w's lanes rank among their peers (match_any), and the 64
    digit threads turn the warps' counts into first positions, carrying `run` across steps."""
    n = len(digits)
    run = [0] * ROWS
    pos = [None] * n
    steps = (cap + THREADS - 1) // THREADS
    for j in range(steps):
        if j * THREADS >= n:
            continue
        wcnt = [[0] * ROWS for _ in range(THREADS // 32)]
        ranks = {}
        for w in range(THREADS // 32):
            lanes = [j * THREADS + w * 32 + lane for lane in range(32)]
            seen = {}
            for i in lanes:
                if i < n:
                    d = digits[i]
                    ranks[i] = seen.get(d, 0)
                    seen[d] = seen.get(d, 0) + 1
            for d, c in seen.items():
                wcnt[w][d] = c
        for d in range(ROWS):
            r = run[d]
            for w in range(THREADS // 32):
                c = wcnt[w][d]
                wcnt[w][d] = r
                r += c
            run[d] = r
        for w in range(THREADS // 32):
            for lane in range(32):
                i = j * THREADS + w * 32 + lane
                if i < n:
                    d = digits[i]
                    pos[i] = base[d] + wcnt[w][d] + ranks[i]
    return pos


def bucket_of(bptr, B, pos):
    lo, hi = 0, B - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if bptr[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


def big_side(bptr, B, c0, c1, side, cap):
    b0 = bucket_of(bptr, B, c0)
    b = b0 if side == 0 else bucket_of(bptr, B, c1 - 1)
    if side == 1 and b == b0:
        return -1
    return b if bptr[b + 1] - bptr[b] > cap else -1


def two_level(dst, N, cap):
    """The kernels' result for edges with destinations `dst` (edge order): the plan's edge ids
    and row_ptr, with None for anything left unwritten."""
    E = len(dst)
    B = (N + ROWS - 1) // ROWS
    # CUB, stable on dst >> LO; bptr by binary search.
    order = sorted(range(E), key=lambda e: dst[e] >> LO)
    keys = [dst[e] for e in order]
    bptr = [0] * (B + 1)
    for b in range(B + 1):
        bptr[b] = next((i for i, k in enumerate(keys) if (k >> LO) >= b), E)
    out = [None] * E
    row_ptr = [None] * (N + 1)

    def write_row_ptr(b, first_of_digit, counts):
        for d in range(ROWS):
            r = b * ROWS + d
            if r < N:
                assert row_ptr[r] is None, f"row {r} written twice"
                row_ptr[r] = bptr[b] + first_of_digit[d]
        if b == B - 1:
            row_ptr[N] = bptr[B]

    # rank_kernel
    for b in range(B):
        bs, n = bptr[b], bptr[b + 1] - bptr[b]
        if n > cap:
            continue
        digits = [keys[bs + i] & (ROWS - 1) for i in range(n)]
        counts = [digits.count(d) for d in range(ROWS)]
        start = [sum(counts[:d]) for d in range(ROWS)]
        write_row_ptr(b, start, counts)
        for i, p in enumerate(stable_positions(digits, start, cap)):
            assert 0 <= p < n and out[bs + p] is None, (b, i, p)
            out[bs + p] = order[bs + i]
    # count_kernel
    C = (E + cap - 1) // cap

    def big_parts():  # two_level::big_part over every chunk and side: (c, side, lo, hi)
        for c in range(C):
            c0, c1 = c * cap, min(E, c * cap + cap)
            for side in (0, 1):
                b = big_side(bptr, B, c0, c1, side, cap)
                if b >= 0:
                    yield c, side, max(c0, bptr[b]), min(c1, bptr[b + 1])

    cnt = {}
    for c, side, lo, hi in big_parts():
        h = [0] * ROWS
        for i in range(lo, hi):
            h[keys[i] & (ROWS - 1)] += 1
        cnt[(c, side)] = h
    # scan_kernel
    for b in range(B):
        bs, be = bptr[b], bptr[b + 1]
        if be - bs <= cap:
            continue
        cf, cl = bs // cap, (be - 1) // cap
        side_of = lambda c: 1 if (c == cf and bs > c * cap) else 0
        tot = [sum(cnt[(c, side_of(c))][d] for c in range(cf, cl + 1)) for d in range(ROWS)]
        dstart = [sum(tot[:d]) for d in range(ROWS)]
        write_row_ptr(b, dstart, tot)
        for d in range(ROWS):  # the four groups' split does not change the running sum
            base = bs + dstart[d]
            for c in range(cf, cl + 1):
                v = cnt[(c, side_of(c))][d]
                cnt[(c, side_of(c))][d] = base
                base += v
    # place_kernel
    for c, side, lo, hi in big_parts():
        digits = [keys[i] & (ROWS - 1) for i in range(lo, hi)]
        for i, p in enumerate(stable_positions(digits, cnt[(c, side)], cap)):
            assert 0 <= p < E and out[p] is None, (c, side, i, p)
            out[p] = order[lo + i]
    return out, row_ptr


def check(dst, N, cap):
    E = len(dst)
    want = sorted(range(E), key=lambda e: dst[e])  # stable
    want_rp = [0] * (N + 1)
    for d in dst:
        want_rp[d + 1] += 1
    for r in range(N):
        want_rp[r + 1] += want_rp[r]
    got, got_rp = two_level(dst, N, cap)
    assert got == want, "edge order differs"
    assert got_rp == want_rp, "row offsets differ"


def layouts(rng, cap):
    """Degree layouts around the chunk and bucket edges, and random ones with hubs."""
    def from_bucket_sizes(sizes, N):
        deg = [0] * N
        for b, s in enumerate(sizes):
            rows = list(range(b * ROWS, min(N, b * ROWS + ROWS)))
            if not rows or s == 0:
                continue
            for _ in range(s):  # mostly one row of the bucket, some spread
                deg[rows[0] if rng.random() < 0.7 else rng.choice(rows)] += 1
        return deg
    fixed = [
        [2 * cap, cap, cap + 1, cap + cap // 2, 0, 0, 5, cap + 3],
        [cap, cap, cap],
        [cap + 1],
        [0, 0, 3 * cap + 7, 0],
        [1] * 10 + [4 * cap],
    ]
    for sizes in fixed:
        yield from_bucket_sizes(sizes, len(sizes) * ROWS - rng.randrange(0, ROWS // 2))
    while True:
        nb = rng.randrange(1, 12)
        sizes = [rng.choice([0, rng.randrange(1, cap), cap, cap + 1, rng.randrange(cap, 4 * cap)]) for _ in range(nb)]
        yield from_bucket_sizes(sizes, nb * ROWS - rng.randrange(0, ROWS))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    # A small capacity keeps the pure-Python model fast while every path (rank, big buckets over
    # several chunks, both sides) is taken; the kernels' index logic does not depend on its value
    # beyond CAP being a multiple of THREADS.
    ap.add_argument("--cap", type=int, default=512)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    gen = layouts(rng, a.cap)
    for case in range(a.cases):
        deg = next(gen)
        N = len(deg)
        dst = [r for r in range(N) for _ in range(deg[r])]
        rng.shuffle(dst)
        if not dst:
            continue
        try:
            check(dst, N, a.cap)
        except AssertionError as ex:
            raise SystemExit(f"case {case} (N={N}, E={len(dst)}): {ex}")
    print(f"two_level_model: {a.cases} cases, cap {a.cap}: edge order and row offsets as a stable sort")


if __name__ == "__main__":
    main()
