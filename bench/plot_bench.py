#!/usr/bin/env python3
"""Plots `pipelink bench aggregate --json` results: one panel per JSON (a workload in one edge
order), a bar per variant with its median time and min-max whiskers (a linear scale, so that
bar lengths compare as times do), the bar
green where the variant met the correctness contract and red (hatched, named) where it did not;
each bar labelled with its time and its speed-up over three-op in the same run.

usage: python3 bench/plot_bench.py bench-*.json [--out bench.png]
Needs matplotlib (Debian: apt install python3-matplotlib, which scripts/install-deps.sh installs; pip's
wheel can break Debian's torch through its NumPy; the GPU machine's python has it).
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    # Version 2 (session 49) renamed nothing this plot reads; it marks what session 46's harness
    # changed in meaning (bench/aggregate_bench.cpp, to_json).
    if data.get("schema_version") not in (1, 2) or "variants" not in data or "workload" not in data:
        raise ValueError(f"{path} is not a schema-1 or -2 `pipelink bench aggregate` JSON")
    return data


def meets(v):
    # JSON from before session 42 has no meets_contract: the per-element verdict then.
    return v.get("meets_contract", v.get("within_tolerance", False))


def panel(ax, data):
    w = data["workload"]
    variants = [v for v in data["variants"] if v["name"] != "plan-build" or v.get("timed")]
    names = [v["name"] for v in variants]
    three = next((v for v in variants if v["name"] == "three-op" and v.get("timed")), None)
    ys = range(len(variants))
    for y, v in zip(ys, variants):
        ok = meets(v)
        if v.get("timed"):
            med, lo, hi = v["median_ms"], v["min_ms"], v["max_ms"]
            ax.barh(y, med, color="#4c9a5a" if ok else "#c0392b", hatch=None if ok else "//",
                    edgecolor="black", linewidth=0.5)
            ax.errorbar(med, y, xerr=[[med - lo], [hi - med]], fmt="none", ecolor="black", capsize=3, linewidth=0.8)
            label = f"{med:.2f} ms"
            if three and v is not three and med > 0 and not v["name"].startswith("plan-build"):  # a build is not a call
                label += f"  ({three['median_ms'] / med:.2f}x three-op)"
            if not ok:
                label += f"  FAILED: {v.get('contract_failure') or 'contract'}"
            ax.text(hi, y, "  " + label, va="center", fontsize=7)
        else:
            ax.text(0.01, y, f"not timed: {v.get('contract_failure') or v.get('note') or 'failed verification'}",
                    va="center", fontsize=7, color="#c0392b", transform=ax.get_yaxis_transform())
    ax.set_yticks(list(ys))
    ax.set_yticklabels(names, fontsize=7)
    ax.set_ylim(len(variants) - 0.4, -0.6)  # first variant on top, room below the last
    ax.set_xlabel("median time per call (ms), whiskers min-max", fontsize=8)
    null = data.get("null_test", {})
    extra = ""
    if null.get("time_ratio"):
        extra = f"; null test {null['time_ratio']:.2f}x for 4x edges"
        if null.get("within_tolerance") is False:
            extra += " (its output FAILED)"
    dev = data.get("device", {}).get("name", "?")
    ax.set_title(f"{w['name']} ({w.get('order', '?')} order, E={w.get('edges', '?')}), {dev}, git {data.get('git', '?')}"
                 f"{extra}", fontsize=8)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    # Room on the right for the labels.
    timed = [v["max_ms"] for v in variants if v.get("timed")]
    if timed:
        ax.set_xlim(0, max(timed) * 1.7)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="outputs of `pipelink bench aggregate --json`")
    ap.add_argument("--out", help="PNG to write (default: the first JSON's path with .png)")
    args = ap.parse_args()
    try:
        datas = [load(p) for p in args.json]
    except (OSError, ValueError) as e:
        print(f"plot_bench.py: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot_bench.py: matplotlib is not importable from {sys.executable} (Debian: apt install python3-matplotlib, "
              "then run this with /usr/bin/python3 or build/pyenv/bin/python; elsewhere pip install matplotlib)", file=sys.stderr)
        return 2
    out = args.out or args.json[0].removesuffix(".json") + ".png"
    heights = [0.9 + 0.28 * len(d["variants"]) for d in datas]
    fig, axes = plt.subplots(len(datas), 1, figsize=(10, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, data in zip(axes[:, 0], datas):
        panel(ax, data)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    failed = sum(1 for d in datas for v in d["variants"] if not meets(v))
    print(f"wrote {out} ({len(datas)} panel(s){f', {failed} variant(s) FAILED the contract' if failed else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
