"""A model of staged_rows_kernel's control flow (src/cuda/aggregate_walk.cu), for checking changes to
the walk on a machine without a GPU: the default per-edge walk, the event walk (EV, v8) and the
intended result (each row's edges in order, a flush to double after each full 32-edge block
inside the row, one write per row) must give the same trace of adds, flushes and writes.
It models the control flow only, not the arithmetic; the GPU tests check the bits.

    python3 bench/micro/staged_walk_model.py [--cases 200000] [--seed 1]
"""
import argparse
import random

SE = 8

def walk(lengths, seg, max_row, EV):
    # lengths: edges of rows r0..r1-1 of this group (relative); for seg: one "row" of n edges
    ends = []
    acc = 0
    for L in lengths:
        acc += L; ends.append(acc)
    n = acc
    r1 = len(lengths)
    st = dict(r=0, rbeg=0, rend=(ends[0] if not seg else n) if r1 > 0 else n)
    trace = []
    def rend_of(r):
        return ends[r] if (r < r1 and not seg) else n
    def next_row():
        st['r'] += 1; st['rbeg'] = st['rend']; st['rend'] = rend_of(st['r'])
    def write_row():
        trace.append(('write', st['r']))
    def settle():
        while st['r'] < r1 and (st['rend'] == st['rbeg'] or (not seg and st['rend'] - st['rbeg'] > max_row)):
            if st['rend'] == st['rbeg']: write_row()
            next_row()
    settle()
    guard = 0
    while st['r'] < r1:
        kb = st['rbeg']
        jumped = [False]
        ev = [min(st['rend'], st['rbeg'] + 32)]
        def event(kk):
            if kk == st['rend']:
                write_row(); next_row(); settle()
                jumped[0] = st['r'] >= r1 or st['rbeg'] != kk
                ev[0] = min(st['rend'], st['rbeg'] + 32)
            else:
                trace.append(('flush',)); ev[0] = min(st['rend'], kk + 32)
        j = 0
        while not jumped[0]:
            guard += 1
            assert guard < 100000
            k0 = kb + j * SE
            rbeg, rend = st['rbeg'], st['rend']
            assert k0 < n and rbeg <= k0 < rend, (k0, rbeg, rend, n)
            fast = (k0 + SE <= ev[0]) if EV else (k0 + SE <= rend and ((k0 - rbeg) & 31) <= 32 - SE)
            for e0 in (0, 4):
                if fast:
                    for u in range(4): trace.append(('add', k0 + e0 + u))
                    continue
                for u in range(4):
                    k = k0 + e0 + u
                    if EV:
                        if not jumped[0]:
                            trace.append(('add', k))
                            if k + 1 == ev[0]: event(k + 1)
                    else:
                        if k < n and not jumped[0]:
                            trace.append(('add', k))
                            if ((k - st['rbeg'] + 1) & 31) == 0 and k + 1 < st['rend']: trace.append(('flush',))
                            if k + 1 == st['rend']:
                                write_row(); next_row(); settle()
                                jumped[0] = st['r'] >= r1 or st['rbeg'] != k + 1
            if EV:
                if fast and k0 + SE == ev[0]: event(ev[0])
            elif fast:
                kend = k0 + SE
                if kend == st['rend']:
                    write_row(); next_row(); settle(); jumped[0] = st['r'] >= r1 or st['rbeg'] != kend
                elif ((kend - st['rbeg']) & 31) == 0:
                    trace.append(('flush',))
            j += 1
    # no add past n
    assert all(t[1] < n for t in trace if t[0] == 'add'), 'add past n'
    return trace

def reference(lengths, seg, max_row):
    # the intended result: for each non-skipped row, its edges in order with flushes after each full 32-block inside
    out = []
    start = 0
    if seg:
        L = sum(lengths)
        for k in range(L):
            out.append(('add', k))
            if (k + 1) % 32 == 0 and k + 1 < L: out.append(('flush',))
        out.append(('write', 0))
        return out
    for r, L in enumerate(lengths):
        if L == 0: out.append(('write', r))
        elif L > max_row: pass
        else:
            for i in range(L):
                out.append(('add', start + i))
                if (i + 1) % 32 == 0 and i + 1 < L: out.append(('flush',))
            out.append(('write', r))
        start += L
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    random.seed(args.seed)
    cases = 0
    for _ in range(args.cases):
        seg = random.random() < 0.1
        max_row = random.choice([2048, 40, 64, 100])  # below 2048: split rows mid-group, as a stress
        lengths = []
        for _ in range(random.randint(1, 12)):
            c = random.random()
            if c < 0.15: L = 0
            elif c < 0.5: L = random.randint(1, 40)
            elif c < 0.8: L = random.randint(25, 70)
            elif c < 0.9: L = random.choice([8, 16, 24, 31, 32, 33, 63, 64, 65])
            else: L = random.randint(60, 300)
            lengths.append(L)
        if seg:
            lengths = [random.randint(1, 2048)]
        if sum(lengths) == 0:
            continue
        a = walk(lengths, seg, max_row, False)
        b = walk(lengths, seg, max_row, True)
        ref = reference(lengths, seg, max_row)
        assert a == ref, ("per-edge walk", lengths, seg, max_row)
        assert b == ref, ("event walk", lengths, seg, max_row)
        cases += 1
    print(f"staged walk model: {cases} groups, per-edge and event walks match the intended order")


if __name__ == "__main__":
    main()
