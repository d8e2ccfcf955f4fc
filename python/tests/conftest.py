"""Shared helpers: the float64 oracle and the PROTOCOL.md tolerance, fresh random graphs."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

# A CMake build tree with -DPIPELINK_PYTHON=ON puts an importable package in <build>/python;
# PIPELINK_PYTHON_PATH points the tests there instead of at an installed wheel.
if os.environ.get("PIPELINK_PYTHON_PATH"):
    sys.path.insert(0, os.environ["PIPELINK_PYTHON_PATH"])

U = 2.0**-24
PHI = {
    "identity": lambda v: v,
    "tanh": np.tanh,
    "relu": lambda v: np.maximum(v, 0.0),
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
}


def oracle(x, src, dst, w=None, transform="tanh", init=None):
    """float64 reference and the per-element bound 2 (d_i + 4) u S_i of PROTOCOL.md §2."""
    x64 = np.asarray(x, dtype=np.float64)
    n, f = x64.shape
    msg = x64[np.asarray(src)]
    if w is not None:
        msg = msg * np.asarray(w, dtype=np.float64)[:, None]
    t = PHI[transform](msg)
    out = np.zeros((n, f)) if init is None else np.asarray(init, dtype=np.float64).copy()
    np.add.at(out, np.asarray(dst), t)
    s = np.zeros((n, f))
    np.add.at(s, np.asarray(dst), np.abs(t))
    deg = np.bincount(np.asarray(dst), minlength=n).astype(np.float64)
    bound = 2.0 * (deg[:, None] + 4.0) * U * s
    if init is not None:
        bound += 2.0 * U * np.abs(np.asarray(init, dtype=np.float64))
    return out, bound


def assert_within(y, ref, bound, exact_f64=False):
    y = np.asarray(y, dtype=np.float64)
    assert np.isfinite(y).all(), "output has NaN/inf (an element was not written?)"
    err = np.abs(y - ref)
    slack = 1e-12 * (1.0 + np.abs(ref)) if exact_f64 else 0.0
    bad = err > bound + slack
    assert not bad.any(), f"{bad.sum()} elements outside the tolerance; worst err {err.max():.3e}"


@pytest.fixture
def rng(request):
    # A fresh seed per test run, printed on failure so a failure can be replayed.
    seed = int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed}")
    return np.random.default_rng(seed)


def random_graph(rng, n, e, index=np.int64):
    return rng.integers(0, n, e).astype(index), rng.integers(0, n, e).astype(index)
