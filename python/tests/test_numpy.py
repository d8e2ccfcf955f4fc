"""pipelink on NumPy arrays (the CPU backend): results, no copies, plans, every error type."""

from __future__ import annotations

import numpy as np
import pytest

import pipelink
from conftest import assert_within, oracle, random_graph


@pytest.mark.parametrize("f", [1, 3, 64, 100])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_matches_the_float64_oracle(rng, f, index):
    n, e = 300, 4000
    src, dst = random_graph(rng, n, e, index)
    x = rng.standard_normal((n, f)).astype(np.float32)
    w = rng.uniform(-1, 1, e).astype(np.float32)
    y = pipelink.aggregate(x, src, dst, w)
    assert isinstance(y, np.ndarray) and y.shape == (n, f) and y.dtype == np.float32
    ref, bound = oracle(x, src, dst, w)
    assert_within(y, ref, bound)


@pytest.mark.parametrize("transform", ["identity", "tanh", "relu", "sigmoid"])
def test_transforms_float64_and_accumulate(rng, transform):
    n, e, f = 200, 3000, 16
    src, dst = random_graph(rng, n, e)
    x = rng.standard_normal((n, f))
    init = rng.standard_normal((n, f))
    out = init.copy()
    got = pipelink.aggregate(x, src, dst, transform=transform, out=out, accumulate=True)
    assert got is out
    ref, bound = oracle(x, src, dst, transform=transform, init=init)
    assert_within(out, ref, bound, exact_f64=True)


def test_writes_into_out_without_a_copy(rng):
    n, e, f = 100, 1000, 8
    src, dst = random_graph(rng, n, e)
    x = rng.standard_normal((n, f)).astype(np.float32)
    x.flags.writeable = False  # read-only inputs are fine: nothing is written to them
    out = np.full((n, f), np.nan, dtype=np.float32)  # poisoned: every element must be written
    ptr = out.ctypes.data
    y = pipelink.aggregate(x, src, dst, out=out)
    assert y is out and y.ctypes.data == ptr
    ref, bound = oracle(x, src, dst)
    assert_within(out, ref, bound)


def test_row_strided_views_are_read_in_place_and_column_strided_refused(rng):
    n, e = 120, 2000
    src, dst = random_graph(rng, n, e)
    big = rng.standard_normal((2 * n, 32)).astype(np.float32)
    x = big[::2, :16]  # every other row, half of each: rows are pitched, elements contiguous
    y = pipelink.aggregate(x, src, dst)
    ref, bound = oracle(np.ascontiguousarray(x), src, dst)
    assert_within(y, ref, bound)
    # A column stride would need a copy; PipeLink never copies behind your back.
    with pytest.raises(pipelink.ContractViolationError) as ei:
        pipelink.aggregate(big[:n, ::2], src, dst)
    assert (ei.value.port, ei.value.field) == ("x", "contiguity")


def test_prepare_weights_changes_nothing_on_the_cpu(rng):
    n, e, f = 300, 5000, 8
    src, dst = random_graph(rng, n, e)
    x = rng.standard_normal((n, f)).astype(np.float32)
    w = rng.uniform(-1, 1, e).astype(np.float32)
    plan = pipelink.AggregatePlan(src, dst, n)
    before = plan.nbytes
    plan.prepare_weights()
    assert plan.nbytes == before
    eager = pipelink.AggregatePlan(src, dst, n, prepare_weights=True)
    assert np.array_equal(eager(x, w), plan(x, w))
    for d in ("float64", np.float64, np.dtype("float32")):
        plan.prepare_weights(d)
    assert plan.nbytes == before
    with pytest.raises(pipelink.ContractViolationError) as ei:
        plan.prepare_weights("int32")
    assert ei.value.field == "dtype"


