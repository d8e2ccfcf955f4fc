"""A model of the two-level plan build's index arithmetic (src/cuda/two_level_sort.cuh), for
checking it on a machine without a GPU: after CUB's stable sort on the key's top bits, the rank
kernel (buckets of at most CAP edges) and the count / scan / place kernels (bigger buckets, over
CAP-edge chunks of the sorted array) must put every edge where a stable sort on the whole key puts
it, and write the same row offsets. It mirrors the kernels' blocks, sides, chunk ranges, each
warp's contiguous run of elements and the warp-match ranking step by step; it does not model timing, memory
or barriers (the GPU test TwoLevelBuildIsTheSamePlan and compute-sanitizer check those).

    python3 bench/micro/two_level_model.py [--cases 300] [--seed 1]
"""
import argparse
import random

LO, THREADS = 6, 256
ROWS = 1 << LO


def stable_positions(digits, base, cap):
    """two_level::warp_ranks + warp_offsets: warp w holds the contiguous run of elements
    [w * J * 32, (w + 1) * J * 32), its lane l element (w * J + j) * 32 + l in slot j; a warp ranks
    its run a slot at a time (match_any peers, a per-warp running count per digit), then the 64
    digit threads turn the warps' counts into each warp's first position of that digit."""
    n = len(digits)
    J, W = cap // THREADS, THREADS // 32
    wrun = [[0] * ROWS for _ in range(W)]
    loc = {}
    for w in range(W):
        for j in range(J):
            if (w * J + j) * 32 >= n:
                continue
            seen = {}
            for lane in range(32):
                i = (w * J + j) * 32 + lane
                if i < n:
                    d = digits[i]
                    loc[i] = wrun[w][d] + seen.get(d, 0)
                    seen[d] = seen.get(d, 0) + 1
            for d, c in seen.items():
                wrun[w][d] += c
    for d in range(ROWS):
        r = 0
        for w in range(W):
            c = wrun[w][d]
            wrun[w][d] = r
            r += c
    pos = [None] * n
    for i in range(n):
        w = i // (J * 32)
        pos[i] = base[digits[i]] + wrun[w][digits[i]] + loc[i]
    return pos


def big_side(c, cf, bs, cap):
    """two_level::big_side: the slot of a big bucket starting at bs (first chunk cf) in chunk c."""
    return 1 if (c == cf and bs > c * cap) else 0


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

    C = (E + cap - 1) // cap
    big = [-1] * (2 * C)  # launch's memset
    # rank_kernel: big buckets mark their chunks' slots, the others are ranked
    for b in range(B):
        bs, n = bptr[b], bptr[b + 1] - bptr[b]
        if n > cap:
            cf, cl = bs // cap, (bs + n - 1) // cap
            for c in range(cf, cl + 1):
                slot = c * 2 + big_side(c, cf, bs, cap)
                assert big[slot] == -1, f"chunk {c} slot {slot % 2} marked twice"
                big[slot] = b
            continue
        digits = [keys[bs + i] & (ROWS - 1) for i in range(n)]
        counts = [digits.count(d) for d in range(ROWS)]
        start = [sum(counts[:d]) for d in range(ROWS)]
        write_row_ptr(b, start, counts)
        for i, p in enumerate(stable_positions(digits, start, cap)):
            assert 0 <= p < n and out[bs + p] is None, (b, i, p)
            out[bs + p] = order[bs + i]
    # count_kernel

    def big_parts():  # two_level::big_part over every chunk and side: (c, side, lo, hi)
        for c in range(C):
            c0, c1 = c * cap, min(E, c * cap + cap)
            for side in (0, 1):
                b = big[c * 2 + side]
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
        side_of = lambda c: big_side(c, cf, bs, cap)
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
