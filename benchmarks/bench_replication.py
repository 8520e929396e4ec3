"""What replicated shards cost and how fast they recover, with real pl-launch jobs.

  1. Exchange time per step, --replicas 2 against --replicas 1 in the same run: the
     mlp job (async, 2 pservers, 1 trainer, batch 64, --threads 1) over shared memory,
     then over gRPC (pl-trainer --shm=false --dense_link_lanes 0). From the trainer's
     closing line "per step: C ms computing, E ms exchanging parameters"; the best of
     --reps runs each. R=2 three times: the primaries' streams with their dense blocks
     through shared memory and their calls rung there (the default with the backups on
     the same host), over dense links (PL_STREAM_SHM=false: the way between hosts), and
     through shared memory with their calls over gRPC (PL_STREAM_DOORBELL=false).
  2. Failover: `kill-pserver 0` (SIGKILL of shard 0's primary) --kills times in one
     async job, each once the replacement has caught up. Per kill: SIGKILL -> the
     master's promotion, and SIGKILL -> the new primary's first acknowledged update
     (the line it logs once per epoch; log timestamps, ms). Median and max.
  3. Catch-up: the snapshot size and time of each replacement (the primary's "caught
     up ... snapshot of X MB in T" lines), as MB/s against raw loopback TCP measured in
     the same run (a 200 MB socket copy through 127.0.0.1, the best of 5). Then a 205 MB
     shard (pl-bench-catchup-trainer: one Linear(7168, 7168) with SGD, pulled and pushed
     whole all the while): its primary killed, the restarted process copies the whole
     shard; --catchup_reps jobs each with the job's mutual TLS (the default; the
     reference also includes a TLS 1.3 AES-128-GCM stream through 127.0.0.1 with the
     job's certificates) and with --insecure, each way of --catchup_lanes in turn:
     through the stream's shared memory (the default to a joiner on the same host) and
     over each count of snapshot lanes (the way to another host). A second reference: the same raw copy while the job trains, just
     before the kill (what the machine's loopback gives with the trainer and the
     pservers on the same cores).
  4. Memory: each pserver process's resident set (VmRSS), R x the shard.

    /usr/bin/python3 benchmarks/bench_replication.py [--build build] [--passes N] [--kills N] [--reps N]
        [--parts exchange,failover,catchup] [--catchup_dim D] [--catchup_reps N] [--catchup_lanes shm,1,4]
"""
import argparse
import os
import re
import socket
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
from datetime import datetime


def ts(line):
    m = re.search(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
    return datetime.fromisoformat(m.group(1)).timestamp() if m else None


# The exchange and failover jobs run with pl-launch's default mutual TLS unless --insecure.
INSECURE = False


def launch(build, work, replicas, passes, trainer_flags=(), control=None, trainers=1, env=None):
    data = os.path.join(build, "data", "fashion-mnist")
    argv = [os.path.join(build, "bin", "pl-launch"), "--workdir", work, "--data", os.path.join(data, "train.plrec"),
            "--pservers", "2", "--replicas", str(replicas), "--trainers", str(trainers), "--passes", str(passes),
            "--checkpoint_every_s", "0", "--progress_every_s", "1"]
    if control:
        argv += ["--control", control]
    if INSECURE:
        argv += ["--insecure"]
    argv += ["--", os.path.join(build, "bin", "pl-trainer"), "--model", "mlp", "--threads", "1",
             "--test_data", os.path.join(data, "test.plrec"), "--test_limit", "1000", "--log_every_s", "0.5"]
    argv += list(trainer_flags)
    log = open(os.path.join(work + ".log"), "w")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env), work + ".log"