def test_plan_is_reused_and_deterministic(rng):
    n, e, f = 500, 20000, 64
    src, dst = random_graph(rng, n, e)
    plan = pipelink.AggregatePlan(src, dst, n)
    assert plan.num_nodes == n and plan.num_edges == e and plan.nbytes > 0 and plan.device == "cpu"
    for _ in range(2):
        x = rng.standard_normal((n, f)).astype(np.float32)
        w = rng.uniform(-1, 1, e).astype(np.float32)
        a = pipelink.aggregate(x, None, None, w, plan=plan)
        b = plan(x, w)
        c = pipelink.aggregate(x, src, dst, w)
        assert np.array_equal(a, b) and np.array_equal(a, c)
        ref, bound = oracle(x, src, dst, w)
        assert_within(a, ref, bound)


def test_weights_in_plan_order_give_the_same_bits_and_are_checked(rng):
    n, e, f = 400, 15000, 64
    src, dst = random_graph(rng, n, e)
    plan = pipelink.AggregatePlan(src, dst, n)
    x = rng.standard_normal((n, f)).astype(np.float32)
    w = rng.uniform(-1, 1, e).astype(np.float32)
    pw = plan.permute_weights(w)
    assert isinstance(pw.values, np.ndarray) and pw.values.shape == (e,) and pw.values.dtype == np.float32
    assert np.array_equal(np.sort(pw.values), np.sort(w))  # a permutation of w
    a = plan(x, w)
    assert np.array_equal(a, plan(x, pw))
    assert np.array_equal(a, pipelink.aggregate(x, None, None, pw, plan=plan))
    with pytest.raises(ValueError, match="plan="):
        pipelink.aggregate(x, src, dst, pw)
    other = pipelink.AggregatePlan(src, dst, n)  # same graph, another plan: still refused
    with pytest.raises(pipelink.ContractViolationError) as err:
        other(x, pw)
    assert err.value.port == "w" and err.value.field == "plan"
    with pytest.raises(pipelink.ContractViolationError) as err:
        plan.permute_weights(w[:-1])
    assert err.value.op == "permute_weights" and err.value.field == "shape"
    with pytest.raises(pipelink.ContractViolationError) as err:
        plan.permute_weights(w.astype(np.int32))
    assert err.value.field == "dtype"


