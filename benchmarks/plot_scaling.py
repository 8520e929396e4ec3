#!/usr/bin/env python3
"""Draws the CSV of pl-bench-scaling (benchmarks/bench_scaling.cc) as one PNG.

    /usr/bin/python3 benchmarks/plot_scaling.py build/bench-scaling.csv build/bench-scaling.png

One column per link rate. Top row: aggregate samples/s against the number of trainers,
one colour per pserver count; measured points are solid lines, the bandwidth model's
predictions dashed. Bottom row: a trainer's non-compute time per step (what it logs as
exchanging parameters plus "other", which holds each task's first pull) against the
model's exchange time. Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import csv
import sys
from collections import defaultdict


def read_points(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_scaling.py: no points in {path}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="the CSV pl-bench-scaling wrote (--csv)")
    parser.add_argument("png", help="where to write the plot")
    parser.add_argument("--machine", default="2 shared cores", help="what ran it, for the title")
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_scaling.py: needs matplotlib (apt-get install python3-matplotlib)")

    rows = read_points(args.csv)
    rates = sorted({int(r["rate_mbit"]) for r in rows}, reverse=True)
    pservers = sorted({int(r["pservers"]) for r in rows})
    colours = dict(zip(pservers, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    compute_ms = float(rows[0]["model_compute_ms"])
    bytes_per_sample = sum(float(r["bytes_per_sample"]) for r in rows) / len(rows)

    fig, axes = plt.subplots(2, len(rates), figsize=(5 * len(rates), 7), squeeze=False, sharex=True)
    for col, rate in enumerate(rates):
        series = defaultdict(list)  # pservers -> [(trainers, row)]
        for r in rows:
            if int(r["rate_mbit"]) == rate:
                series[int(r["pservers"])].append((int(r["trainers"]), r))
        top, bottom = axes[0][col], axes[1][col]
        for p in pservers:
            pts = sorted(series.get(p, []), key=lambda x: x[0])
            if not pts:
                continue
            t = [x for x, _ in pts]
            c = colours[p]
            label = f"{p} pserver{'s' if p > 1 else ''}"
            top.plot(t, [float(r["samples_per_s"]) for _, r in pts], "o-", color=c, label=f"{label}, measured")
            top.plot(t, [float(r["model_samples_per_s"]) for _, r in pts], "s--", color=c, alpha=0.6,
                     label=f"{label}, model")
            bottom.plot(t, [float(r["exchange_ms"]) + float(r["other_ms"]) for _, r in pts], "o-", color=c)
            bottom.plot(t, [float(r["model_exchange_ms"]) for _, r in pts], "s--", color=c, alpha=0.6)
        top.set_title(f"every link {rate / 1000:g} Gbit/s")
        top.set_ylabel("samples/s (all trainers)")
        bottom.set_ylabel("ms per step, not computing")
        bottom.set_xlabel("trainers (each on its own host)")
        for ax in (top, bottom):
            ax.set_xticks(sorted({int(r["trainers"]) for r in rows}))
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"mlp on the multi-host test bed: solid = measured ({args.machine}), dashed = bandwidth model\n"
                 f"(compute {compute_ms:.2f} ms/step, {bytes_per_sample / 1e3:.0f} kB/sample pushed + pulled)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png, dpi=80)
    print(f"plot written to {args.png}")


if __name__ == "__main__":
    main()