def process_cpu_s(work):
    """User + kernel seconds of every live pl-pserver whose command line names `work`."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"pl-pserver") or work.encode() not in b" ".join(cmd):
                continue
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            found[int(pid)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            continue
    return found


def exchange_ms(build, tmp, replicas, passes, shm, reps, stream="shm"):
    """The best exchange ms per step of `reps` jobs, and that job's CPU ms per step:
    the trainer's own ("cpu per step" line) plus every pserver process's (/proc, sampled
    every 50 ms from the trainer's connection to the job's end, so start-up, TLS
    handshakes and the replicas' first snapshots are not counted)."""
    best = None
    env = dict(os.environ, PL_STREAM_SHM="true" if stream in ("shm", "shm-grpc") else "false",
               PL_STREAM_LINK="false" if stream == "inline" else "true",
               PL_STREAM_DOORBELL="false" if stream == "shm-grpc" else "true")
    for r in range(reps):
        work = os.path.join(tmp, f"x-r{replicas}-{'shm' if shm else 'grpc'}-{stream}-{r}")
        proc, log = launch(build, work, replicas, passes, () if shm else ("--shm=false", "--dense_link_lanes", "0"),
                           env=env)
        pservers, at_connect = {}, None
        while proc.poll() is None:
            pservers.update(process_cpu_s(work))
            if at_connect is None and "dense traffic over" in open(log).read():
                at_connect = dict(pservers)
            time.sleep(0.05)
        text = open(log).read()
        m = re.search(r"per step: ([\d.]+) ms computing, ([\d.]+) ms exchanging", text)
        steps = re.search(r"job done after \d+ tasks, (\d+) steps", text)
        cpu = re.search(r"cpu per step: ([\d.]+) ms user, ([\d.]+) ms kernel", text)
        if proc.returncode != 0 or not m or not steps or not cpu:
            raise SystemExit(f"job failed: {log}")
        e = float(m.group(2))
        used = sum(v - (at_connect or {}).get(pid, 0.0) for pid, v in pservers.items())
        cpu_ms = float(cpu.group(1)) + float(cpu.group(2)) + used * 1e3 / int(steps.group(1))
        if best is None or e < best[0]:
            best = (e, cpu_ms)
    return best


def loopback_mb_s(total=200 << 20, tls_dir=None, reps=5):
    """The best of `reps` copies of `total` bytes through 127.0.0.1: plain TCP, or with
    tls_dir (a pl-launch workdir's tls/), TLS 1.3 AES-128-GCM between two of the job's
    certificates, as the snapshot socket runs it."""
    best = 0.0
    for _ in range(reps):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        server_ctx = client_ctx = None
        if tls_dir:
            server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            for ctx in (server_ctx, client_ctx):
                ctx.minimum_version = ssl.TLSVersion.TLSv1_3
                ctx.load_cert_chain(os.path.join(tls_dir, "pserver-0", "tls.crt"),
                                    os.path.join(tls_dir, "pserver-0", "tls.key"))
                ctx.load_verify_locations(os.path.join(tls_dir, "pserver-0", "ca.crt"))
                ctx.verify_mode = ssl.CERT_REQUIRED
            client_ctx.check_hostname = False
        received = [0]

        def sink():
            conn, _ = srv.accept()
            if server_ctx:
                conn = server_ctx.wrap_socket(conn, server_side=True)
            buf = bytearray(1 << 20)
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                received[0] += n
                if received[0] >= total:
                    break
            conn.close()

        t = threading.Thread(target=sink)
        t.start()
        c = socket.create_connection(("127.0.0.1", port))
        if client_ctx:
            c = client_ctx.wrap_socket(c)
        buf = b"\0" * (4 << 20)
        start = time.perf_counter()
        sent = 0
        while sent < total:
            c.sendall(buf)
            sent += len(buf)
        t.join()
        best = max(best, total / 1e6 / (time.perf_counter() - start))
        c.close()
        srv.close()
    return best


def failover(build, tmp, passes, kills):
    work = os.path.join(tmp, "failover")
    control = work + ".ctl"
    os.mkfifo(control)
    proc, log = launch(build, work, 2, passes, control=control, trainers=2)
    text = lambda: open(log).read()
    deadline = time.time() + 120
    while text().count("now a backup in sync") < 2:
        if time.time() > deadline or proc.poll() is not None:
            raise SystemExit("no replicated shards came up: " + log)
        time.sleep(0.05)
    # Kill only once both shards' primaries serve pushes: on a fast machine the backups are
    # in sync before the trainers' first push, and a primary killed then never logs one.
    while text().count("first update acknowledged as primary") < 2:
        if time.time() > deadline or proc.poll() is not None:
            raise SystemExit("the trainers never pushed: " + log)
        time.sleep(0.01)
    promotions, first_push = [], []
    for k in range(kills):
        if "job done" in text():
            break
        in_sync = text().count("now a backup in sync")
        promoted = text().count("promoted to primary")
        kills_before = text().count("': SIGKILL pserver")
        with open(control, "w") as f:
            f.write("kill-pserver 0\n")
        deadline = time.time() + 30
        while text().count("': SIGKILL pserver") == kills_before and time.time() < deadline:
            time.sleep(0.002)
        kill_time = ts([l for l in text().splitlines() if "': SIGKILL pserver" in l][-1])
        while text().count("promoted to primary") == promoted and time.time() < deadline:
            time.sleep(0.002)
        lines = [l for l in text().splitlines() if "promoted to primary" in l]
        if len(lines) <= promoted:
            break
        promotions.append(ts(lines[-1]) - kill_time)
        # The new primary's first acknowledged update (it logs that line once per epoch).
        while time.time() < deadline:
            acked = [ts(l) for l in text().splitlines()
                     if "shard 0: first update acknowledged as primary" in l and ts(l) > kill_time]
            if acked:
                first_push.append(acked[0] - kill_time)
                break
            time.sleep(0.01)
        while text().count("now a backup in sync") <= in_sync and time.time() < deadline + 30:
            time.sleep(0.05)
    proc.wait(timeout=600)
    snaps = [(float(a), b) for a, b in re.findall(r"snapshot of ([\d.]+) MB in ([^,)]+)", text())]
    rss = [float(x) for x in re.findall(r"rss [\d.]+ MB -> ([\d.]+) MB", text())]
    return promotions, first_push, snaps, rss


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024
    except (OSError, AttributeError):
        return None


def big_catchup(build, tmp, dim, insecure, rep, lanes, loaded_reference):
    """The 205 MB shard over `lanes` snapshot lanes, or through the stream's shared
    memory when `lanes` is "shm" (the default way to a joiner on the same host; with a
    number, PL_SNAPSHOT_SHM=0 turns it off): (snapshot MB, seconds, RSS of each
    pserver process in MB, the job's tls/ directory or None, raw loopback MB/s measured
    while the job trains or None, the joiner's split of its time: connecting the lanes
    and receiving). `loaded_reference`: measure the raw loopback, just before the kill."""
    work = os.path.join(tmp, f"catchup-{'insecure' if insecure else 'tls'}-{lanes}-{rep}")
    control = work + ".ctl"
    os.mkfifo(control)
    data = os.path.join(build, "data", "fashion-mnist", "train.plrec")
    env = dict(os.environ, BENCH_CATCHUP_DIM=str(dim))
    if lanes == "shm":
        env["PL_SNAPSHOT_SHM"] = "1"
    else:
        env.update(PL_SNAPSHOT_SHM="0", PL_SNAPSHOT_LANES=str(lanes))
    argv = [os.path.join(build, "bin", "pl-launch"), "--workdir", work, "--data", data, "--pservers", "1",
            "--replicas", "2", "--trainers", "1", "--passes", "1", "--checkpoint_every_s", "0",
            "--progress_every_s", "5", "--control", control] + (["--insecure"] if insecure else []) + [
            "--", os.path.join(build, "bin", "pl-bench-catchup-trainer")]
    log = work + ".log"
    proc = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    text = lambda: open(log).read()
    try:
        deadline = time.time() + 300
        while text().count("catch-up trainer: ") < 2 or "now a backup in sync" not in text():
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("the catch-up job did not start training: " + log)
            time.sleep(0.2)
        pids = [int(p) for p in re.findall(r"started pserver-0\.\d \(pid (\d+)", text())]
        rss = [rss_mb(p) for p in pids]
        # The same copy as the reference, while this job's trainer and pservers share the cores.
        loaded = loopback_mb_s(reps=3) if loaded_reference else None
        with open(control, "w") as f:
            f.write("kill-pserver 0\n")
        seen_big = None
        while True:
            m = re.findall(r"caught up at position \d+ \(snapshot of ([\d.]+) MB in ([^,)]+)", text())
            big = [(float(mb), duration_s(t)) for mb, t in m if float(mb) > 100]
            phases = re.findall(r"\(([\d.]+) MB over [^;]+; connecting took ([^,]+), receiving and loading it ([^)]+)\)",
                                text())
            phases = [f"connecting {c}, receiving {r}" for mb, c, r in phases if float(mb) > 100]
            phases += [f"receiving {r}" for mb, r in re.findall(
                r"\(([\d.]+) MB through shared memory[^;]*; receiving and loading it took ([^)]+)\)", text())
                if float(mb) > 100]
            # The joiner's line may trail the primary's by a moment (an older pl-pserver has none).
            seen_big = seen_big or (time.time() if big else None)
            if big and (phases or time.time() > seen_big + 2):
                return (big[0][0], big[0][1], rss, None if insecure else os.path.join(work, "tls"), loaded,
                        phases[0] if phases else "not logged")
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("the restarted pserver did not catch up: " + log)
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def duration_s(text):
    m = re.match(r"([\d.]+)(ms|s|us)", text)
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--parts", default="exchange,failover,catchup",
                   help="which measurements, comma-separated: exchange, failover, catchup")
    p.add_argument("--catchup_dim", type=int, default=7168, help="the catch-up shard: Linear(D, D), 4 D^2 bytes")
    p.add_argument("--catchup_reps", type=int, default=3, help="catch-up jobs per transport and lane count")
    p.add_argument("--catchup_lanes", default="shm,1,4",
                   help="ways to compare: shm (through the stream's shared memory, PL_SNAPSHOT_SHM=1) and counts "
                        "of snapshot lanes (pl-pserver --snapshot_lanes, through PL_SNAPSHOT_LANES, PL_SNAPSHOT_SHM=0)")
    p.add_argument("--insecure", action="store_true",
                   help="exchange and failover jobs without TLS (catch-up measures both anyway)")
    a = p.parse_args()
    global INSECURE
    INSECURE = a.insecure
    build = os.path.abspath(a.build)
    parts = set(a.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="pl-bench-repl-") as tmp:
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        if "exchange" in parts:
            print("\n== exchange time per step, mlp, 2 pservers, 1 trainer (best of %d, %s) ==" %
                  (a.reps, "--insecure" if a.insecure else "mutual TLS"))
            for shm in (True, False):
                (r1, c1) = exchange_ms(build, tmp, 1, a.passes, shm, a.reps)
                (r2, c2) = exchange_ms(build, tmp, 2, a.passes, shm, a.reps)
                (r2_link, c2_link) = exchange_ms(build, tmp, 2, a.passes, shm, a.reps, stream="link")
                (r2_call, c2_call) = exchange_ms(build, tmp, 2, a.passes, shm, a.reps, stream="shm-grpc")
                print(f"{'shared memory' if shm else 'gRPC':14s} R=1 {r1:6.2f} ms  R=2 {r2:6.2f} ms  ratio {r2 / r1:4.2f}"
                      f"   (stream over dense links, PL_STREAM_SHM=false: R=2 {r2_link:6.2f} ms, ratio {r2_link / r1:4.2f};"
                      f" its calls over gRPC, PL_STREAM_DOORBELL=false: R=2 {r2_call:6.2f} ms, ratio {r2_call / r1:4.2f})")
                # Where the cores go: every process of the job, per step of training.
                print(f"{'':14s} CPU per step R=1 {c1:6.2f} ms  R=2 {c2:6.2f} ms  ratio {c2 / c1:4.2f}"
                      f"   (stream over dense links: {c2_link:6.2f} ms; calls over gRPC: {c2_call:6.2f} ms;"
                      f" {os.cpu_count()} cores)")
        loop = loopback_mb_s()
        if "failover" in parts:
            print(f"\n== failover: SIGKILL of shard 0's primary, {a.kills} times in one job (2 trainers) ==")
            promotions, first_push, snaps, rss = failover(build, tmp, max(a.passes, 6), a.kills)
            if promotions:
                print(f"SIGKILL -> promotion:            median {statistics.median(promotions) * 1e3:6.0f} ms, "
                      f"max {max(promotions) * 1e3:6.0f} ms ({len(promotions)} kills)")
            if first_push:
                print(f"SIGKILL -> first push applied:   median {statistics.median(first_push) * 1e3:6.0f} ms, "
                      f"max {max(first_push) * 1e3:6.0f} ms")
            rates = [mb / max(duration_s(t), 1e-6) for mb, t in snaps if mb > 1]
            if rates:
                print(f"\n== catch-up of the mlp's shard: {len(rates)} snapshots of {max(mb for mb, _ in snaps):.1f} MB ==")
                print(f"median {statistics.median(rates):7.0f} MB/s; raw loopback TCP {loop:7.0f} MB/s; "
                      f"ratio {statistics.median(rates) / loop:4.2f}")
            if rss:
                print(f"\n== memory: pserver processes' RSS when idle: {', '.join(f'{x:.1f}' for x in rss[-4:])} MB "
                      "(4 processes: 2 shards x 2 replicas) ==")
        if "catchup" in parts:
            print(f"\n== catch-up of a big shard while training (1 trainer pushing and pulling all of it), "
                  f"{a.catchup_reps} jobs each, ways alternating ==")
            tls_loop = None
            loaded_refs = []
            lane_counts = [x if x == "shm" else int(x) for x in a.catchup_lanes.split(",")]
            for insecure in (False, True):
                for rep in range(a.catchup_reps):
                    for lanes in lane_counts:
                        mb, seconds, big_rss, tls_dir, loaded, phases = big_catchup(
                            build, tmp, a.catchup_dim, insecure, rep, lanes, loaded_reference=lanes == lane_counts[0])
                        if loaded:
                            loaded_refs.append(loaded)
                        if tls_dir and tls_loop is None:
                            tls_loop = loopback_mb_s(tls_dir=tls_dir)
                        way = "shared memory" if lanes == "shm" else f"{lanes:2d} lane(s)    "
                        line = (f"{'--insecure' if insecure else 'mutual TLS':10s} {way} {mb:.0f} MB: "
                                f"{mb / seconds:6.0f} MB/s ({seconds:.2f} s); ratio to raw loopback TCP ({loop:.0f} "
                                f"MB/s) {mb / seconds / loop:4.2f}")
                        if loaded:
                            line += f", to raw loopback while this job trains ({loaded:.0f} MB/s) {mb / seconds / loaded:4.2f}"
                        if not insecure:
                            line += f", to TLS loopback ({tls_loop:.0f} MB/s) {mb / seconds / tls_loop:4.2f}"
                        line += f"; the joiner: {phases}"
                        print(line, flush=True)
            if loaded_refs:
                print(f"raw loopback TCP while a job trains: {', '.join(f'{x:.0f}' for x in loaded_refs)} MB/s "
                      f"(median {statistics.median(loaded_refs):.0f}; idle {loop:.0f})")
            print(f"RSS of its two pserver processes before the kill: {', '.join(f'{x:.0f}' for x in big_rss if x)} MB "
                  f"(R = 2 copies of the {mb:.0f} MB shard)")
        print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
