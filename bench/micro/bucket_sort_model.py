"""A model of bucket_sort_rows_kernel (src/cuda/aggregate.cu at d346d51, PIPELINK_AGG_BUILD_MSD=1;
removed in c876671 after it lost on the H200, docs/perf-notes.md v11) in numpy:
per bucket of 256 rows, eight warp eighths, per-warp digit counts, the block scan, and the stable
scatter ranked among same-digit lanes of each 32-edge chunk, plus row_ptr. Checked against a
stable sort by destination and its row offsets on random graphs, with and without a hub row.
It models the algorithm, not the CUDA code: the bitwise test on the GPU is
PlanBuiltInDestinationRangesIsTheSamePlan.

    /usr/bin/python3 bench/micro/bucket_sort_model.py      (needs numpy; ~10 s)
"""
import numpy as np
rng=np.random.default_rng(1)
def kernel(keys,pairs,bucket_ptr,N):
    E=len(keys); out=np.full(E,-1,dtype=np.int64); row_ptr=np.full(N+1,-1,dtype=np.int64)
    B=len(bucket_ptr)-1
    for b in range(B):
        bs,be=bucket_ptr[b],bucket_ptr[b+1]; n=be-bs; W=8
        cnt=np.zeros((W,256),dtype=np.int64)
        per=(n+W-1)//W
        rngs=[(bs+min(n,w*per), bs+min(n,(w+1)*per)) for w in range(W)]
        for w,(ws,we) in enumerate(rngs):
            for i in range(ws,we): cnt[w][keys[i]&255]+=1
        total=cnt.sum(0); base=np.concatenate([[0],np.cumsum(total)[:-1]])
        off=np.zeros_like(cnt)
        for t in range(256):
            run=base[t]
            for v in range(W): off[v][t]=run; run+=cnt[v][t]
            row=b*256+t
            if row<N: row_ptr[row]=bs+base[t]
        if b==0: row_ptr[N]=bucket_ptr[B]
        for w,(ws,we) in enumerate(rngs):
            for i0 in range(ws,we,32):
                lanes=[i0+l for l in range(32) if i0+l<we]
                ds=[keys[i]&255 for i in lanes]
                seen={}
                for l,(i,d) in enumerate(zip(lanes,ds)):
                    rank=seen.get(d,0); seen[d]=rank+1
                    out[bs+off[w][d]+rank]=pairs[i]
                for d,c in seen.items(): off[w][d]+=c
    return out,row_ptr
for trial in range(6):  # N > 256: the MSD path
    N=int(rng.integers(257,3000)); E=int(rng.integers(1,20000))
    dst=rng.integers(0,N,E); ids=np.arange(E)
    if trial%2: dst[:E//3]=5  # a hub
    # top-bits stable sort
    order=np.argsort(dst>>8,kind='stable'); keys=dst[order]; pairs=ids[order]
    B=(N+255)>>8
    bucket_ptr=np.searchsorted(keys>>8,np.arange(B+1),side='left')
    out,rp=kernel(keys,pairs,bucket_ptr,N)
    ref=np.argsort(dst,kind='stable'); rref=np.searchsorted(np.sort(dst),np.arange(N+1),side='left')
    ok = bool((out == ref).all() and (rp == rref).all())
    print(trial, N, E, 'OK' if ok else 'MISMATCH')
    assert ok
print("all OK")
