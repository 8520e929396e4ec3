#!/usr/bin/env python3
"""The elastic-cluster experiment with real processes: one trace, run statically and under
pl-autoscale, on a "cluster" of slots on this machine; then pl-sim-elastic on the same
trace, to show that the simulation agrees with the real run.

    /usr/bin/python3 benchmarks/elastic_cluster/run.py [--slots 8] [--horizon_s 480]
        [--load 0.7] [--seed 1] [--out benchmarks/results/elastic_cluster] [--calibrate]

What runs (every process real, on 127.0.0.1, mutual TLS as pl-launch sets it up):
  - A slot is one trainer process capped at --slot_cpu of a core by its own cpu cgroup
    (slot_trainer.sh), so a slot is the same share of the machine however many run.
    Masters and pservers are not slots (they are small beside the trainers).
  - Online services hold slots in the trace's day-night pattern: they are slot
    reservations (the cluster file's reserved_slots), not processes.
  - Each trace job is a pl-launch job of its model: "mlp" on Fashion-MNIST (60,000
    records a pass), "ctr" on synthetic clicks from a known model (pl-gen-clicks, 20,000
    a pass). Its work_samples is rounded to whole passes (at least one), and the rounded
    trace is what both modes and the simulation run.
  - static: the slots online services never use form the training partition; a job runs
    `static_trainers` trainers; strict FIFO: the head job starts when its trainers fit.
  - elastic: every job starts at its arrival with --trainers 0 and is written into the
    cluster file; pl-autoscale sizes it (min/max from the trace), reclaiming slots when
    online services take them.
Semantics (busy slots, utilisation, free-to-used delay) are pl-sim-elastic's
(sim/cluster_sim.h), measured here from a timeline sampled every period.

Output: a table on stdout and, under --out: trace.json (the rounded trace), curves.json
(if --calibrate), timeline.csv, timeline.png, results.json, and each job's logs.
"""
import argparse
import bisect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CGROUP = "/sys/fs/cgroup/cpu/pl-elastic"
RECORDS = {"mlp": 60000, "ctr": 20000}
TS = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")


def log(msg):
    print(f"[elastic_cluster {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stamp(line):
    """Unix seconds of a log line's ISO timestamp (UTC), or None."""
    m = TS.search(line)
    if not m:
        return None
    return datetime.strptime(m.group(1)[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=__import__("datetime").timezone.utc).timestamp()


class Setup:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.join(args.build, "bin")
        self.work = os.path.abspath(args.out)
        os.makedirs(self.work, exist_ok=True)
        self.data = {"mlp": os.path.join(args.build, "data", "fashion-mnist")}
        clicks = os.path.join(self.work, "data", "clicks")
        if not os.path.exists(os.path.join(clicks, "train.plrec.index")):
            subprocess.run([os.path.join(self.bin, "pl-gen-clicks"), "--out", clicks, "--train",
                            str(RECORDS["ctr"]), "--test", "2000", "--records_per_chunk", "500"],
                           check=True, stdout=subprocess.DEVNULL)
        self.data["ctr"] = clicks
        if not os.path.exists(os.path.join(self.data["mlp"], "train.plrec.index")):
            sys.exit("run.py: no Fashion-MNIST records: run `make data` first")
        # One CA for every job, so pl-autoscale's `launch` certificate is trusted by all of
        # their masters (docs/security.md: several machines share a CA the same way).
        self.ca = os.path.join(self.work, "ca")
        if not os.path.exists(os.path.join(self.ca, "ca.crt")):
            subprocess.run([os.path.join(self.bin, "pl-launch"), "--make_ca", self.ca], check=True,
                           stdout=subprocess.DEVNULL)
        self.capped = True
        try:
            os.makedirs(CGROUP, exist_ok=True)
            with open(os.path.join(CGROUP, "cpu.cfs_quota_us")):
                pass
        except OSError as e:
            self.capped = False
            log(f"warning: no cpu cgroup ({e}); slots are not capped, so trainers share the cores")

    def trainer_command(self, model):
        quota = str(int(self.args.slot_cpu * 100000))
        cmd = [os.path.join(HERE, "slot_trainer.sh"), CGROUP, quota, os.path.join(self.bin, "pl-trainer"),
               "--model", model, "--threads", "1", "--test_data", os.path.join(self.data[model], "test.plrec")]
        if model == "ctr":
            cmd += ["--optimizer", "adagrad", "--lr", "0.05"]
        return cmd

    def launch(self, name, model, passes, trainers, mode_dir):
        d = os.path.join(mode_dir, name)
        os.makedirs(d, exist_ok=True)
        argv = [os.path.join(self.bin, "pl-launch"), "--workdir", os.path.join(d, "work"), "--data",
                os.path.join(self.data[model], "train.plrec"), "--pservers", "1", "--trainers", str(trainers),
                "--passes", str(passes), "--progress_every_s", "5", "--lease_ms", "2000", "--tls_ca", self.ca]
        if self.args.virtual_trainers > 0:  # docs/consistent-training.md: the same bits at any trainer count
            argv += ["--virtual_trainers", str(self.args.virtual_trainers)]
        argv.append("--")
        argv += self.trainer_command(model)
        out = open(os.path.join(d, "launch.log"), "w")
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True), d

    def cleanup_cgroups(self):
        if not os.path.isdir(CGROUP):
            return
        for entry in os.listdir(CGROUP):
            p = os.path.join(CGROUP, entry)
            if entry.isdigit() and os.path.isdir(p):
                try:
                    os.rmdir(p)
                except OSError:
                    pass


def trainer_pids_by_parent():
    """{launcher pid: number of live pl-trainer children}."""
    counts = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"pl-trainer") and b"slot_trainer.sh" not in b" ".join(cmd[:2]):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            ppid = int(fields[1])
            counts[ppid] = counts.get(ppid, 0) + 1
        except (OSError, IndexError, ValueError):
            continue
    return counts


