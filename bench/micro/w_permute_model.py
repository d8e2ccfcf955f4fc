"""A numpy model of bench/micro/w_permute_micro.cu: the structures its setup builds (tile-local
places tl, the bucket-local index lidx, the per-tile run tables) and its two passes, kernel by
kernel, on small graphs; each must reproduce the gather w[perm] bit for bit. It checks the index
arithmetic on a machine without a GPU (session 14: every case below OK); the micro checks the
same on the GPU.

    python3 bench/micro/w_permute_model.py      (needs numpy)
"""
import numpy as np
rng = np.random.default_rng(1)
for E, N, T in [(100000, 3000, 4096), (65536, 500, 4096), (12345, 50, 1024), (4096, 10, 4096), (1000, 7, 256)]:
    B = T
    dst = rng.integers(0, N, E); w = rng.standard_normal(E).astype(np.float32)
    perm = np.argsort(dst, kind='stable').astype(np.int64)          # plan order
    ref = w[perm]
    tiles = (E + T - 1)//T; nb = (E + B - 1)//B
    pos = np.empty(E, np.int64); pos[perm] = np.arange(E)
    bkt = pos // B
    key1 = (np.arange(E)//T)*nb + bkt
    s = np.argsort(key1, kind='stable')
    tl = np.empty(E, np.int64); tl[s] = np.arange(E) % T
    r = np.argsort(bkt, kind='stable')
    q = np.empty(E, np.int64); q[r] = np.arange(E)
    lidx = q[perm] - (np.arange(E)//B)*B
    assert lidx.min() >= 0 and lidx.max() < B
    cnt = np.bincount(key1, minlength=tiles*nb)
    start = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    rs = np.zeros((tiles, nb+1), np.int64); ds = np.zeros((tiles, nb), np.int64)
    for t in range(tiles):
        ln = min(T, E - t*T)
        rs[t, nb] = ln
        g = start[t*nb:(t+1)*nb]
        rs[t, :nb] = g - t*T
        c = cnt[t*nb:(t+1)*nb]
        ds[t] = np.where(c > 0, q[s[np.minimum(g, E-1)]], 0)
    assert rs.max() <= 65535
    inter = np.full(E, np.nan, np.float32)
    for t in range(tiles):               # pass 1
        t0 = t*T; ln = min(T, E - t0)
        sm = np.full(T, np.nan, np.float32); sm[tl[t0:t0+ln]] = w[t0:t0+ln]
        for b in range(nb):
            a, n = rs[t, b], rs[t, b+1] - rs[t, b]
            inter[ds[t, b]:ds[t, b]+n] = sm[a:a+n]
        # pass1<true>: a thread a slot, its run the last b with rs[t, b] <= i
        i = np.arange(ln)
        b = np.searchsorted(rs[t, :nb], i, side='right') - 1
        assert np.array_equal(inter[ds[t, b] + (i - rs[t, b])].view(np.uint32), sm[:ln].view(np.uint32))
    out = np.full(E, np.nan, np.float32)
    for b in range(nb):                  # pass 2
        p0 = b*B; ln = min(B, E - p0)
        sm = inter[p0:p0+ln].copy()
        out[p0:p0+ln] = sm[lidx[p0:p0+ln]]
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32)), (E, N, T)
    print("ok", E, N, T, tiles, nb)
