#!/usr/bin/env python3
"""Plots a `pipelink bench sweep` JSON: time vs edges and extra memory vs edges, log-log, one
line per path, an X where a path ran out of memory.

usage: python3 bench/plot_sweep.py sweep.json [--out PREFIX]   (writes PREFIX-time.png, PREFIX-memory.png)
Needs matplotlib (pip install matplotlib; the GPU machine's python has it).
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
        print("plot_sweep.py: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 2
    with open(args.json) as f:
        data = json.load(f)
    if data.get("kind") != "aggregate-sweep" or data.get("schema_version") != 1:
        print(f"plot_sweep.py: {args.json} is not a schema-1 aggregate sweep", file=sys.stderr)
        return 2
    prefix = args.out or args.json.removesuffix(".json")
    paths = sorted({p["path"] for p in data["points"]})
    title = f"{data['workload']['name']} (N={data['workload']['nodes']}), {data['device']['name']}, git {data['git']}"
    for key, label, scale, suffix in (("median_ms", "median time (ms)", 1.0, "time"),
                                      ("extra_peak_bytes", "extra peak memory (GiB)", 1 / 2**30, "memory")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name in paths:
            ok = [p for p in data["points"] if p["path"] == name and p["status"] == "ok"]
            oom = [p for p in data["points"] if p["path"] == name and p["status"] == "out_of_memory"]
            line, = ax.plot([p["edges"] for p in ok], [max(p[key] * scale, 1e-9) for p in ok], marker="o", label=name)
            if oom and ok:
                ax.plot([oom[0]["edges"]], [max(ok[-1][key] * scale, 1e-9)], marker="x", markersize=12,
                        color=line.get_color(), linestyle="none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("edges (E)")
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title="x = out of memory")
        fig.tight_layout()
        fig.savefig(f"{prefix}-{suffix}.png", dpi=120)
        print(f"wrote {prefix}-{suffix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
