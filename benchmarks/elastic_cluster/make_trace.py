#!/usr/bin/env python3
"""Writes the job trace of the elastic-cluster experiment: online services' day-night slot
reservation and training jobs drawn from public GPU-cluster traces.

    /usr/bin/python3 benchmarks/elastic_cluster/make_trace.py --slots 8 --horizon_s 600 \\
        --seed 1 --load 1.0 --max_trainers 4 --out trace.json
    /usr/bin/python3 benchmarks/elastic_cluster/make_trace.py --slots 1000 --horizon_s 86400 \\
        --day_s 86400 --period_s 10 --seed 1 --load 1.0 --out trace-1000.json

Both the real-process harness and pl-sim-elastic (benchmarks/elastic_cluster/sim) read the
file; its format is documented in benchmarks/elastic_cluster/sim/cluster_sim.h. Needs only
the standard library and numpy (Debian: python3-numpy).

WHAT IS TAKEN FROM WHICH TRACE (real figures, nothing invented):

 1. Job durations: the empirical distribution of the 83,154 job runtimes (seconds) of the
    Microsoft Philly trace (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters
    for DNN Training Workloads", USENIX ATC'19; github.com/msr-fiddle/philly-traces), as
    the file cluster-trace-gpu-v2020/analysis/philly_runtime.csv of github.com/alibaba/
    clusterdata (commit 1d729891, used there for Figure 4 of Weng et al., NSDI'22, which
    names the Philly repository as its source). PHILLY_RUNTIME_QUANTILES_S below is that
    file's 0%, 0.5%, ..., 100% quantiles (numpy.percentile, linear); --philly_runtime_csv
    reads the file itself instead. (Median 1,186 s, p90 12,859 s, p99 287,283 s.)
 2. Arrivals by hour of day: SenseTime Helios (Hu et al., "Characterization and Prediction
    of Deep Learning Workloads in Large-Scale GPU Datacenters", SC'21), the mean number of
    GPU jobs submitted in each hour of the day, April-September 2020, summed over its four
    public clusters (Venus, Earth, Saturn, Uranus): panel (b) of
    analysis/2_cluster characterization/cluster_diurnal.pdf in github.com/S-Lab-System-Group/
    HeliosArtifact (commit 6345d9ff). The numbers were read from the PDF's vector plot
    coordinates (exact to the plot's float precision, not read by eye); they agree with the
    published totals (e.g. Saturn 3,860 jobs/day from the plot against 698,896 GPU jobs in
    183 days = 3,819/day in analysis/1_compare with Philly trace/helios_cluster_summary.csv).
    The profile (HELIOS_GPU_SUBMITS_PER_HOUR) peaks at 16:00 (543 jobs/h) and is lowest at
    07:00 (186 jobs/h).
 3. Trainer counts (a job's GPUs -> its static trainer count): Helios' CDF of GPU jobs by
    GPU number, panel (a) of analysis/3_job characterization/job_cdf_gpunum.pdf of the same
    repository and commit (vector coordinates again), the four clusters weighted by their
    GPU job counts from helios_cluster_summary.csv (HELIOS_GPU_NUM_CDF_PERCENT).

ASSUMPTIONS (not from any trace; said plainly):
 - Online services: a raised cosine over the day, lowest at 02:00 and highest at 14:00,
   between --online_min_frac and --online_max_frac of the slots, rounded to whole slots
   and changed once per trace hour. Why: online (user-facing) load follows people's day;
   the shape is a smooth stand-in, not a measured one. Its daytime peak overlaps the
   daytime peak of training submissions (2.), which is the hard case for a static split.
 - Durations are independent of arrival time and size; sizes independent of arrival time.
 - Only Philly runtimes in [--min_real_s, --max_real_s] (default [60 s, 8 h], 84.5% of the
   jobs) are used: shorter ones are mostly start-up failures, longer ones outlast a day.
   With --day_s 86400 they are used at real scale. With a shorter day (the small real
   cluster) they are compressed log-linearly onto --dur_range_s (default 15-120 s for a
   600-s day, scaled with --day_s): d' = lo * (d / min_real)^a, a chosen so max_real -> hi;
   this keeps the distribution's shape in log space (its quantile order) but not its
   spread, which no 10-minute run could hold.
 - GPU counts inside a Helios CDF bucket take the bucket's upper end (1, 2, 4, 8, 12, 16,
   24, 32, 64; ">64" becomes 128); a count above the static partition (the slots online
   services never use) or --max_static is cut to it. Elastic range: min = max(1, static//2),
   max = static * --max_factor (default 2), cut to --max_trainers if given. Priority 0.
 - Models alternate: even jobs "mlp", odd jobs "ctr".

LOAD: jobs are drawn until their offered work (static duration x static trainers, in
slot-seconds) reaches --load times the capacity online services leave over the horizon
(sum over t of slots - online(t)); each job's arrival is drawn from the hourly profile over
[0, horizon_s). A job's "work_samples" is its static duration times the curves' samples/s
of its model at its static trainer count (--curves; rerun after the curves change).
"""
import argparse
import bisect
import json
import math
import os
import sys

