#!/usr/bin/env python3
"""Draws the timeline CSV of the elastic-cluster experiment as one PNG: per mode, the
slots trainers hold against the capacity left to training, under the online services.

    /usr/bin/python3 benchmarks/elastic_cluster/plot.py timeline.csv timeline.png \\
        [--title "8 slots, 600-s day"] [--horizon_s 600]

THE TIMELINE CSV (written by pl-sim-elastic --timeline and by the real-process harness;
one row per mode per decision period, rows of a mode in time order, header line first):
  t_s                time since the trace's start (s)
  mode               "static" or "elastic" (a file may hold both; other modes get a panel too)
  online_slots       slots online services hold at t_s
  training_capacity  slots training may use: the static partition (slots - the trace's
                     peak online) for static, slots - online_slots for elastic
  trainers_busy      trainers holding slots (joining, training or leaving)
  trainers_training  trainers training
  jobs_running       arrived, unfinished jobs holding at least one slot
  jobs_queued        arrived, unfinished jobs holding none
Further columns (per-job trainer counts, say) are allowed and ignored. The total slot
count is taken as max(online_slots + elastic training_capacity), or --slots.

Top to bottom, one panel per mode: online services as a grey band from the top of the
cluster down, the training capacity as a line, trainers training and (stacked on them)
trainers joining or leaving as filled steps, and the queued jobs on a second axis. Needs matplotlib
(Debian: python3-matplotlib).
"""
import argparse
import csv
import sys
from collections import OrderedDict

REQUIRED = ["t_s", "mode", "online_slots", "training_capacity", "trainers_busy",
            "trainers_training", "jobs_running", "jobs_queued"]


def read(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            sys.exit(f"plot.py: {path} lacks the columns {', '.join(missing)}")
        by_mode = OrderedDict()
        for row in reader:
            d = by_mode.setdefault(row["mode"], {c: [] for c in REQUIRED if c != "mode"})
            for c in d:
                d[c].append(float(row[c]))
    if not by_mode:
        sys.exit(f"plot.py: no rows in {path}")
    return by_mode


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", help="the timeline CSV")
    p.add_argument("png", help="where to write the plot")
    p.add_argument("--title", default="", help="the figure's title")
    p.add_argument("--slots", type=int, default=0, help="the cluster's slots (default: from the data)")
    p.add_argument("--horizon_s", type=float, default=0, help="draw the horizon as a line")
    p.add_argument("--hours", action="store_true", help="time axis in hours")
    a = p.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_mode = read(a.csv)
    slots = a.slots or int(max(
        max(o + c for o, c in zip(d["online_slots"], d["training_capacity"])) if m == "elastic"
        else max(d["online_slots"]) + max(d["training_capacity"])
        for m, d in by_mode.items()))
    scale = 3600.0 if a.hours else 1.0
    fig, axes = plt.subplots(len(by_mode), 1, figsize=(11, 3.2 * len(by_mode)), sharex=True,
                             squeeze=False)
    for ax, (mode, d) in zip(axes[:, 0], by_mode.items()):
        t = [x / scale for x in d["t_s"]]
        top = [slots] * len(t)
        floor = [slots - o for o in d["online_slots"]]
        ax.fill_between(t, floor, top, step="post", color="0.82", label="online services")
        ax.fill_between(t, 0, d["trainers_training"], step="post", color="tab:blue", alpha=0.75,
                        linewidth=0, label="trainers training")
        ax.fill_between(t, d["trainers_training"], d["trainers_busy"], step="post",
                        color="tab:orange", alpha=0.9, linewidth=0,
                        label="trainers joining or leaving")
        ax.step(t, d["training_capacity"], where="post", color="black", linewidth=1.2,
                label="capacity for training")
        if a.horizon_s:
            ax.axvline(a.horizon_s / scale, color="tab:red", linestyle=":", linewidth=1)
        ax.set_ylim(0, slots * 1.05)
        ax.set_ylabel(f"{mode}\nslots")
        q = ax.twinx()
        q.step(t, d["jobs_queued"], where="post", color="tab:purple", linewidth=0.8,
               linestyle="--", label="jobs queued")
        q.set_ylabel("jobs queued", color="tab:purple")
        q.set_ylim(0, max(1.0, max(d["jobs_queued"]) * 1.1))
        if ax is axes[0, 0]:
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = q.get_legend_handles_labels()
            handles, labels = h1 + h2, l1 + l2
    axes[-1, 0].set_xlabel("time (h)" if a.hours else "time (s)")
    fig.suptitle(a.title or f"{slots} slots: trainers against the capacity online services leave")
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.955), ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(a.png, dpi=120)
    print(f"plot.py: wrote {a.png}")


if __name__ == "__main__":
    main()
