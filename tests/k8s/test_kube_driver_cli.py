"""The elastic autoscaler's Kubernetes driver, what it shows and how it is run: its status
page, Prometheus metrics and TensorBoard scalars for every decision, its health check,
its command line (once, until SIGTERM, bad flags) and the manifests that run it (RBAC,
Deployment), against the replayed API server of kube_replay.py (test_kube_driver.py says
what the recordings are and are not)."""

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes.utils.quantity import parse_quantity

import kustomize_lite
# `api`: the fixture (a replayed API server), used by name as the tests' argument.
from kube_replay import (A, B, SCALE_A, SCALE_B, SETTLE_MS, api, kube_driver, make_driver,  # noqa: F401
                         paddle_like, patches)
from manifests import TARGETS
from paddle_like.tensorboard import SummaryWriter

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- observability

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+]+)$')


def parse_metrics(text):
    """{(name, ((label, value), ...)): value} from Prometheus text; strict about the format."""
    samples, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        name, labels, value = m.groups()
        assert name in typed, f"{name}: sample before its # TYPE"
        pairs = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or ""))
        samples[(name, pairs)] = float(value)
    return samples


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _fields(buf):
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield key >> 3, value


def read_scalars(path):
    """{tag: [(step, value)]} from a TensorBoard event file: TFRecord frames of Event
    protos (step = field 2, summary = 5; Summary.Value: tag = 1, simple_value = 2)."""
    data, i, out = Path(path).read_bytes(), 0, {}
    while i < len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        record, i = data[i + 12:i + 12 + n], i + 12 + n + 4
        event = list(_fields(record))
        step = next((v for f, v in event if f == 2), 0)
        for f, summary in event:
            if f != 5:
                continue
            for _, value in _fields(summary):
                v = dict(_fields(value))
                out.setdefault(v[1].decode(), []).append((step, struct.unpack("<f", v[2])[0]))
    return out


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def test_status_page_metrics_and_tensorboard_show_every_decision(api, tmp_path, capsys):
    writer = SummaryWriter(tmp_path / "tb")
    driver, clock = make_driver(api, writer=writer)
    server = driver.serve("127.0.0.1", 0, stale_after_s=3600)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        driver.tick()
        clock.advance(SETTLE_MS)
        driver.tick()
        api.load("pods_pending_high_priority.json")
        clock.advance(1000)
        driver.tick()

        status, ctype, text = _get(base + "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        m = parse_metrics(text)
        assert m[("pl_autoscale_capacity_slots", ())] == 7
        assert m[("pl_autoscale_over_committed", ())] == 0
        assert m[("pl_autoscale_target_trainers", (("job", A),))] == 3
        assert m[("pl_autoscale_target_trainers", (("job", B),))] == 4
        assert m[("pl_autoscale_running_trainers", (("job", A),))] == 2  # readyReplicas in the recording
        assert m[("pl_autoscale_decisions_total", (("job", A), ("reason", "grow")))] == 1
        assert m[("pl_autoscale_decisions_total", (("job", A), ("reason", "reclaim")))] == 1
        assert m[("pl_autoscale_decisions_total", (("job", B), ("reason", "grow")))] == 1
        assert m[("pl_autoscale_ticks_total", ())] == 3

        status, ctype, page = _get(base + "/")
        assert status == 200 and ctype.startswith("text/html")
        assert "capacity 7 slots" in page and "team-c/etl-nightly-28611360-xk4vd" in page
        assert "<td>team-a/pl-trainer</td><td>1</td><td>6</td><td>0</td><td>3</td>" in page  # min max prio target
        assert f"{A}: 6 -&gt; 3 trainers (reclaim" in page and f"{B}: 2 -&gt; 4 trainers (grow" in page
        status, _, body = _get(base + "/status.json")
        assert status == 200 and json.loads(body)["capacity"] == 7
        assert _get(base + "/healthz")[:1] == (200,)
        assert _get(base + "/nothing")[0] == 404
    finally:
        server.shutdown()
    writer.close()
    (events,) = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    scalars = read_scalars(events)
    assert scalars["autoscale/capacity_slots"] == [(1, 10.0), (2, 10.0), (3, 7.0)]
    assert scalars["autoscale/assigned_trainers"] == [(1, 4.0), (2, 10.0), (3, 7.0)]
    assert scalars[f"target/{A}"] == [(1, 2.0), (2, 6.0), (3, 3.0)]
    assert scalars[f"target/{B}"] == [(1, 2.0), (2, 4.0), (3, 4.0)]
    assert scalars[f"running/{A}"] == [(1, 2.0), (2, 2.0), (3, 2.0)]


def test_healthz_fails_when_the_control_loop_stops(api):
    driver, _ = make_driver(api)
    server = driver.serve("127.0.0.1", 0, stale_after_s=0.05)
    try:
        driver.tick()
        time.sleep(0.2)
        status, _, text = _get(f"http://127.0.0.1:{server.server_address[1]}/healthz")
        assert status == 503 and "no decision begun" in text
    finally:
        server.shutdown()


# ---------------------------------------------------------------- the command line

def _run_cli(args, timeout=120):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(paddle_like.__file__)),
               PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "paddle_like.elastic.kube_driver", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_command_line_once_in_one_namespace_through_a_kubeconfig(api, tmp_path):
    api.load("deployments_team_a.json")
    kubeconfig = _kubeconfig(tmp_path, api.url)
    out = _run_cli(["--namespace", "team-a", "--once", "--http_port", "-1", "--kubeconfig", str(kubeconfig),
                    "--tensorboard_dir", str(tmp_path / "tb")])
    assert out.returncode == 0, out.stderr
    assert re.search(r"^\S+Z INFO pl-autoscale-k8s: team-a/pl-trainer: adopted with 2 trainers", out.stdout, re.M)
    requests = api.take()
    assert {r["path"] for r in requests} == {"/apis/apps/v1/namespaces/team-a/deployments", "/api/v1/nodes",
                                             "/api/v1/pods"}
    assert all(r["headers"]["authorization"] == "Bearer replayed-token" for r in requests)
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def _kubeconfig(tmp_path, server):
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: replay, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: replay, user: {token: replayed-token}}]\n"
        "contexts: [{name: replay, context: {cluster: replay, user: replay}}]\n"
        "current-context: replay\n")
    return path