import numpy as np

# 1. Philly job runtimes (s), quantiles 0, 0.5, ..., 100 % of the 83,154 values.
PHILLY_RUNTIME_QUANTILES_S = [
    0, 12, 17, 20, 25, 31, 38, 42, 44, 46, 48, 49, 51, 53, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    63, 64, 65, 65, 66, 67, 67, 68, 69, 69, 70, 71, 71, 72, 73, 74, 75, 76, 77, 79, 81, 84, 89,
    95, 102, 110, 119, 131, 139, 151, 160, 170, 178, 186, 197, 207, 215, 229, 249, 265, 284,
    302, 313, 325, 340.3, 356, 387, 428, 459, 486.1, 510, 528, 545, 558, 573, 589, 607, 630,
    651, 675, 699, 726, 752, 785, 817.6, 845, 870.1, 889, 906, 930, 956, 986, 1019, 1053,
    1087, 1121, 1156, 1186, 1216, 1252, 1291, 1330, 1373.3, 1412, 1439, 1461, 1481, 1500,
    1522, 1547, 1574, 1604.2, 1644, 1699, 1750.5, 1801.3, 1840, 1871, 1907, 1941, 1971, 2004,
    2033, 2059, 2091, 2127, 2173, 2242, 2307, 2354, 2395, 2433, 2461, 2490, 2519, 2545, 2568,
    2590, 2619, 2647, 2676, 2710, 2746, 2783, 2839, 2949.2, 3139, 3341.5, 3432, 3536, 3643,
    3801.8, 3939, 4018, 4093, 4261.9, 4460.6, 4699.4, 5002, 5160, 5305, 5453.5, 5588.2, 5710,
    5829, 5928, 6069, 6300.1, 6860, 7765.6, 8318, 8816.1, 9150.6, 9709.8, 10509, 11086,
    12020.8, 12859.4, 13690.8, 15080.6, 16529, 18841.8, 21050.6, 23848, 27428, 31998.7,
    40449.2, 49947.5, 58481.3, 69286.9, 85605.9, 101863, 127174, 167784, 201022, 287283,
    484497, 4628239,
]

# 2. Helios: mean GPU jobs submitted in hour h of the day (h = 0..23, local time), sum of
# Venus, Earth, Saturn and Uranus (per cluster: Venus 25.9 .. 50.0, Saturn 85.1 .. 241.7).
HELIOS_GPU_SUBMITS_PER_HOUR = [
    328.8, 306.6, 247.8, 217.0, 205.2, 201.9, 198.9, 185.8, 203.4, 296.6, 408.8, 450.1,
    435.4, 445.1, 482.5, 519.2, 543.3, 483.8, 399.0, 436.0, 476.2, 445.3, 414.3, 397.7,
]

# 3. Helios: % of GPU jobs with at most this many GPUs (the four clusters, job-weighted).
HELIOS_GPU_NUM_CDF_PERCENT = [
    (1, 72.19), (2, 74.75), (4, 80.47), (8, 94.69), (12, 94.70), (16, 97.72), (24, 98.08),
    (32, 99.35), (64, 99.73), (128, 100.0),  # 128 stands for the ">64" bucket (assumption)
]

SOURCE = (
    "durations: Microsoft Philly job runtimes (Jeon et al., ATC'19, msr-fiddle/philly-traces) "
    "via alibaba/clusterdata cluster-trace-gpu-v2020/analysis/philly_runtime.csv (83,154 jobs), "
    "runtimes in [{min_real:g}, {max_real:g}] s{compress}; arrivals: SenseTime Helios (Hu et al., "
    "SC'21) mean GPU-job submissions per hour of day, 4 clusters summed, from "
    "S-Lab-System-Group/HeliosArtifact cluster_diurnal.pdf (b), one trace day = {day_s:g} s; "
    "sizes: Helios GPU-number CDF (job_cdf_gpunum.pdf (a)); online services: ASSUMED raised "
    "cosine, low 02:00, high 14:00, {on_lo}-{on_hi} of {slots} slots; load {load:g} x the "
    "capacity online services leave"
)