def online_at(trace, t):
    steps = trace["online"]
    i = bisect.bisect_right([s[0] for s in steps], t) - 1
    return steps[i][1] if i >= 0 else 0


class Job:
    def __init__(self, spec):
        self.spec = spec
        self.name = spec["name"]
        self.model = spec["model"]
        self.passes = spec["passes"]
        self.proc = None
        self.dir = None
        self.started = None
        self.finished = None
        self.exit_code = None
        self.master = None


def job_result(job):
    text = open(os.path.join(job.dir, "launch.log")).read()
    r = {"name": job.name, "model": job.model, "arrival_s": job.spec["arrival_s"], "exit": job.exit_code,
         "jct_s": (job.finished - job.spec["arrival_s"]) if job.finished is not None else None}
    done = [l for l in text.splitlines() if "launch: job done in" in l]
    m = re.search(r"samples (\d+)", done[-1]) if done else None
    r["samples"] = int(m.group(1)) if m else None
    r["expected_samples"] = job.passes * RECORDS[job.model]
    m = re.search(r"tasks returned (\d+) \((\d+) samples trained twice\)", done[-1]) if done else None
    r["tasks_returned"], r["samples_retrained"] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    # A shrink asks a trainer to leave after its task (SIGUSR1), or stops it at once
    # with --leave_grace_ms 0 (SIGTERM).
    r["shrinks"] = len(re.findall(r"launch: (?:SIGUSR1 trainer-\d+ \(pid \d+\): leave after its task|"
                                  r"SIGTERM trainer-\d+ \(pid \d+\)) \(trainer target", text))
    metric = re.findall(r"final test (accuracy|auc): ([0-9.]+)", text)
    r["metric"] = (metric[-1][0], float(metric[-1][1])) if metric else None
    # Reclaims: master's "trainer target a -> b (pl-autoscale: reclaim" to each stopped
    # trainer's exit.
    lines = text.splitlines()
    r["reclaim_to_free_s"] = []
    for i, l in enumerate(lines):
        mm = re.search(r"trainer target (\d+) -> (\d+) \(pl-autoscale: reclaim", l)
        if not mm:
            continue
        t0 = stamp(l)
        stopped = []
        for l2 in lines[i + 1:]:
            m2 = re.search(r"launch: (?:SIGUSR1|SIGTERM) (trainer-\d+) \(pid \d+\)(?::? leave after| \(trainer)", l2)
            if m2:
                stopped.append(m2.group(1))
            elif "trainer target" in l2:
                break
        for name in stopped:
            for l3 in lines[i + 1:]:
                if f"launch: {name} exited" in l3:
                    r["reclaim_to_free_s"].append(stamp(l3) - t0)
                    break
    return r