def test_empty_graph_and_single_node(rng):
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = pipelink.aggregate(x, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert np.array_equal(y, np.zeros((5, 4), np.float32))
    x1 = rng.standard_normal((1, 3)).astype(np.float32)
    y1 = pipelink.aggregate(x1, np.zeros(7, np.int64), np.zeros(7, np.int64))
    assert np.allclose(y1, 7 * np.tanh(x1), rtol=1e-6)


# ---- errors ------------------------------------------------------------------------------------

def _inputs(rng, n=50, e=400, f=8):
    src, dst = random_graph(rng, n, e)
    return rng.standard_normal((n, f)).astype(np.float32), src, dst


def test_bad_index_raises_index_error_and_leaves_out_untouched(rng):
    x, src, dst = _inputs(rng)
    dst[123] = 50
    src[300] = -1
    out = rng.standard_normal(x.shape).astype(np.float32)
    before = out.copy()
    with pytest.raises(IndexError) as ei:
        pipelink.aggregate(x, src, dst, out=out)
    e = ei.value
    assert isinstance(e, pipelink.IndexOutOfRangeError)
    assert (e.port, e.position, e.value, e.bound) == ("dst", 123, 50, 50)
    assert "123" in str(e)
    assert np.array_equal(out, before)
    with pytest.raises(IndexError):
        pipelink.AggregatePlan(src, dst, 50)


@pytest.mark.parametrize(
    "case, port, field",
    [
        ("x_int", "x", "dtype"),
        ("mixed_index", "dst", "dtype"),
        ("w_length", "w", "shape"),
        ("w_dtype", "w", "dtype"),
        ("out_shape", "out", "shape"),
        ("out_dtype", "out", "dtype"),
        ("x_rank", "x", "rank"),
    ],
)
def test_contract_violations(rng, case, port, field):
    x, src, dst = _inputs(rng)
    w = rng.uniform(-1, 1, src.shape[0]).astype(np.float32)
    out = np.zeros_like(x)
    if case == "x_int":
        x = x.astype(np.int32)
        out = np.zeros(x.shape, np.float32)
    elif case == "mixed_index":
        dst = dst.astype(np.int32)
    elif case == "w_length":
        w = w[:-1]
    elif case == "w_dtype":
        w = w.astype(np.float64)
    elif case == "out_shape":
        out = np.zeros((x.shape[0], x.shape[1] + 1), np.float32)
    elif case == "out_dtype":
        out = np.zeros(x.shape, np.float64)
    elif case == "x_rank":
        x = x.reshape(-1)
        out = np.zeros((50, 8), np.float32)
    with pytest.raises(pipelink.ContractViolationError) as ei:
        pipelink.aggregate(x, src, dst, w, out=out)
    e = ei.value
    assert isinstance(e, ValueError)
    assert e.op == "aggregate" and e.port == port and e.field == field, (e.op, e.port, e.field, str(e))
    assert e.expected and e.actual


def test_bad_attributes(rng):
    x, src, dst = _inputs(rng)
    with pytest.raises(pipelink.ContractViolationError) as ei:
        pipelink.aggregate(x, src, dst, transform="softmax")
    assert ei.value.field == "attribute" and "tanh" in ei.value.expected
    with pytest.raises(pipelink.ContractViolationError):
        pipelink.aggregate(x, src, dst, mode="fastest")
    with pytest.raises(ValueError):
        pipelink.aggregate(x, src, dst, accumulate=True)  # accumulate needs out=


def test_unsupported_inputs_get_clear_errors(rng):
    x, src, dst = _inputs(rng)
    # The dtype by name, as a contract error (it said "code 2, 16 bits" in a plain ValueError).
    with pytest.raises(pipelink.ContractViolationError, match="float16") as ei:
        pipelink.aggregate(x.astype(np.float16), src, dst, out=np.zeros(x.shape, np.float16))
    assert ei.value.field == "dtype" and ei.value.port == "x" and ei.value.actual == "float16"
    assert ei.value.op == "aggregate"  # "pipelink" before (a review, session 46)
    assert ei.value.expected == "float32 or float64"  # the port's own dtypes only (session 51)
    with pytest.raises(pipelink.ContractViolationError, match="int16") as ei:
        pipelink.aggregate(x, src.astype(np.int16), dst.astype(np.int16))
    assert ei.value.port == "src" and ei.value.expected == "int32 or int64"
    with pytest.raises(TypeError, match="expected a torch tensor"):
        pipelink.aggregate(x.tolist(), src, dst)
    with pytest.raises(TypeError):
        pipelink.aggregate(x, src.tolist(), dst)


def test_what_the_binding_refused_unnamed_is_named(rng):
    # Each of these got nanobind's "incompatible function arguments", naming no port, or an
    # error from elsewhere (a probe of 287 inputs, session 53).
    x, src, dst = _inputs(rng)
    for port, args in (("x", (x.astype(object), src, dst)), ("x", (x.astype(np.longdouble), src, dst)),
                       ("src", (x, src.astype("M8[s]"), dst)), ("dst", (x, src, dst.astype("U3")))):
        with pytest.raises(pipelink.ContractViolationError, match="cannot be passed") as ei:
            pipelink.aggregate(*args)
        assert ei.value.port == port and ei.value.field == "dtype", (port, str(ei.value))
    with pytest.raises(pipelink.ContractViolationError, match="cannot be passed") as ei:
        pipelink.AggregatePlan(src.astype(object), dst, x.shape[0])
    assert ei.value.port == "src"
    for bad in (None, b"tanh", 3):
        with pytest.raises(pipelink.ContractViolationError, match="'transform' must be a string") as ei:
            pipelink.aggregate(x, src, dst, transform=bad)
        assert ei.value.field == "attribute"
    with pytest.raises(TypeError, match="plan must be an AggregatePlan, got str"):
        pipelink.aggregate(x, None, None, plan="p")
    out = np.zeros(x.shape, np.float32)
    with pytest.raises(TypeError, match="accumulate must be True or False, got ndarray"):
        pipelink.aggregate(x, src, dst, out=out, accumulate=np.array([True, False]))
    plan = pipelink.AggregatePlan(src, dst, x.shape[0])
    with pytest.raises(TypeError, match="not made by AggregatePlan.permute_weights"):
        plan(x, pipelink.PlanWeights(np.ones(len(src), np.float32), None))
    for n in (2**63, np.uint64(2**63), -(2**63) - 1):
        with pytest.raises(pipelink.ContractViolationError, match=r"num_nodes.*\[0, 2\^60\), got " + str(int(n))):
            pipelink.AggregatePlan(src, dst, n)
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match="workload: seed must be an integer"):
            pipelink.workload("arxiv-like", edge_scale=0.001, seed=seed)
    for seed in (True, 42.0, "42"):
        with pytest.raises(TypeError, match="workload: seed must be an integer"):
            pipelink.workload("arxiv-like", edge_scale=0.001, seed=seed)
    # The refusal replaces nanobind's, rather than printing after it.
    with pytest.raises(pipelink.ContractViolationError) as ei:
        pipelink.aggregate(x, src, dst, transform=None)
    assert ei.value.__suppress_context__ and ei.value.__cause__ is None

    class Boom:
        def __dlpack__(self, **kw):
            raise RuntimeError("boom")

        def __dlpack_device__(self):
            return (1, 0)

    class Answer(Boom):
        def __dlpack__(self, **kw):
            return 42

    with pytest.raises(TypeError, match="port 'x': its __dlpack__\\(\\) raised RuntimeError: boom"):
        pipelink.aggregate(Boom(), src, dst, out=out)
    with pytest.raises(TypeError, match="port 'x': its __dlpack__\\(\\) returned a int"):
        pipelink.aggregate(Answer(), src, dst, out=out)


