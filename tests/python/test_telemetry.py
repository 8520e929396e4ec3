"""Seeing a job, checked with the readers the world uses: TensorBoard's own
EventAccumulator reads the event files (Python's SummaryWriter, pl-trainer, pl-master,
pl-pserver, and paddle_like.distributed.train), and prometheus_client's text parser reads
every process's /metrics while a real job runs (pl-launch --logdir --metrics_port 0
--http_port 0), whose status page (status.json, pl-status) is read during the run too.

tensorboard and prometheus_client live in their own venv (tensorboard needs a newer
protobuf than Debian's): ctest's python_pytest_telemetry runs this file there (the
fixture python_telemetry_venv makes it). Elsewhere these tests skip, saying so, unless
PL_REQUIRE_TELEMETRY=1 (set by that ctest entry), which turns a missing reader into a
failure."""

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

import paddle_like as pl
from paddle_like.launch import find_binary

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EXAMPLE = os.path.join(_REPO, "python", "examples", "distributed.py")


def _need(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        if os.environ.get("PL_REQUIRE_TELEMETRY") == "1":
            raise
        pytest.skip(f"{module} is not installed here ({e}); ctest's python_pytest_telemetry runs this in "
                    f"build/venv-telemetry")


@pytest.fixture(scope="module")
def ea():
    return _need("tensorboard.backend.event_processing.event_accumulator")


@pytest.fixture(scope="module")
def prom_parser():
    return _need("prometheus_client.parser")


def _accumulate(ea, path):
    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def test_summary_writer_is_read_by_tensorboard(ea, tmp_path):
    with pl.tensorboard.SummaryWriter(tmp_path / "run") as w:
        for step in range(5):
            w.add_scalar("loss", 1.0 / (step + 1), step)
        w.add_scalars({"a/x": 1.5, "a/y": np.float32(2.5)}, 7)
        w.add_histogram("weights", np.array([-1.0, 0.0, 0.5, 0.5, 3.0]), 7)
        assert os.path.basename(w.path).startswith("events.out.tfevents.")
    acc = _accumulate(ea, tmp_path / "run")
    assert set(acc.Tags()["scalars"]) == {"loss", "a/x", "a/y"}
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == [0, 1, 2, 3, 4]
    assert [round(e.value, 6) for e in loss] == [round(1.0 / (s + 1), 6) for s in range(5)]
    assert acc.Scalars("a/y")[0].value == 2.5 and acc.Scalars("a/y")[0].step == 7
    (h,) = acc.Histograms("weights")
    assert h.step == 7
    assert (h.histogram_value.num, h.histogram_value.min, h.histogram_value.max) == (5, -1.0, 3.0)
    assert sum(h.histogram_value.bucket) == 5


def test_summary_writer_refuses_a_path_through_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RuntimeError, match="cannot create the log directory"):
        pl.tensorboard.SummaryWriter(tmp_path / "file" / "run")


def test_summary_writer_after_close_raises(tmp_path):
    w = pl.tensorboard.SummaryWriter(tmp_path)
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.add_scalar("x", 1.0, 0)


@pytest.fixture(scope="module")
def launcher():
    path = find_binary("pl-launch")
    if path is None:
        pytest.skip("pl-launch is not built (set PL_BIN_DIR or build the trainer/launcher targets)")
    return path


def _env():
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(pl.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["OMP_NUM_THREADS"] = "1"
    return env


class _Job:
    """pl-launch in its own process group; its output read line by line on a thread."""

    def __init__(self, argv, cwd):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
                                     cwd=str(cwd), start_new_session=True)
        self.lines, self.out = queue.Queue(), []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.out.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def text(self):
        return "".join(self.out)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def _scrape(parser, url):
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {s.name: s for f in parser.text_string_to_metric_families(text) for s in f.samples
            if not s.name.endswith(("_bucket", "_created"))}, text


