"""Embedding tables bigger than the pservers' memory cap, with real processes.

A Criteo-like click log from pl-gen-clicks (26 fields x 4 M ids a field by default, 2 M
training examples, Zipf ids, a known logistic model) trained for one pass by the ctr
model (embedding dim 8, Adam) three ways in the same run:

  one     one process (pl-trainer), no cap: the reference AUC;
  capped  pl-launch, 2 pservers x 2 trainers, each pserver --sparse_memory_mb CAP
          (least frequently, then least recently, used rows evicted in the background);
  open    the same distributed job with no cap;
  disk    the capped job with a disk tier (pl-launch --sparse_disk): rows beyond the cap
          go to RocksDB instead of being dropped (a table ~10x the cap at --cap_mb 48).

For each: the test AUC, rows held at the end, rows evicted, and the peak resident set
(VmHWM, polled every 0.5 s) of the trainer process (one) or of each pserver. The targets
of issue 15: the capped AUC within 0.01 of the one-process AUC, and each capped
pserver's peak RSS within 1.5 x CAP + 150 MB.

    /usr/bin/python3 benchmarks/bench_embedding_cap.py [--build build] [--fields 26]
        [--vocab 4000000] [--train 2000000] [--test 100000] [--cap_mb 256]
        [--parts one,capped,open] [--keep DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time


def vm_hwm_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


class PeakRss:
    """Polls the peak resident set of the processes `select` picks, until stopped."""

    def __init__(self, select):
        self.select, self.peaks, self.stop = select, {}, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for pid, name in self.select():
                mb = vm_hwm_mb(pid)
                if mb is not None:
                    self.peaks[name] = max(self.peaks.get(name, 0.0), mb)
            self.stop.wait(0.5)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.peaks


def processes_named(binary, marker):
    """(pid, name) of running `binary` processes whose command line contains `marker`."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].decode(errors="replace").endswith(binary) and any(marker.encode() in a for a in argv):
            index = argv.index(b"--index") + 1 if b"--index" in argv else None
            out.append((int(pid), f"{binary}-{argv[index].decode()}" if index else binary))
    return out


def trainer_flags(build, clicks, fields):
    return [os.path.join(build, "bin", "pl-trainer"), "--model", "ctr", "--ctr_fields", str(fields), "--threads", "1",
            "--batch_size", "256", "--optimizer", "adam", "--lr", "0.002",
            "--test_data", os.path.join(clicks, "test.plrec"), "--log_every_s", "10"]


def last_float(pattern, text):
    found = re.findall(pattern, text)
    return float(found[-1]) if found else None