def test_masked_arrays_are_refused(rng):
    # The mask was ignored: the values under it were summed (a probe, session 53).
    x, src, dst = _inputs(rng)
    m = np.ma.masked_array(x, mask=np.ones_like(x, bool))
    with pytest.raises(TypeError, match="masked array's mask would be ignored"):
        pipelink.aggregate(m, src, dst)
    with pytest.raises(TypeError, match="masked array"):
        pipelink.aggregate(x, np.ma.masked_array(src), dst)

    class Mine(np.ma.MaskedArray):  # a subclass of the caller's own module
        pass

    with pytest.raises(TypeError, match="masked array"):
        pipelink.aggregate(m.view(Mine), src, dst)
    np.testing.assert_array_equal(pipelink.aggregate(m.filled(0), src, dst), pipelink.aggregate(np.zeros_like(x), src, dst))


def test_read_only_and_byte_swapped_arrays_are_named(rng):
    # nanobind refused both with "incompatible function arguments", naming no argument.
    x, src, dst = _inputs(rng)
    out = np.full(x.shape, 7.0, np.float32)
    out.flags.writeable = False
    with pytest.raises(pipelink.ContractViolationError, match="read-only") as ei:
        pipelink.aggregate(x, src, dst, out=out)
    assert ei.value.port == "out" and np.all(out == 7.0)
    for port, args in (("x", (x.astype(">f4"), src, dst)), ("src", (x, src.astype(">i8"), dst))):
        with pytest.raises(pipelink.ContractViolationError, match="byte-swapped") as ei:
            pipelink.aggregate(*args)
        assert ei.value.port == port