def test_job_metrics_and_event_files(ea, prom_parser, launcher, fashion_dir, tmp_path):
    logdir = tmp_path / "logs"
    job = _Job([launcher, "--pservers", "2", "--trainers", "2", "--data", os.path.join(fashion_dir, "train.plrec"),
                "--passes", "2", "--chunks_per_task", "2", "--workdir", str(tmp_path / "job"), "--logdir", str(logdir),
                "--metrics_port", "0", "--http_port", "0", "--", os.path.join(os.path.dirname(launcher), "pl-trainer"), "--model", "mlp",
                "--threads", "1", "--test_data", os.path.join(fashion_dir, "test.plrec"), "--test_limit", "2000"],
               tmp_path)
    scraped, status, status_text, page = {}, None, None, None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = job.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                break
            s = re.search(r"INFO launch: status page: (http://127\.0\.0\.1:(\d+)/)", line)
            if s:
                page = s.groups()
                with urllib.request.urlopen(page[0], timeout=5) as r:
                    assert r.headers["Content-Type"].startswith("text/html")
                    assert b"status.json" in r.read()
            m = re.search(r"INFO launch: metrics: (http://127\.0\.0\.1:\d+/metrics) \((\S+)\)", line)
            if not m:
                continue
            url, name = m.groups()
            # A trainer is scraped until it has stepped (bounded: the job may end first).
            until = time.monotonic() + 10
            while True:
                try:
                    samples, text = _scrape(prom_parser, url)
                except OSError:
                    break  # that process already ended
                scraped[name] = samples
                steps = samples.get("pl_trainer_steps_total")
                if time.monotonic() > until:
                    break
                # The master serves /metrics before it has read the job, and its gauges
                # hold 0 until its sampler's first reading (a second in): scraped until
                # that reading is there; a pserver before its first sample of the shard
                # (its push counters come after), or while its sampler registers its
                # metrics one by one before its first reading (a scrape under load once
                # read the counters and not yet the gauges): scraped until what is
                # asserted below is there.
                passes = samples.get("pl_master_num_passes")
                rss = samples.get("pl_pserver_resident_bytes")
                if name == "master" and ("pl_master_tasks" not in samples or not passes or passes.value == 0):
                    pass
                elif name.startswith("pserver-") and ("pl_pserver_pushes_total" not in samples or not rss or
                                                      rss.value == 0):
                    pass
                elif not name.startswith("trainer-") or (steps and steps.value > 0):
                    break
                time.sleep(0.05)
            if page and status is None and {"trainer-0", "trainer-1"} <= set(scraped):
                # The trainers report a point a second: wait for curves (bounded by the job).
                until = time.monotonic() + 10
                while time.monotonic() < until:
                    with urllib.request.urlopen(page[0] + "status.json", timeout=5) as r:
                        status = json.loads(r.read())
                    if status["curves"]:
                        break
                    time.sleep(0.2)
                status_text = subprocess.run([os.path.join(os.path.dirname(launcher), "pl-status"),
                                              f"127.0.0.1:{page[1]}"], capture_output=True, text=True, timeout=30)
        job.proc.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        job.kill()
    out = job.text()
    assert job.proc.returncode == 0, out[-4000:]
    assert set(scraped) == {"master", "pserver-0", "pserver-1", "trainer-0", "trainer-1"}, out[-4000:]

    assert status is not None, "the status page was not announced or not read"
    assert status["job"]["num_passes"] == 2
    assert {p["index"] for p in status["pservers"]} == {0, 1}
    assert {e["kind"] for e in status["events"]} >= {"join"}
    assert status["curves"], "no trainer curve reached the master"
    for name, curve in status["curves"].items():
        assert all(np.isfinite(p[1]) and 0 <= p[2] <= 1 for p in curve["points"]), (name, curve)
    assert status_text.returncode == 0, status_text.stderr
    assert re.search(r"^job: pass [12]/2", status_text.stdout, re.M), status_text.stdout
    assert "pservers (2 of 2)" in status_text.stdout

    master = scraped["master"]
    assert master["pl_master_tasks"].labels["role"] == "master"
    assert master["pl_master_num_passes"].value == 2
    for i in (0, 1):
        ps = scraped[f"pserver-{i}"]
        assert ps["pl_pserver_pushes_total"].labels == {"role": "pserver", "index": str(i)}
        assert ps["pl_pserver_resident_bytes"].value > 0
    stepped = 0
    for r in (0, 1):
        t = scraped[f"trainer-{r}"]
        assert t["pl_trainer_steps_total"].labels == {"role": "trainer", "index": str(r)}
        assert "pl_trainer_step_seconds_count" in t
        assert "pl_trainer_staleness_updates_count" in t
        stepped += t["pl_trainer_steps_total"].value > 0
    assert stepped >= 1, "no trainer was scraped after its first step"

    # The event files, read by TensorBoard.
    for r in (0, 1):
        acc = _accumulate(ea, logdir / f"trainer-{r}")
        tags = set(acc.Tags()["scalars"])
        assert {"loss", "train/accuracy", "train/samples_per_sec", "time/compute_ms", "time/exchange_ms",
                "train/staleness", "test/accuracy"} <= tags, tags
        steps = int(re.search(rf"trainer-{r}: job done after \d+ tasks, (\d+) steps", out).group(1))
        # One point per step, counted updates (exact counts: tests/client/param_client_test.cc).
        assert [e.step for e in acc.Scalars("train/staleness")] == list(range(1, steps + 1))
        assert all(np.isfinite(e.value) and e.value >= 0 for e in acc.Scalars("train/staleness"))
        loss = acc.Scalars("loss")
        assert [e.step for e in loss] == list(range(1, steps + 1))
        assert all(np.isfinite(e.value) for e in loss)
        accuracy = float(re.search(rf"trainer-{r}: final test accuracy: ([0-9.]+)", out).group(1))
        assert acc.Scalars("test/accuracy")[-1].value == pytest.approx(accuracy, abs=1e-4)
    master_acc = _accumulate(ea, logdir / "master")
    assert master_acc.Scalars("master/tasks_done")[-1].value == 30  # of the last pass: 60 chunks, 2 per task
    for i in (0, 1):
        ps_acc = _accumulate(ea, logdir / f"pserver-{i}")
        assert "pserver/pushes_per_sec" in ps_acc.Tags()["scalars"]
        assert ps_acc.Scalars("pserver/rss_mb")[-1].value > 1


