#!/usr/bin/env python3
"""Plots a `pipelink bench sweep` JSON: time vs edges and extra memory vs edges, log-log, one
line per path, an X where a path ran out of memory, a v for zero (on the axis floor), a ! where
its output was wrong (status "mismatch" or "failed_verification").

usage: python3 bench/plot_sweep.py sweep.json [--out PREFIX]   (writes PREFIX-time.png, PREFIX-memory.png)
Needs matplotlib (Debian: apt install python3-matplotlib, which scripts/install-deps.sh installs; pip's
wheel can break Debian's torch through its NumPy; the GPU machine's python has it).
"""
import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="output of `pipelink bench sweep --json`")
    ap.add_argument("--out", help="output prefix (default: the JSON path without .json)")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot_sweep.py: matplotlib is not importable from {sys.executable} (Debian: apt install python3-matplotlib, "
              "then run this with /usr/bin/python3 or build/pyenv/bin/python; elsewhere pip install matplotlib)", file=sys.stderr)
        return 2
    with open(args.json) as f:
        data = json.load(f)
    # Version 2 (session 49) renamed nothing this plot reads (planned's memory now counts its build).
    if data.get("kind") != "aggregate-sweep" or data.get("schema_version") not in (1, 2):
        print(f"plot_sweep.py: {args.json} is not a schema-1 or -2 aggregate sweep", file=sys.stderr)
        return 2
    prefix = args.out or args.json.removesuffix(".json")
    paths = sorted({p["path"] for p in data["points"]})
    title = f"{data['workload']['name']} (N={data['workload']['nodes']}), {data['device']['name']}, git {data['git']}"
    if not data.get("complete", True):  # a sweep cut short keeps its points (partial JSON, session 51)
        title += f" -- PARTIAL: stopped after {data.get('partial_after_edges', '?')} edges"
        print(f"plot_sweep.py: a partial sweep (stopped after {data.get('partial_after_edges', '?')} edges): "
              "the plots show the points it had")
    for key, label, scale, suffix in (("median_ms", "median time (ms)", 1.0, "time"),
                                      ("extra_peak_bytes", "extra peak memory (GiB)", 1 / 2**30, "memory")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        # Values of 0 (the lean path's memory on the GPU) and points with no value (a path out of
        # memory, or whose output was wrong, at the first size) are drawn on the axis floor, a
        # quarter of the smallest value drawn: 0 once went to 1e-9 and stretched the axis by six
        # decades, and a path that failed at its first size showed a legend entry and no marker
        # (a review, session 46).
        values = [p[key] * scale for p in data["points"] if p["status"] == "ok" and p.get(key, 0) > 0]
        floor = min(values) / 4 if values else 1e-3
        for name in paths:
            ok = [p for p in data["points"] if p["path"] == name and p["status"] == "ok"]
            oom = [p for p in data["points"] if p["path"] == name and p["status"] == "out_of_memory"]
            # ("unreachable": sizes after an out-of-memory, not run: no marker)
            wrong = [p for p in data["points"] if p["path"] == name and p["status"] in ("mismatch", "failed_verification")]
            pos = [p for p in ok if p[key] > 0]
            line, = ax.plot([p["edges"] for p in pos], [p[key] * scale for p in pos], marker="o", label=name)
            color = line.get_color()
            zero = [p for p in ok if p[key] <= 0]
            if zero:
                ax.plot([p["edges"] for p in zero], [floor] * len(zero), marker="v", markersize=9, color=color,
                        linestyle="none")
            if oom:
                y = pos[-1][key] * scale if pos else floor
                ax.plot([oom[0]["edges"]], [y], marker="x", markersize=12, color=color, linestyle="none")
            if wrong:
                ax.plot([p["edges"] for p in wrong], [floor] * len(wrong), marker="$!$", markersize=12, color=color,
                        linestyle="none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("edges (E)")
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title="x out of memory, v zero, ! wrong output", fontsize=8, title_fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{prefix}-{suffix}.png", dpi=120)
        print(f"wrote {prefix}-{suffix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