def run_mode(setup, trace, mode, out_dir):
    args = setup.args
    slots, horizon, period = trace["slots"], trace["horizon_s"], trace["period_s"]
    partition = slots - max(s[1] for s in trace["online"])
    jobs = [Job(j) for j in sorted(trace["jobs"], key=lambda j: j["arrival_s"])]
    os.makedirs(out_dir, exist_ok=True)
    cluster = os.path.join(out_dir, "cluster.txt")
    autoscale = None

    def write_cluster(t):
        lines = [f"slots: {slots}", f"reserved_slots: {online_at(trace, t)}"]
        for j in jobs:
            if j.master and j.finished is None:
                s = j.spec
                lines.append(f'job {{ name: "{j.name}" master: "{j.master}" min_trainers: {s["min_trainers"]} '
                             f'max_trainers: {s["max_trainers"]} priority: {s.get("priority", 0)} }}')
        tmp = cluster + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, cluster)

    def start_autoscale(tls_src):
        # A `launch` certificate of the shared CA, copied before its job's workdir goes.
        tls = os.path.join(out_dir, "tls-launch")
        shutil.copytree(tls_src, tls)
        return subprocess.Popen(
            [os.path.join(setup.bin, "pl-autoscale"), "--cluster", cluster, "--tls_dir", tls, "--period_ms",
             str(int(period * 1000)), "--cooldown_ms", str(args.cooldown_ms), "--settle_ms", str(args.settle_ms),
             "--http_port", "0", "--http_port_file", os.path.join(out_dir, "autoscale.port")],
            stdout=open(os.path.join(out_dir, "autoscale.log"), "w"), stderr=subprocess.STDOUT,
            start_new_session=True)

    if mode == "elastic":
        write_cluster(0)
    t0 = time.time()
    queue, running = [], []
    arrivals = list(jobs)
    timeline = []
    last_online = None
    cluster_dirty = True
    next_sample = 0.0
    deadline = horizon + args.max_drain_s
    while True:
        now = time.time() - t0
        # Arrivals.
        while arrivals and arrivals[0].spec["arrival_s"] <= now:
            j = arrivals.pop(0)
            if mode == "static":
                queue.append(j)
            else:
                j.proc, j.dir = setup.launch(j.name, j.model, j.passes, 0, out_dir)
                j.started = now
                running.append(j)
        # Elastic jobs join the cluster file once their master serves.
        for j in running:
            if mode == "elastic" and j.master is None:
                try:
                    m = re.search(r"master serving on (127\.0\.0\.1:\d+)", open(os.path.join(j.dir, "launch.log")).read())
                except OSError:
                    m = None
                if m:
                    j.master = m.group(1)
                    cluster_dirty = True
                    if autoscale is None:
                        autoscale = start_autoscale(os.path.join(j.dir, "work", "tls", "launch"))
        # Finished jobs.
        for j in list(running):
            if j.proc.poll() is not None:
                j.finished = now
                j.exit_code = j.proc.returncode
                running.remove(j)
                cluster_dirty = True
                log(f"{mode}: {j.name} ({j.model}, {j.passes} passes) finished in {now - j.spec['arrival_s']:.1f} s, "
                    f"exit {j.exit_code}")
        counts = trainer_pids_by_parent()
        if mode == "static":
            # A static job holds its slots from its start until its launcher exits (its
            # trainers appear only once the master and pservers serve, so counting
            # processes would start the next job into slots already promised).
            busy = sum(j.spec["static_trainers"] for j in running)
        else:
            busy = sum(counts.get(j.proc.pid, 0) for j in running)
        # Static starts: FIFO head while it fits beside the trainers holding slots.
        while mode == "static" and queue and busy + queue[0].spec["static_trainers"] <= partition:
            j = queue.pop(0)
            j.proc, j.dir = setup.launch(j.name, j.model, j.passes, j.spec["static_trainers"], out_dir)
            j.started = now
            running.append(j)
            busy += j.spec["static_trainers"]
        online = online_at(trace, now)
        if mode == "elastic" and (online != last_online or cluster_dirty):
            write_cluster(now)
            last_online = online
            cluster_dirty = False
        if now >= next_sample:
            next_sample += period
            capacity = partition if mode == "static" else slots - online
            wanting = (len(queue) > 0) if mode == "static" else any(
                counts.get(j.proc.pid, 0) < j.spec["max_trainers"] for j in running)
            timeline.append({"t_s": round(now, 3), "mode": mode, "online_slots": online,
                             "training_capacity": capacity, "trainers_busy": busy, "trainers_training": busy,
                             "jobs_running": sum(1 for j in running if counts.get(j.proc.pid, 0) > 0),
                             "jobs_queued": len(queue) + sum(1 for j in running if counts.get(j.proc.pid, 0) == 0),
                             "demand": int(wanting)})
        if not arrivals and not queue and not running:
            break
        if now > deadline:
            log(f"{mode}: {len(queue) + len(running)} job(s) unfinished after the drain limit; stopping them")
            for j in running:
                os.killpg(j.proc.pid, signal.SIGTERM)
                j.proc.wait()
            break
        time.sleep(0.05)
    if autoscale:
        autoscale.send_signal(signal.SIGTERM)
        autoscale.wait(timeout=10)
    setup.cleanup_cgroups()
    return jobs, timeline