def test_python_trainer_writes_event_files(ea, launcher, fashion, tmp_path):
    train, test = fashion
    pl.data.write_records(tmp_path / "train.plrec", train.labels[:2000], images=train.features[:2000],
                          records_per_chunk=250)
    pl.data.write_records(tmp_path / "test.plrec", test.labels[:500], images=test.features[:500],
                          records_per_chunk=250)
    logdir = tmp_path / "logs"
    job = _Job([sys.executable, "-m", "paddle_like.launch", "--pservers", "1", "--trainers", "1", "--data",
                str(tmp_path / "train.plrec"), "--workdir", str(tmp_path / "job"), "--logdir", str(logdir),
                _EXAMPLE, "--test", str(tmp_path / "test.plrec")], tmp_path)
    try:
        job.proc.wait(timeout=120)
    finally:
        job.kill()
    out = job.text()
    assert job.proc.returncode == 0, out[-4000:]
    acc = _accumulate(ea, logdir / "trainer-0")
    assert {"loss", "train/accuracy", "train/samples_per_sec", "time/compute_ms", "time/exchange_ms",
            "train/staleness", "test/accuracy"} <= set(acc.Tags()["scalars"])
    # One trainer: nobody else updates between its pull and its push.
    assert all(e.value == 0 for e in acc.Scalars("train/staleness"))
    # 8 tasks of 250 records, 4 steps of batch 64 each.
    assert [e.step for e in acc.Scalars("loss")] == list(range(1, 8 * 4 + 1))
    accuracy = float(re.search(r"final test accuracy: ([0-9.]+)", out).group(1))
    assert acc.Scalars("test/accuracy")[-1].value == pytest.approx(accuracy, abs=1e-4)


