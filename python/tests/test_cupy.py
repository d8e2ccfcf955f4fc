"""pipelink with CuPy arrays: zero-copy through DLPack, CuPy's current stream, CuPy arrays back.

Skipped where CuPy is not importable or there is no GPU and CUDA build (CI has neither); the
H200 machine's image carries cupy-cuda13x.
"""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import pipelink  # noqa: E402
from conftest import assert_within, oracle  # noqa: E402


def _gpu() -> bool:
    try:
        return cp.cuda.runtime.getDeviceCount() > 0 and pipelink.cuda_available()
    except Exception:  # no driver, no device
        return False


pytestmark = pytest.mark.skipif(not _gpu(), reason="SKIPPED: needs a CUDA GPU, CuPy and a CUDA build of pipelink")


def graph(rng, n, e, f, index=np.int64):
    x = rng.standard_normal((n, f)).astype(np.float32)
    src = rng.integers(0, n, e).astype(index)
    dst = rng.integers(0, n, e).astype(index)
    w = rng.uniform(-1, 1, e).astype(np.float32)
    return x, src, dst, w


def check(y, x, src, dst, w):
    ref, bound = oracle(x, src, dst, w)
    assert_within(cp.asnumpy(y), ref, bound)


@pytest.mark.parametrize("mode", ["auto", "one_shot", "lean"])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_cupy_arrays_in_and_out_without_a_copy(rng, mode, index):
    x, src, dst, w = graph(rng, 3000, 100000, 64, index)
    xg, sg, dg, wg = (cp.asarray(a) for a in (x, src, dst, w))
    y = pipelink.aggregate(xg, sg, dg, wg, mode=mode)
    assert isinstance(y, cp.ndarray) and y.shape == x.shape and y.dtype == cp.float32
    out = cp.full(x.shape, cp.nan, dtype=cp.float32)
    ptr = out.data.ptr
    z = pipelink.aggregate(xg, sg, dg, wg, out=out, mode=mode)
    assert z is out and z.data.ptr == ptr  # written in place: no copy
    cp.cuda.get_current_stream().synchronize()
    check(y, x, src, dst, w)
    check(z, x, src, dst, w)


def test_cupy_plan_is_reused_and_deterministic(rng):
    x, src, dst, w = graph(rng, 5000, 200000, 64)
    xg, sg, dg, wg = (cp.asarray(a) for a in (x, src, dst, w))
    plan = pipelink.AggregatePlan(sg, dg, x.shape[0])
    assert plan.device.startswith("cuda")
    first = plan(xg, wg)
    for _ in range(5):
        assert bool((plan(xg, wg) == first).all())  # bitwise: no atomics on the planned path
    check(first, x, src, dst, w)
    x2 = rng.standard_normal(x.shape).astype(np.float32)  # new features, same graph
    check(plan(cp.asarray(x2), wg), x2, src, dst, w)


def test_cupy_weights_in_plan_order_give_the_same_bits(rng):
    x, src, dst, w = graph(rng, 5000, 200000, 64)
    xg, sg, dg, wg = (cp.asarray(a) for a in (x, src, dst, w))
    plan = pipelink.AggregatePlan(sg, dg, x.shape[0])
    pw = plan.permute_weights(wg)
    assert isinstance(pw.values, cp.ndarray) and pw.values.shape == wg.shape and pw.values.dtype == wg.dtype
    y = plan(xg, pw)
    assert bool((y == plan(xg, wg)).all())
    check(y, x, src, dst, w)


def test_runs_on_cupys_current_stream_without_a_sync(rng):
    # x is produced on a non-default CuPy stream behind work long enough that reading it early
    # would see the old values; aggregate is called inside that stream's context and its result
    # is consumed there. Only the final comparison synchronizes.
    n, e, f = 20000, 400000, 64
    x, src, dst, w = graph(rng, n, e, f)
    sg, dg, wg = (cp.asarray(a) for a in (src, dst, w))
    xg = cp.zeros((n, f), dtype=cp.float32)
    base = cp.asarray(x)
    side = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Stream.null.synchronize()  # the inputs above were made on the legacy stream, which `side` does not wait for
    with side:
        m = cp.random.standard_normal((2048, 2048), dtype=cp.float32)
        for _ in range(20):  # tens of ms of queued work before x holds its values
            m = cp.tanh(m @ m / 2048)
        xg[...] = base + 0 * m.sum()
        y = pipelink.aggregate(xg, sg, dg, wg)
        total = y.sum()
    side.synchronize()
    check(y, x, src, dst, w)
    assert bool(cp.isfinite(total))


def test_cupy_bad_index_raises_and_leaves_out_untouched(rng):
    x, src, dst, w = graph(rng, 1000, 50000, 16)
    src[4321] = -3
    xg, sg, dg, wg = (cp.asarray(a) for a in (x, src, dst, w))
    out = cp.asarray(rng.standard_normal(x.shape).astype(np.float32))
    before = out.copy()
    with pytest.raises(IndexError) as ei:
        pipelink.aggregate(xg, sg, dg, wg, out=out)
    assert ei.value.position == 4321 and ei.value.value == -3
    assert bool((out == before).all())


def test_cupy_wrong_dtype_and_mixed_devices_are_refused(rng):
    x, src, dst, w = graph(rng, 200, 2000, 8)
    xg, sg, dg, wg = (cp.asarray(a) for a in (x, src, dst, w))
    with pytest.raises(pipelink.ContractViolationError) as ci:
        pipelink.aggregate(xg, sg, dg, wg.astype(cp.float64))
    assert (ci.value.port, ci.value.field) == ("w", "dtype")
    with pytest.raises((pipelink.ContractViolationError, ValueError, TypeError)):
        pipelink.aggregate(xg, src, dg, wg)  # src on the host, the rest on the GPU


def test_cupy_plan_outlives_the_stream_object_it_was_built_on(rng):
    # The plan frees its memory on its build stream; CuPy destroys a Stream's handle when the
    # object is collected, so the plan holds the object. Built inside a stream's context that
    # the caller then drops, the plan must still run (on another stream) and be dropped cleanly.
    import gc

    n, e, f = 3000, 40000, 16
    x, src, dst, w = graph(rng, n, e, f)
    sg, dg, wg, xg = (cp.asarray(a) for a in (src, dst, w, x))
    cp.cuda.Stream.null.synchronize()
    side = cp.cuda.Stream(non_blocking=True)
    with side:
        plan = pipelink.AggregatePlan(sg, dg, n)
    side.synchronize()
    del side
    gc.collect()
    y = plan(xg, wg)
    cp.cuda.Stream.null.synchronize()
    check(y, x, src, dst, w)
    del plan
    gc.collect()
    cp.cuda.Device().synchronize()