def utilisation(timeline, slots, horizon):
    busy = 0.0
    for a, b in zip(timeline, timeline[1:]):
        if a["t_s"] >= horizon:
            break
        dt = min(b["t_s"], horizon) - a["t_s"]
        busy += min(slots, a["online_slots"] + a["trainers_busy"]) * dt
    return busy / (slots * horizon)


def free_to_used(timeline):
    """pl-sim-elastic's free-to-used delay on the sampled timeline (cluster_sim.h)."""
    fifo, records, prev_free = [], [], 0
    for row in timeline:
        t = row["t_s"]
        free = max(0, row["training_capacity"] - row["trainers_busy"])
        if free > prev_free and row.get("demand", 1):
            fifo += [t] * (free - prev_free)
        elif free < prev_free:
            drop = prev_free - free
            used = drop
            while used > 0 and fifo:
                records.append(t - fifo.pop(0))
                used -= 1
        if not row.get("demand", 1):
            fifo = [t] * len(fifo)
        prev_free = free
    return float(np.mean(records)) if records else 0.0


def join_leave_costs(jobs):
    """From the elastic run's logs: join = a raised target on the master to the new
    trainer's registration there; leave = the first signal that stops it (SIGUSR1: leave
    after its task, or SIGTERM) to its exit (the slot free)."""
    joins, leaves = [], []
    for j in jobs:
        if not j.dir:
            continue
        lines = open(os.path.join(j.dir, "launch.log")).read().splitlines()
        raised = []  # times of target raises not yet matched, one per trainer added
        for l in lines:
            m = re.search(r"master: trainer target (\d+|unset) -> (\d+)", l)
            if m:
                before = 0 if m.group(1) == "unset" else int(m.group(1))
                raised += [stamp(l)] * max(0, int(m.group(2)) - before)
            elif re.search(r"master: trainer \d+ \(trainer-\d+\) registered", l) and raised:
                joins.append(stamp(l) - raised.pop(0))
        sig = {}
        for l in lines:
            m = re.search(r"launch: (?:SIGUSR1|SIGTERM) (trainer-\d+) ", l)
            if m and m.group(1) not in sig:
                sig[m.group(1)] = stamp(l)
            m = re.search(r"launch: (trainer-\d+) exited", l)
            if m and m.group(1) in sig:
                leaves.append(stamp(l) - sig.pop(m.group(1)))
    return (float(np.median(joins)) if joins else None, float(np.median(leaves)) if leaves else None,
            len(joins), len(leaves))