def test_local_trainer_writes_event_files(ea, launcher, fashion_dir, tmp_path):
    trainer = os.path.join(os.path.dirname(launcher), "pl-trainer")
    out = subprocess.run([trainer, "--model", "mlp", "--data", fashion_dir, "--epochs", "1", "--train_limit", "640",
                          "--test_limit", "200", "--threads", "1", "--logdir", str(tmp_path / "logs")],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert out.returncode == 0, out.stderr[-2000:]
    acc = _accumulate(ea, tmp_path / "logs" / "trainer")
    assert [e.step for e in acc.Scalars("loss")] == list(range(1, 11))  # 640 examples, batch 64
    accuracy = float(re.search(r"final test accuracy: ([0-9.]+)", out.stdout).group(1))
    assert acc.Scalars("test/accuracy")[-1].value == pytest.approx(accuracy, abs=1e-4)


def test_status_page_draws_in_a_browser(launcher, fashion_dir, tmp_path):
    """The page's script, run by headless Chromium (Debian's `chromium`, one of the
    Makefile's packages), draws the job from status.json with nothing on the console:
    a curve per reporting trainer, the trainers' table, the events."""
    if os.environ.get("PL_REQUIRE_TELEMETRY") != "1":
        pytest.skip("runs in ctest's python_pytest_telemetry only (one browser job per test run)")
    chromium = next((c for c in ("chromium", "chromium-browser") if subprocess.run(
        ["sh", "-c", f"command -v {c}"], capture_output=True).returncode == 0), None)
    if chromium is None:
        pytest.skip("no chromium here (apt-get install chromium)")
    job = _Job([launcher, "--pservers", "1", "--trainers", "1", "--data", os.path.join(fashion_dir, "train.plrec"),
                "--passes", "20", "--workdir", str(tmp_path / "job"), "--http_port", "0", "--",
                os.path.join(os.path.dirname(launcher), "pl-trainer"), "--model", "mlp", "--threads", "1"], tmp_path)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = job.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, job.text()[-4000:]
            m = re.search(r"INFO launch: status page: (http://127\.0\.0\.1:\d+/)", line)
            url = m.group(1) if m else None
        assert url, job.text()[-4000:]
        # Wait until the master has a trainer's curve, so the page has something to draw.
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url + "status.json", timeout=5) as r:
                if any(len(c["points"]) >= 2 for c in json.loads(r.read())["curves"].values()):
                    break
            time.sleep(0.2)
        # --enable-logging=stderr: the page's console messages and uncaught errors come
        # out as ":CONSOLE" lines (a page that throws, or logs an error, shows there).
        browser = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                                  "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                                 capture_output=True, text=True, timeout=60)
        dom = browser.stdout
    finally:
        job.kill()
    console = [line for line in browser.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "the page wrote to the console:\n" + "\n".join(console)
    assert "<polyline" in dom, dom[-3000:]
    assert re.search(r"<td>trainer-0</td>", dom), dom[-3000:]
    assert "(running)" in dom
    assert 'class="ev-join"' in dom


def test_progress_reporter_reaches_the_status_page(launcher, tmp_path):
    """What paddle_like.distributed sends the master each second, read back from the
    master's status.json (a real pl-master)."""
    master_bin = os.path.join(os.path.dirname(launcher), "pl-master")
    pl.data.write_records(tmp_path / "d.plrec", np.zeros(4, dtype=np.int64), images=np.zeros((4, 1, 2, 2), np.float32),
                          records_per_chunk=2)
    proc = subprocess.Popen([master_bin, "--host", "127.0.0.1", "--state_dir", str(tmp_path / "state"), "--data",
                             str(tmp_path / "d.plrec"), "--port_file", str(tmp_path / "port"), "--http_port", "0",
                             "--http_port_file", str(tmp_path / "http")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "port").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert (tmp_path / "port").exists(), proc.communicate(timeout=10)[0] if proc.poll() is not None else ""
        grpc_port, http_port = int((tmp_path / "port").read_text()), int((tmp_path / "http").read_text())
        reporter = pl._C.ProgressReporter(f"127.0.0.1:{grpc_port}", "trainer-py")
        for step in (1, 2, 3):
            reporter.on_step(step, 1.0 / step, 32, 64, 0.01)
        reporter.on_evaluation(3, "accuracy", 0.8125)
        reporter.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/status.json", timeout=5) as r:
            curve = json.loads(r.read())["curves"]["trainer-py"]
        assert [p[0] for p in curve["points"]] == [3]
        assert curve["points"][0][2] == 0.5
        assert curve["test_metric_name"] == "accuracy" and curve["test_metric"] == 0.8125
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