def test_a_plan_with_another_graph_or_mode_is_refused(rng):
    # src and dst beside plan= were ignored: the plan's graph was summed, silently (session 43).
    x, src, dst = _inputs(rng)
    plan = pipelink.AggregatePlan(src, dst, x.shape[0])
    other_src, other_dst = random_graph(rng, x.shape[0], len(src))
    with pytest.raises(ValueError, match="src=None and dst=None"):
        pipelink.aggregate(x, other_src, other_dst, plan=plan)
    with pytest.raises(ValueError, match="src=None and dst=None"):
        pipelink.aggregate(x, src, None, plan=plan)
    with pytest.raises(ValueError, match="without a plan"):
        pipelink.aggregate(x, None, None, plan=plan, mode="lean")
    np.testing.assert_array_equal(pipelink.aggregate(x, None, None, plan=plan), pipelink.aggregate(x, src, dst))


def test_num_nodes_must_be_an_integer_in_range(rng):
    _, src, dst = _inputs(rng)
    for bad in (float(50.9), "50", True):
        with pytest.raises(TypeError):
            pipelink.AggregatePlan(src, dst, bad)
    assert pipelink.AggregatePlan(src, dst, np.int64(50)).num_nodes == 50
    with pytest.raises(pipelink.ContractViolationError, match="num_nodes"):
        pipelink.AggregatePlan(src, dst, 2**62)  # its 8 bytes a node would overflow a size
    with pytest.raises(MemoryError, match="bytes"):
        pipelink.AggregatePlan(src, dst, 2**59)  # 4 EiB of row offsets: the bytes, not bad_alloc


def test_relu_keeps_nan_and_zero_features_are_an_empty_result(rng):
    x, src, dst = _inputs(rng)
    x[src[0]] = np.nan
    y = pipelink.aggregate(x, src, dst, transform="relu")
    assert np.all(np.isnan(y[dst[0]]))  # relu(NaN) is NaN, as torch.relu and np.maximum (it was 0)
    z = pipelink.aggregate(np.zeros((x.shape[0], 0), np.float32), src, dst)
    assert z.shape == (x.shape[0], 0)


def test_plan_weights_values_are_read_only_and_checked(rng):
    x, src, dst = _inputs(rng)
    w = rng.uniform(-1, 1, len(src)).astype(np.float32)
    plan = pipelink.AggregatePlan(src, dst, x.shape[0])
    pw = plan.permute_weights(w)
    assert not pw.values.flags.writeable
    with pytest.raises(ValueError):
        pw.values[0] = 1.0
    np.testing.assert_array_equal(plan(x, pw), plan(x, w))


def test_overlapping_output_is_refused(rng):
    x, src, dst = _inputs(rng)
    with pytest.raises(pipelink.ContractViolationError) as ei:
        pipelink.aggregate(x, src, dst, out=x)  # in place over the input it reads
    assert ei.value.port == "out"


def test_halves_of_one_buffer_are_not_aliases(rng):
    # GraphSAGE-style [N, 2F] buffers: x = h[:, :F], out = h[:, F:] share no byte, but their
    # extents meet, and the call was refused as aliasing (a review, session 46). Shifted by one
    # column they do share bytes: still refused.
    x, src, dst = _inputs(rng)
    n, f = x.shape
    h = np.concatenate([x, np.full_like(x, np.nan)], axis=1)
    pipelink.aggregate(h[:, :f], src, dst, out=h[:, f:])
    np.testing.assert_array_equal(h[:, :f], x)
    ref, bound = oracle(x, src, dst)
    assert_within(h[:, f:], ref, bound)
    with pytest.raises(pipelink.ContractViolationError, match="overlap"):
        pipelink.aggregate(h[:, :f], src, dst, out=h[:, f - 1:2 * f - 1])


# ---- the rest of the API -------------------------------------------------------------------------