def run_one(build, clicks, fields, work):
    argv = trainer_flags(build, clicks, fields) + ["--data", clicks, "--epochs", "1"]
    start = time.time()
    with open(work + ".log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        peak = PeakRss(lambda: [(proc.pid, "pl-trainer")])
        proc.wait()
    peaks = peak.finish()
    text = open(work + ".log").read()
    if proc.returncode != 0:
        raise SystemExit(f"one process failed ({proc.returncode}):\n{text[-3000:]}")
    return {"auc": last_float(r"final test auc: ([\d.]+)", text), "seconds": time.time() - start,
            "peak_mb": peaks, "rows": None, "evicted": None}


def run_launch(build, clicks, fields, work, cap_mb, disk=False):
    argv = [os.path.join(build, "bin", "pl-launch"), "--workdir", work, "--data", os.path.join(clicks, "train.plrec"),
            "--pservers", "2", "--trainers", "2", "--passes", "1", "--checkpoint_every_s", "0",
            "--progress_every_s", "10"]
    if cap_mb > 0:
        argv += ["--sparse_memory_mb", str(cap_mb)]
    if disk:
        argv += ["--sparse_disk"]
    argv += ["--"] + trainer_flags(build, clicks, fields)
    start = time.time()
    with open(work + ".log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        peak = PeakRss(lambda: processes_named("pl-pserver", work))
        proc.wait()
    peaks = peak.finish()
    text = open(work + ".log").read()
    if proc.returncode != 0:
        raise SystemExit(f"pl-launch failed ({proc.returncode}):\n{text[-3000:]}")
    # The pservers log each table at stop: "table emb.table: N rows, X MB ..., E evicted".
    rows = sum(int(m) for m in re.findall(r"\[pserver-\d\] .*table emb\.table: (\d+) rows", text)[-2:])
    evicted = sum(int(m) for m in re.findall(r"\[pserver-\d\] .*table emb\.table: .*?(\d+) evicted", text)[-2:])
    on_disk = sum(int(m) for m in re.findall(r"\[pserver-\d\] .*table emb\.table: .*?and (\d+) rows on disk", text)[-2:])
    return {"auc": last_float(r"final test auc: ([\d.]+)", text), "seconds": time.time() - start, "peak_mb": peaks,
            "rows": rows, "evicted": evicted, "on_disk": on_disk}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--fields", type=int, default=26)
    p.add_argument("--vocab", type=int, default=4000000)
    p.add_argument("--train", type=int, default=2000000)
    p.add_argument("--test", type=int, default=100000)
    p.add_argument("--cap_mb", type=int, default=256)
    p.add_argument("--parts", default="one,capped,open")
    p.add_argument("--keep", default="", help="keep the data and logs here (default: a temporary directory)")
    a = p.parse_args()
    tmp = a.keep or tempfile.mkdtemp(prefix="pl-bench-cap-")
    os.makedirs(tmp, exist_ok=True)
    clicks = os.path.join(tmp, "clicks")
    if not os.path.exists(os.path.join(clicks, "test.plrec")):
        start = time.time()
        gen = subprocess.run([os.path.join(a.build, "bin", "pl-gen-clicks"), "--out", clicks, "--fields", str(a.fields),
                              "--vocab", str(a.vocab), "--train", str(a.train), "--test", str(a.test),
                              "--records_per_chunk", "10000"], capture_output=True, text=True)
        if gen.returncode != 0:
            raise SystemExit(gen.stdout + gen.stderr)
        ideal = last_float(r"ideal test auc: ([\d.]+)", gen.stdout + gen.stderr)
        print(f"pl-gen-clicks: {a.train} + {a.test} examples in {time.time() - start:.1f} s; ideal test auc {ideal}",
              flush=True)
    results = {}
    for part in a.parts.split(","):
        work = os.path.join(tmp, part)
        shutil.rmtree(work, ignore_errors=True)
        if part == "one":
            results[part] = run_one(a.build, clicks, a.fields, work)
        elif part == "capped":
            results[part] = run_launch(a.build, clicks, a.fields, work, a.cap_mb)
        elif part == "open":
            results[part] = run_launch(a.build, clicks, a.fields, work, 0)
        elif part == "disk":
            results[part] = run_launch(a.build, clicks, a.fields, work, a.cap_mb, disk=True)
        else:
            raise SystemExit(f"--parts: unknown part '{part}' (known: one, capped, open, disk)")
        r = results[part]
        peaks = ", ".join(f"{n} {mb:.0f} MB" for n, mb in sorted(r["peak_mb"].items()))
        print(f"{part:7s} auc {r['auc']}  {r['seconds']:.0f} s  peak rss: {peaks}"
              + (f"  rows {r['rows']}, evicted {r['evicted']}, on disk {r['on_disk']}" if r["rows"] is not None else ""),
              flush=True)
    for part in ("capped", "disk"):
        if part not in results:
            continue
        bound = 1.5 * a.cap_mb + 150
        worst = max(results[part]["peak_mb"].values(), default=0)
        print(f"{part} pservers' peak rss {worst:.0f} MB vs bound 1.5 x {a.cap_mb} + 150 = {bound:.0f} MB "
              f"({'within' if worst <= bound else 'OVER'})")
        if "one" in results and results["one"]["auc"] and results[part]["auc"]:
            print(f"{part} auc - one-process auc = {results[part]['auc'] - results['one']['auc']:+.4f} "
                  f"(target within 0.01)")
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