class RuntimeSampler:
    """Draws Philly runtimes (s) in [lo, hi] by inverse CDF over a quantile table."""

    def __init__(self, quantiles, lo, hi):
        self.q = np.asarray(quantiles, dtype=float)
        self.lo, self.hi = lo, hi
        if not (self.q[0] <= lo < hi <= self.q[-1]):
            sys.exit(f"make_trace.py: runtime window [{lo}, {hi}] is outside the data")

    def draw(self, rng):
        n = len(self.q) - 1
        while True:  # rejection: about 85% of draws land in the default window
            u = rng.random() * n
            i = min(int(u), n - 1)
            v = self.q[i] + (u - i) * (self.q[i + 1] - self.q[i])
            if self.lo <= v <= self.hi:
                return v


def online_profile(slots, lo_frac, hi_frac):
    """Slots online services hold in each hour of the day (the assumed raised cosine)."""
    lo, hi = round(lo_frac * slots), round(hi_frac * slots)
    return [int(round(lo + (hi - lo) * (1 - math.cos(2 * math.pi * (h - 2) / 24)) / 2))
            for h in range(24)], lo, hi


def hour_bins(horizon_s, day_s, start_hour):
    """[(begin_s, end_s, hour_of_day)] covering [0, horizon_s), one per trace hour."""
    hour_s = day_s / 24.0
    bins, t, k = [], 0.0, 0
    while t < horizon_s - 1e-9:
        end = min(horizon_s, (k + 1) * hour_s)
        bins.append((t, end, (start_hour + k) % 24))
        t, k = end, k + 1
    return bins