def test_ops_lists_contracts():
    ops = {o["name"]: o for o in pipelink.ops()}
    assert "aggregate" in ops
    ports = {p["name"]: p for p in ops["aggregate"]["ports"]}
    assert ports["x"]["shape"] == "[N, F]" and "float32" in ports["x"]["dtypes"]
    assert ports["w"]["optional"]
    # Typed defaults and the fields the table shows (a review, session 46: "'tanh'" with its quotes).
    attrs = {a["name"]: a for a in ops["aggregate"]["attributes"]}
    assert attrs["transform"]["default"] == "tanh" and attrs["accumulate"]["default"] is False
    assert ports["x"]["dtype_group"] == ports["w"]["dtype_group"] != ""
    assert "may_alias" in ops["aggregate"]["exec"]


def test_inspect_and_debug_dump_round_trip(rng, tmp_path):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    text = pipelink.inspect_tensor(a)
    assert "[6, 5]" in text and "float32" in text
    path = tmp_path / "a"
    pipelink.debug_dump(a, str(path))
    b = pipelink.debug_load(str(path))
    assert isinstance(b, np.ndarray) and np.array_equal(a, b)


def test_cuda_available_is_a_bool():
    assert isinstance(pipelink.cuda_available(), bool)


def test_hostile_inputs_raise_and_never_crash(rng):
    x, src, dst = _inputs(rng)
    bad_calls = [
        lambda: pipelink.aggregate(np.float32(1.0), src, dst),                         # 0-d
        lambda: pipelink.aggregate(x.astype(bool), src, dst, out=np.zeros(x.shape, bool)),
        lambda: pipelink.aggregate(np.zeros((1,) * 8, np.float32), src, dst),          # rank 8
        lambda: pipelink.aggregate(x, src.reshape(20, 20), dst.reshape(20, 20)),       # 2-D indices
        lambda: pipelink.aggregate(x, src[:10], dst),                                  # E mismatch
        lambda: pipelink.aggregate(x, src.astype(np.float32), dst),                    # float indices
        lambda: pipelink.aggregate(x, src, dst, out=np.zeros((50, 8), np.float32)[:, :4]),
        lambda: pipelink.AggregatePlan(src, dst, -1),
        lambda: pipelink.aggregate(x, None, None),
    ]
    for i, call in enumerate(bad_calls):
        with pytest.raises((ValueError, TypeError, IndexError, RuntimeError)):
            call()
        print("ok", i)


def test_reversed_rows_are_read_correctly(rng):
    n, e = 80, 1500
    src, dst = random_graph(rng, n, e)
    base = rng.standard_normal((n, 16)).astype(np.float32)
    x = base[::-1]  # negative row stride
    try:
        y = pipelink.aggregate(x, src, dst)
    except pipelink.ContractViolationError as err:  # refusing is fine; a wrong answer is not
        assert err.port == "x"
        return
    ref, bound = oracle(np.ascontiguousarray(x), src, dst)
    assert_within(y, ref, bound)


def test_lean_mode_on_the_cpu_names_what_exists(rng):
    x, src, dst = _inputs(rng)
    with pytest.raises(LookupError, match="csr_row_serial"):
        pipelink.aggregate(x, src, dst, mode="lean")