def summarize(mode, jobs, timeline, trace):
    results = [job_result(j) for j in jobs if j.dir]
    jct = [r["jct_s"] for r in results if r["jct_s"] is not None and r["exit"] == 0]
    lost = sum(max(0, r["expected_samples"] - (r["samples"] or 0)) for r in results)
    reclaim = [x for r in results for x in r["reclaim_to_free_s"]]
    return {
        "mode": mode,
        "utilisation": utilisation(timeline, trace["slots"], trace["horizon_s"]),
        "mean_jct_s": float(np.mean(jct)) if jct else None,
        "p90_jct_s": float(np.percentile(jct, 90)) if jct else None,
        "finished": f"{len(jct)}/{len(jobs)}",
        "shrinks": sum(r["shrinks"] for r in results),
        "tasks_returned": sum(r["tasks_returned"] for r in results),
        "samples_lost": lost,
        "samples_trained_twice": sum(r["samples_retrained"] for r in results),
        "free_to_used_s": free_to_used(timeline),
        "reclaim_to_free_s": (float(np.mean(reclaim)) if reclaim else None, float(max(reclaim)) if reclaim else None),
        "jobs": results,
        "join_leave_s": join_leave_costs(jobs) if mode == "elastic" else None,
    }


def calibrate(setup, out):
    """samples/s against trainer count for each model (slots capped), and join/leave costs."""
    curves = {}
    for model in ("mlp", "ctr"):
        rates = {}
        for n in (1, 2, 4):
            passes = {"mlp": 2, "ctr": 8}[model] * n  # several seconds of training each
            d = os.path.join(out, "calibrate")
            os.makedirs(d, exist_ok=True)
            p, jd = setup.launch(f"{model}-{n}", model, passes, n, d)
            p.wait()
            text = open(os.path.join(jd, "launch.log")).read().splitlines()
            t_start = min(stamp(l) for l in text if "launch: started trainer-" in l)
            t_done = stamp([l for l in text if "the master reports the job done" in l or "job done:" in l][0])
            rates[str(n)] = round(passes * RECORDS[model] / (t_done - t_start), 1)
            log(f"calibrate: {model} x{n}: {rates[str(n)]} samples/s")
        curves[model] = {"samples_per_s": rates, "join_s": 0.0, "leave_s": 0.0}
    setup.cleanup_cgroups()
    return curves


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--horizon_s", type=float, default=480)
    ap.add_argument("--load", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slot_cpu", type=float, default=0.2, help="a slot's share of a core")
    ap.add_argument("--cooldown_ms", type=int, default=2000)
    ap.add_argument("--settle_ms", type=int, default=500)
    ap.add_argument("--max_drain_s", type=float, default=600)
    ap.add_argument("--max_trainers", type=int, default=4)
    ap.add_argument("--virtual_trainers", type=int, default=0,
                    help="> 0: every job trains this many virtual trainers (sync; its result independent of its "
                         "trainer count: docs/consistent-training.md)")
    ap.add_argument("--modes", default="static,elastic")
    ap.add_argument("--calibrate", action="store_true", help="measure curves.json first")
    ap.add_argument("--trace", help="run this (rounded) trace instead of making one")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "elastic_cluster"),
                    help="logs, workdirs and results (large: keep it out of the repository)")
    args = ap.parse_args()
    setup = Setup(args)
    out = setup.work
    curves_path = os.path.join(HERE, "curves.json")
    if args.calibrate or not os.path.exists(curves_path):
        curves = calibrate(setup, out)
        # Join and leave costs as the jobs below measure them are recorded in results.json.
        with open(curves_path, "w") as f:
            json.dump(curves, f, indent=1)
        log(f"curves written to {curves_path}")
    raw = args.trace or os.path.join(out, "trace_raw.json")
    if not args.trace:
        subprocess.run([sys.executable, os.path.join(HERE, "make_trace.py"), "--slots", str(args.slots),
                        "--horizon_s", str(args.horizon_s), "--seed", str(args.seed), "--load", str(args.load),
                        "--max_trainers", str(args.max_trainers), "--curves", curves_path, "--out", raw], check=True)
    trace = json.load(open(raw))
    for j in trace["jobs"]:
        j["passes"] = max(1, round(j["work_samples"] / RECORDS[j["model"]]))
        j["work_samples"] = j["passes"] * RECORDS[j["model"]]
    trace_path = os.path.join(out, "trace.json")
    json.dump(trace, open(trace_path, "w"), indent=1)
    log(f"{len(trace['jobs'])} jobs over {trace['horizon_s']:g} s on {trace['slots']} slots; trace {trace_path}")

    summaries, rows = [], []
    for mode in args.modes.split(","):
        mode_dir = os.path.join(out, mode)
        shutil.rmtree(mode_dir, ignore_errors=True)
        jobs, timeline = run_mode(setup, trace, mode, mode_dir)
        summaries.append(summarize(mode, jobs, timeline, trace))
        rows += timeline
    cols = ["t_s", "mode", "online_slots", "training_capacity", "trainers_busy", "trainers_training",
            "jobs_running", "jobs_queued"]
    with open(os.path.join(out, "timeline.csv"), "w") as f:
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(str(r[c]) for c in cols) + "\n")
    subprocess.run([sys.executable, os.path.join(HERE, "plot.py"), os.path.join(out, "timeline.csv"),
                    os.path.join(out, "timeline.png"), "--horizon_s", str(trace["horizon_s"]),
                    "--title", f"{trace['slots']} slots, real processes"], check=False)
    sim = subprocess.run([os.path.join(setup.bin, "pl-sim-elastic"), "--trace", trace_path, "--curves", curves_path,
                          "--cooldown_ms", str(args.cooldown_ms), "--settle_ms", str(args.settle_ms)],
                         capture_output=True, text=True)
    json.dump({"summaries": summaries, "sim": sim.stdout}, open(os.path.join(out, "results.json"), "w"), indent=1)
    print()
    print(f"{'mode':8} {'util':>6} {'mean JCT':>9} {'p90 JCT':>8} {'done':>6} {'shrinks':>7} {'lost':>5} "
          f"{'twice':>6} {'free->used':>10} {'reclaim->free (mean/max)':>24}")
    for s in summaries:
        rc = s["reclaim_to_free_s"]
        print(f"{s['mode']:8} {s['utilisation']:6.3f} {s['mean_jct_s'] or 0:9.1f} {s['p90_jct_s'] or 0:8.1f} "
              f"{s['finished']:>6} {s['shrinks']:7d} {s['samples_lost']:5d} {s['samples_trained_twice']:6d} "
              f"{s['free_to_used_s']:10.2f} {('%.2f/%.2f' % rc) if rc[0] is not None else '-':>24}")
    for s in summaries:
        if s["join_leave_s"]:
            jn, lv, nj, nl = s["join_leave_s"]
            print(f"measured in the elastic run: join (target raised -> trainer registered) median "
                  f"{jn if jn is None else round(jn, 2)} s over {nj}; leave (SIGUSR1 or SIGTERM -> exited) median "
                  f"{lv if lv is None else round(lv, 2)} s over {nl}")
    print("\npl-sim-elastic on the same trace and curves:\n" + sim.stdout + sim.stderr)
    by_name = {}
    for s in summaries:
        for r in s["jobs"]:
            by_name.setdefault(r["name"], {})[s["mode"]] = r["metric"]
    diffs = [abs(v["elastic"][1] - v["static"][1]) for v in by_name.values()
             if v.get("elastic") and v.get("static")]
    if diffs:
        print(f"final metric, elastic vs static run of each job: max |diff| {max(diffs):.4f}, "
              f"mean {np.mean(diffs):.4f} over {len(diffs)} jobs")


if __name__ == "__main__":
    main()