def rate(curve, n):
    """samples/s at n trainers: the rule of cluster_sim.h (linear between points, (0, 0)
    before the first, the last point's per-trainer rate beyond the last)."""
    pts = sorted((int(k), float(v)) for k, v in curve["samples_per_s"].items())
    if n <= 0:
        return 0.0
    xs = [0] + [p[0] for p in pts]
    ys = [0.0] + [p[1] for p in pts]
    if n >= xs[-1]:
        return ys[-1] / xs[-1] * n
    i = bisect.bisect_right(xs, n) - 1
    if xs[i] == n:
        return ys[i]
    return ys[i] + (ys[i + 1] - ys[i]) * (n - xs[i]) / (xs[i + 1] - xs[i])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slots", type=int, required=True, help="slots of the cluster")
    p.add_argument("--horizon_s", type=float, required=True, help="length of the trace (s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--load", type=float, default=1.0,
                   help="offered training work / capacity online services leave")
    p.add_argument("--out", required=True, help="the trace JSON to write")
    p.add_argument("--day_s", type=float, default=None,
                   help="length of one trace day (s); default: the horizon")
    p.add_argument("--period_s", type=float, default=0.25,
                   help="the controller's decision period written into the trace (s)")
    p.add_argument("--curves", default=os.path.join(here, "curves.json"),
                   help="measured samples/s per trainer count (curves.json)")
    p.add_argument("--online_min_frac", type=float, default=0.25)
    p.add_argument("--online_max_frac", type=float, default=0.625)
    p.add_argument("--start_hour", type=int, default=0, help="hour of day at t = 0")
    p.add_argument("--min_real_s", type=float, default=60.0)
    p.add_argument("--max_real_s", type=float, default=8 * 3600.0)
    p.add_argument("--dur_range_s", default="auto",
                   help="LO,HI: durations compressed onto [LO, HI]; 'auto': real scale when "
                        "--day_s >= 86400, else 15,120 scaled by day_s/600")
    p.add_argument("--max_factor", type=float, default=2.0, help="max_trainers = static * this")
    p.add_argument("--max_trainers", type=int, default=0, help="cap on max_trainers (0: none)")
    p.add_argument("--max_static", type=int, default=0, help="cap on static_trainers (0: none)")
    p.add_argument("--philly_runtime_csv", default="",
                   help="philly_runtime.csv itself instead of the built-in quantiles")
    a = p.parse_args()

    day_s = a.day_s if a.day_s else a.horizon_s
    if a.slots < 2 or a.horizon_s <= 0 or day_s <= 0 or a.load <= 0 or a.period_s <= 0:
        sys.exit("make_trace.py: --slots >= 2 and positive --horizon_s, --day_s, --load, --period_s")
    with open(a.curves) as f:
        curves = json.load(f)
    for m in ("mlp", "ctr"):
        if m not in curves:
            sys.exit(f"make_trace.py: {a.curves} has no curve for '{m}'")
    rng = np.random.default_rng(a.seed)

    # Online services: one step per trace hour where the count changes.
    per_hour, on_lo, on_hi = online_profile(a.slots, a.online_min_frac, a.online_max_frac)
    bins = hour_bins(a.horizon_s, day_s, a.start_hour)
    online = []
    for begin, _, h in bins:
        if not online or online[-1][1] != per_hour[h]:
            online.append([round(begin, 6), per_hour[h]])
    max_online = max(v for _, v in online)
    static_cap = a.slots - max_online
    if static_cap < 1:
        sys.exit("make_trace.py: online services take every slot at their peak")
    capacity_slot_s = sum((end - begin) * (a.slots - per_hour[h]) for begin, end, h in bins)

    # Durations: Philly runtimes, compressed onto dur_range_s unless real scale.
    if a.philly_runtime_csv:
        data = np.loadtxt(a.philly_runtime_csv, skiprows=1)
        quantiles = np.percentile(data[~np.isnan(data)], np.arange(0, 100.5, 0.5))
    else:
        quantiles = PHILLY_RUNTIME_QUANTILES_S
    sampler = RuntimeSampler(quantiles, a.min_real_s, a.max_real_s)
    if a.dur_range_s == "auto":
        dur_range = None if day_s >= 86400 else (15.0 * day_s / 600, 120.0 * day_s / 600)
    else:
        lo, hi = (float(x) for x in a.dur_range_s.split(","))
        dur_range = (lo, hi)
    if dur_range:
        expo = math.log(dur_range[1] / dur_range[0]) / math.log(a.max_real_s / a.min_real_s)
        squash = lambda d: dur_range[0] * (d / a.min_real_s) ** expo
        compress = f", compressed log-linearly onto [{dur_range[0]:g}, {dur_range[1]:g}] s"
    else:
        squash = lambda d: d
        compress = ", real scale"

    sizes = [s for s, _ in HELIOS_GPU_NUM_CDF_PERCENT]
    cdf = [c / 100.0 for _, c in HELIOS_GPU_NUM_CDF_PERCENT]

    def draw_size():
        i = min(bisect.bisect_left(cdf, rng.random()), len(sizes) - 1)
        s = min(sizes[i], static_cap)
        return min(s, a.max_static) if a.max_static > 0 else s

    # Jobs until the offered work reaches load x capacity.
    target = a.load * capacity_slot_s
    drawn, offered = [], 0.0
    while offered < target:
        dur = squash(sampler.draw(rng))
        static = draw_size()
        drawn.append((dur, static))
        offered += dur * static

    # Arrivals from the hourly profile over [0, horizon).
    weights = np.array([(end - begin) * HELIOS_GPU_SUBMITS_PER_HOUR[h] for begin, end, h in bins])
    picks = rng.choice(len(bins), size=len(drawn), p=weights / weights.sum())
    arrivals = sorted(bins[k][0] + rng.random() * (bins[k][1] - bins[k][0]) for k in picks)

    jobs = []
    width = max(3, len(str(len(drawn) - 1)))
    for i, ((dur, static), t) in enumerate(zip(drawn, arrivals)):
        model = "mlp" if i % 2 == 0 else "ctr"
        hi = max(static, int(math.floor(static * a.max_factor)))
        if a.max_trainers > 0:
            hi = max(static, min(hi, a.max_trainers))
        jobs.append({
            "name": f"j{i:0{width}d}", "arrival_s": round(t, 3), "model": model,
            "work_samples": int(round(dur * rate(curves[model], static))),
            "min_trainers": max(1, static // 2), "max_trainers": hi,
            "static_trainers": static, "priority": 0, "static_duration_s": round(dur, 3),
        })

    source = SOURCE.format(min_real=a.min_real_s, max_real=a.max_real_s, compress=compress,
                           day_s=day_s, on_lo=on_lo, on_hi=on_hi, slots=a.slots, load=a.load)
    trace = {
        "source": source, "slots": a.slots, "horizon_s": a.horizon_s, "period_s": a.period_s,
        "day_s": day_s, "seed": a.seed, "load": a.load, "static_capacity": static_cap,
        "capacity_slot_s": round(capacity_slot_s, 3), "offered_slot_s": round(offered, 3),
        "online": online, "jobs": jobs,
    }
    with open(a.out, "w") as f:  # one key per line, one job per line
        lines = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in trace.items() if k != "jobs"]
        jobs_text = ",\n".join("  " + json.dumps(j) for j in jobs)
        f.write("{\n" + ",\n".join(lines) + ',\n "jobs": [\n' + jobs_text + "\n ]\n}\n")
    durs = np.array([d for d, _ in drawn])
    print(f"make_trace.py: {a.out}: {len(jobs)} jobs, offered {offered:.0f} slot-s = "
          f"{offered / capacity_slot_s:.3f} x capacity {capacity_slot_s:.0f} slot-s; online "
          f"{on_lo}..{on_hi} of {a.slots} slots (static partition {static_cap}); static "
          f"durations median {np.median(durs):.1f} s, p90 {np.percentile(durs, 90):.1f} s")


if __name__ == "__main__":
    main()
