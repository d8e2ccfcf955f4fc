"""bench/plot_bench.py and bench/plot_sweep.py turn the bench's JSON into PNGs: on JSON made by hand
(a variant that failed the contract, one not timed, a path out of memory) and, where the CLI is
built, on JSON the CLI wrote, so that a change to the JSON's shape that breaks a plot fails here."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLOT_BENCH = ROOT / "bench" / "plot_bench.py"
PLOT_SWEEP = ROOT / "bench" / "plot_sweep.py"


def run(script, *args):
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True)


def is_png(path):
    return path.exists() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def variant(name, ms, ok=True, timed=True, failure=""):
    return {"name": name, "timed": timed, "median_ms": ms, "min_ms": ms * 0.95, "max_ms": ms * 1.1,
            "meets_contract": ok, "contract_failure": failure, "within_tolerance": ok, "note": ""}


BENCH = {
    "schema_version": 2,
    "workload": {"name": "products-like", "order": "random", "edges": 61859140},
    "device": {"name": "NVIDIA H200"},
    "git": "0123456789ab",
    "variants": [variant("three-op", 74.0), variant("one-shot", 6.05), variant("plan-build", 1.97),
                 variant("planned", 4.36, ok=False, failure="runs differ bitwise"),
                 variant("lean", 0, ok=False, timed=False, failure="per-element bound")],
    "null_test": {"time_ratio": 3.8, "within_tolerance": False},
}

SWEEP = {
    "schema_version": 2, "kind": "aggregate-sweep", "workload": {"name": "products-like", "nodes": 2449029},
    "device": {"name": "NVIDIA H200"}, "git": "0123456789ab",
    "points": [{"edges": 1 << 20, "path": "lean", "status": "ok", "median_ms": 0.3, "extra_peak_bytes": 0},
               {"edges": 1 << 21, "path": "lean", "status": "ok", "median_ms": 0.6, "extra_peak_bytes": 0},
               {"edges": 1 << 20, "path": "planned", "status": "ok", "median_ms": 0.1, "extra_peak_bytes": 1 << 23},
               {"edges": 1 << 21, "path": "planned", "status": "out_of_memory"},
               {"edges": 1 << 22, "path": "planned", "status": "unreachable"},
               # out of memory at the first size, and a point whose output was wrong (session 46)
               {"edges": 1 << 20, "path": "three-op", "status": "out_of_memory"},
               {"edges": 1 << 20, "path": "one-shot", "status": "ok", "median_ms": 0.2, "extra_peak_bytes": 1 << 22},
               {"edges": 1 << 21, "path": "one-shot", "status": "mismatch", "extra_peak_bytes": 1 << 23}],
}


@pytest.fixture(scope="module")
def mpl():
    return pytest.importorskip("matplotlib")


def test_bench_plot_marks_what_failed(mpl, tmp_path):
    j = tmp_path / "bench.json"
    j.write_text(json.dumps(BENCH))
    r = run(PLOT_BENCH, j, "--out", tmp_path / "b.png")
    assert r.returncode == 0, r.stderr
    assert is_png(tmp_path / "b.png")
    assert "2 variant(s) FAILED the contract" in r.stdout, r.stdout
    # Two panels from two files, the default output name beside the first.
    j2 = tmp_path / "other.json"
    j2.write_text(json.dumps({**BENCH, "variants": BENCH["variants"][:3]}))
    r = run(PLOT_BENCH, j, j2)
    assert r.returncode == 0 and "2 panel(s)" in r.stdout, r.stdout + r.stderr
    assert is_png(tmp_path / "bench.png")


def test_bench_plot_refuses_what_is_not_a_bench_json(tmp_path):
    bad = tmp_path / "sweep.json"
    bad.write_text(json.dumps(SWEEP))
    r = run(PLOT_BENCH, bad)
    assert r.returncode == 2 and "not a schema-1" in r.stderr, r.stderr
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**BENCH, "schema_version": 3}))
    r = run(PLOT_BENCH, future)
    assert r.returncode == 2 and "not a schema-1 or -2" in r.stderr, r.stderr
    r = run(PLOT_BENCH, tmp_path / "missing.json")
    assert r.returncode == 2 and "missing.json" in r.stderr, r.stderr


def test_sweep_plot(mpl, tmp_path):
    j = tmp_path / "sweep.json"
    j.write_text(json.dumps(SWEEP))
    r = run(PLOT_SWEEP, j, "--out", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    assert is_png(tmp_path / "s-time.png") and is_png(tmp_path / "s-memory.png")
    assert "partial" not in r.stdout, r.stdout
    # A sweep cut short (its partial JSON, session 51): plotted, and said to be partial.
    j.write_text(json.dumps({**SWEEP, "complete": False, "partial_after_edges": 1 << 21}))
    r = run(PLOT_SWEEP, j, "--out", tmp_path / "p")
    assert r.returncode == 0, r.stderr
    assert "a partial sweep (stopped after 2097152 edges)" in r.stdout, r.stdout
    assert is_png(tmp_path / "p-time.png")


def cli():
    for p in [os.environ.get("PIPELINK_CLI", ""), ROOT / "build/cpu/tools/pipelink/pipelink",
              ROOT / "build/default/tools/pipelink/pipelink"]:
        if p and pathlib.Path(p).is_file() and os.access(p, os.X_OK):
            return pathlib.Path(p)
    return None


def test_plots_of_what_the_cli_writes(mpl, tmp_path):
    exe = cli()
    if exe is None:
        pytest.skip("no built pipelink CLI (set PIPELINK_CLI, or build the cpu preset)")
    b, s = tmp_path / "b.json", tmp_path / "s.json"
    r = subprocess.run([str(exe), "bench", "aggregate", "--device", "cpu", "--edge-scale", "0.005", "--repeats", "2",
                        "--quiet", "--json", str(b)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(exe), "bench", "sweep", "--workload", "arxiv-like", "--device", "cpu", "--start-edges",
                        "4096", "--max-edges", "8192", "--repeats", "1", "--quiet", "--json", str(s)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(PLOT_BENCH, b, "--out", tmp_path / "b.png")
    assert r.returncode == 0 and "FAILED" not in r.stdout, r.stdout + r.stderr
    assert is_png(tmp_path / "b.png")
    r = run(PLOT_SWEEP, s, "--out", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    assert is_png(tmp_path / "s-time.png")