class _Producer:
    """A bare DLPack producer (neither torch, NumPy nor CuPy to pipelink): what CuPy, JAX or any
    array-API library hands over. It forwards the protocol to a NumPy array and keeps it alive."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_any_dlpack_producer_is_read_and_written_in_place(rng):
    n, e, f = 150, 2000, 12
    src, dst = random_graph(rng, n, e)
    x = rng.standard_normal((n, f)).astype(np.float32)
    w = rng.uniform(-1, 1, e).astype(np.float32)
    out = np.full((n, f), np.nan, np.float32)
    got = pipelink.aggregate(_Producer(x), _Producer(src), _Producer(dst), _Producer(w), out=_Producer(out))
    assert isinstance(got, _Producer) and got.a is out  # the caller's array, written in place
    ref, bound = oracle(x, src, dst, w)
    assert_within(out, ref, bound)
    plan = pipelink.AggregatePlan(_Producer(src), _Producer(dst), n)
    again = np.full((n, f), np.nan, np.float32)
    plan(_Producer(x), _Producer(w), out=_Producer(again))
    np.testing.assert_array_equal(again, pipelink.aggregate(x, None, None, w, plan=plan))
    # Without `out=` there is no framework to make the result in: a clear error, not a guess.
    with pytest.raises(TypeError, match="out="):
        pipelink.aggregate(_Producer(x), _Producer(src), _Producer(dst))


def test_memory_functions_without_a_gpu_say_so():
    stats = pipelink.memory_stats()
    assert set(stats) == {"current", "peak"} and all(isinstance(v, int) and v >= 0 for v in stats.values())
    pipelink.reset_peak_memory()
    if pipelink.cuda_available():
        pytest.skip("a GPU is present: test_torch.py checks the pools there")
    for f in (pipelink.release_cached_memory, pipelink.scratch_pool_stats):
        with pytest.raises(pipelink.BackendUnavailableError):  # a CPU-only build, or no device
            f()


def test_every_public_name_has_a_docstring_and_type_hints():
    import inspect

    missing = []
    for name in pipelink.__all__:
        obj = getattr(pipelink, name)
        if not inspect.getdoc(obj):
            missing.append(f"{name}: docstring")
        if inspect.isfunction(obj):
            sig = inspect.signature(obj)
            missing += [f"{name}({p.name}): type hint" for p in sig.parameters.values() if p.annotation is inspect._empty]
            if sig.return_annotation is inspect._empty:
                missing.append(f"{name}: return type hint")
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member, m in vars(obj).items():
                if member.startswith("_") and member != "__call__":
                    continue
                f = m.fget if isinstance(m, property) else m
                if callable(f) and not inspect.getdoc(f):
                    missing.append(f"{name}.{member}: docstring")
    assert not missing, missing


def test_workload_is_the_benchmarks_graph():
    # pipelink.workload (session 50): the named workloads as `pipelink bench aggregate` makes them,
    # so that compare_torch.py and users time the same graph.
    x, src, dst, w = pipelink.workload("arxiv-like", edge_scale=0.01)
    e = round(1_166_243 * 0.01)
    assert x.shape == (169_343, 64) and x.dtype == np.float32
    assert src.shape == dst.shape == (e,) and src.dtype == dst.dtype == np.int64
    assert w.shape == (e,) and w.dtype == np.float32
    assert src.min() >= 0 and src.max() < 169_343 and dst.min() >= 0 and dst.max() < 169_343
    assert np.all(np.abs(w) <= 1)
    again = pipelink.workload("arxiv-like", edge_scale=0.01)
    assert all(np.array_equal(a, b) for a, b in zip((x, src, dst, w), again))
    other = pipelink.workload("arxiv-like", edge_scale=0.01, seed=43)
    assert not np.array_equal(src, other[1])
    # dst-sorted: the same weighted edges, in destination order.
    xs, ss, ds, ws = pipelink.workload("arxiv-like", edge_scale=0.01, order="dst-sorted")
    assert np.array_equal(xs, x) and np.all(np.diff(ds) >= 0)
    key = lambda s_, d_, w_: np.lexsort((w_, s_, d_))  # noqa: E731
    a, b = key(src, dst, w), key(ss, ds, ws)
    assert np.array_equal(src[a], ss[b]) and np.array_equal(dst[a], ds[b]) and np.array_equal(w[a], ws[b])
    # It runs through the op as it comes.
    out = pipelink.aggregate(x, src, dst, w)
    assert out.shape == x.shape and np.isfinite(out).all()
    with pytest.raises(ValueError, match="order"):
        pipelink.workload("arxiv-like", order="sorted")
    with pytest.raises(ValueError, match="edge_scale"):
        pipelink.workload("arxiv-like", edge_scale=float("nan"))
    with pytest.raises(Exception, match="products-like"):
        pipelink.workload("nope")