def test_command_line_serves_until_sigterm(api, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(paddle_like.__file__)),
               PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([sys.executable, "-m", "paddle_like.elastic.kube_driver", "--all-namespaces",
                             "--period_s", "0.2", "--settle_s", "0", "--cooldown_s", "0", "--http_host", "127.0.0.1",
                             "--http_port", "0", "--kubeconfig", str(_kubeconfig(tmp_path, api.url))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = None
        for line in proc.stdout:
            m = re.search(r"status page on http://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        assert port, proc.stderr.read()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # with no settle or cooldown both jobs grow at once
            metrics = parse_metrics(_get(f"http://127.0.0.1:{port}/metrics")[2])
            if metrics.get(("pl_autoscale_assigned_trainers", ())) == 10:
                break
            time.sleep(0.1)
        assert metrics[("pl_autoscale_target_trainers", (("job", A),))] == 6
        proc.send_signal(signal.SIGTERM)  # what the kubelet sends: stop after the current tick
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert patches(api.take("PATCH")) == {SCALE_A: 6, SCALE_B: 4}


def test_command_line_errors_name_the_flag(api, tmp_path):
    out = _run_cli(["--namespace", "x", "--period_s", "0"])
    assert out.returncode == 2 and "--period_s=0.0: must be above 0" in out.stderr
    out = _run_cli(["--period_s", "1"])
    assert out.returncode == 2 and "one of the arguments --namespace --all-namespaces" in out.stderr
    # A cluster that cannot be read: --once says so and exits 1.
    kubeconfig = _kubeconfig(tmp_path, api.url + "/nowhere")
    out = _run_cli(["--all-namespaces", "--once", "--http_port", "-1", "--kubeconfig", str(kubeconfig)])
    assert out.returncode == 1 and "cannot read the cluster (HTTP 404" in out.stderr


# ---------------------------------------------------------------- the manifests' contract with the driver

def _rbac_triple(request):
    """(apiGroup, resource[/subresource], verb) that RBAC checks for a request."""
    parts = request["path"].strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {"GET": "get" if named else ("watch" if request["query"].get("watch") else "list"),
            "PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}[request["method"]]
    return group, resource, verb


def test_the_clusterrole_grants_exactly_what_the_driver_uses(api):
    # Every kind of call it makes: the lists (paged) and the scale patches of a grow.
    driver, clock = make_driver(api)
    driver.tick()
    clock.advance(SETTLE_MS)
    driver.tick()
    used = {_rbac_triple(r) for r in api.take()}
    assert used == {("", "nodes", "list"), ("", "pods", "list"), ("apps", "deployments", "list"),
                    ("apps", "deployments/scale", "patch")}
    objs = kustomize_lite.render(REPO / "k8s" / "autoscaler")
    (role,) = [o for o in objs if o["kind"] == "ClusterRole"]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == used, f"ClusterRole grants {sorted(granted - used)} unused, lacks {sorted(used - granted)}"


def test_the_autoscaler_deployment_runs_the_driver_with_flags_it_accepts():
    objs = kustomize_lite.render(REPO / "k8s" / "autoscaler")
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["command"] == ["python3", "-m", "paddle_like.elastic.kube_driver"]
    args = kube_driver._parser().parse_args(c["args"])  # exits (fails the test) on an unknown flag
    assert args.all_namespaces
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["http"] == args.http_port
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    annotations = dep["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(args.http_port) and annotations["prometheus.io/path"] == "/metrics"
    mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
    assert args.tensorboard_dir in mounts, "TensorBoard files need a writable volume (read-only root filesystem)"


@pytest.mark.parametrize("target", TARGETS)
def test_the_jobs_trainer_deployment_is_an_elastic_job_the_driver_reads(target):
    (dep,) = [o for o in kustomize_lite.render(REPO / "k8s" / target)
              if o["kind"] == "Deployment" and o["metadata"]["name"] == "pl-trainer"]
    dep["metadata"]["namespace"] = "my-job"  # given by `kubectl apply -n`
    job, why = kube_driver.read_job(dep)
    assert why is None, f"k8s/{target}: {why}"
    assert job.min_trainers <= job.replicas <= job.max_trainers
    container = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert job.request["cpu"] == parse_quantity(container["requests"]["cpu"])
    assert job.request["memory"] == parse_quantity(container["requests"]["memory"])
