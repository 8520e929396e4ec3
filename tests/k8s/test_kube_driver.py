"""The Kubernetes driver of the elastic policy (python/paddle_like/elastic/kube_driver.py),
against a replayed API server.

No Kubernetes API server can run here (no cluster, no kind, no network), so the driver
has NOT been run against a real cluster by these tests. What they do instead: a local
http.server on 127.0.0.1 (a free port) answers the official `kubernetes` Python client
from the exchanges in tests/k8s/recorded/*.json -- NodeList, PodList, DeploymentList,
Scale and Status bodies written by hand in the shape of a v1.29 API server's answers
(each decodes into the client's typed model without unknown fields, checked below), not
captured from a cluster. The replay server checks each request's method, path and query
against the recording, and does one thing an API server does: a PATCH of a Deployment's
scale changes the replicas the next DeploymentList shows. The real C++ policy
(paddle_like.elastic, from the build tree) decides.

The cluster in the recordings: node-1 (3 slots), node-2 (6) and node-6 (1, bound by
memory) take trainers; node-3 is unreachable, node-4 a tainted control-plane node,
node-5 cordoned. A slot is the largest trainer request: 2 cpu (team-a/pl-trainer) and
3Gi (team-b/ctr-trainer), so capacity = 10. team-a/pl-trainer: min 1, max 6, priority
0; team-b/ctr-trainer: min 2, max 4, priority 10; both run 2 trainers. Their fair
shares at capacity 10 are 6 and 4.

Run by ctest as k8s_kube_driver (tests/k8s/CMakeLists.txt), with PYTHONPATH at the build
tree's python/; by hand, build/python is tried when paddle_like is not importable.
"""

import copy
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
try:
    import paddle_like  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "build" / "python"))
    import paddle_like  # noqa: F401

from kubernetes import client as k8s_client
from kubernetes.utils.quantity import parse_quantity

from paddle_like import elastic
from paddle_like.elastic import kube_driver
from paddle_like.tensorboard import SummaryWriter

import kustomize_lite
from json_http import serve_json
from manifests import TARGETS

RECORDED = Path(__file__).resolve().parent / "recorded"
SETTLE_MS, COOLDOWN_MS = 10_000, 30_000
A, B = "team-a/pl-trainer", "team-b/ctr-trainer"
SCALE_A = "/apis/apps/v1/namespaces/team-a/deployments/pl-trainer/scale"
SCALE_B = "/apis/apps/v1/namespaces/team-b/deployments/ctr-trainer/scale"


# ---------------------------------------------------------------- the replayed API server

def recording(name):
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))["exchanges"]


class ReplayApiServer:
    """Answers from recorded exchanges, keyed by (method, path, query). `load` replaces
    the exchanges of the same requests, so a test changes the cluster between ticks by
    loading another recording. Every request is kept in `requests`."""

    def __init__(self):
        self._routes = {}
        self.requests = []
        self._lock = threading.Lock()
        self._server = serve_json(self._answer)
        self.port = self._server.server_address[1]
        self.url = self._server.url

    @staticmethod
    def _key(method, path, query):
        return method, path, tuple(sorted(query.items()))

    def load(self, *names):
        with self._lock:
            for name in names:
                for ex in recording(name):
                    r = ex["request"]
                    self._routes[self._key(r["method"], r["path"], r["query"])] = copy.deepcopy(ex["response"])

    def _answer(self, request):
        with self._lock:
            self.requests.append(request)
            response = self._routes.get(self._key(request["method"], request["path"], request["query"]))
            if response is None:
                return 404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": f"not in the recording: {request['method']} {request['path']} "
                                        f"{request['query']}", "reason": "NotFound", "code": 404}
            body = copy.deepcopy(response["body"])
            if request["method"] == "PATCH" and response["status"] == 200:
                replicas = request["body"]["spec"]["replicas"]
                body["spec"]["replicas"] = replicas
                self._edit_deployment(body["metadata"]["namespace"], body["metadata"]["name"], replicas)
            return response["status"], body

    def _lists(self, kind):
        return [r["body"] for (method, _, _), r in self._routes.items()
                if method == "GET" and r["body"].get("kind") == kind]

    def _edit_deployment(self, namespace, name, replicas):
        """What the API server does on a scale PATCH: the Deployment's spec follows."""
        for body in self._lists("DeploymentList"):
            for d in body["items"]:
                if (d["metadata"]["namespace"], d["metadata"]["name"]) == (namespace, name):
                    d["spec"]["replicas"] = replicas

    def set_replicas(self, namespace, name, replicas):
        """Someone else scales a Deployment (kubectl scale)."""
        with self._lock:
            self._edit_deployment(namespace, name, replicas)

    def edit_items(self, kind, fn):
        """Replaces the items of every served list of `kind` by fn(items)."""
        with self._lock:
            for body in self._lists(kind):
                body["items"] = fn(body["items"])

    def take(self, method=None):
        """The requests since the last take (of `method` only, if given)."""
        with self._lock:
            taken, self.requests = self.requests, []
        return [r for r in taken if method is None or r["method"] == method]

    def close(self):
        self._server.shutdown()
        self._server.server_close()


class FakeClock:
    def __init__(self):
        self.ms = 1_000_000

    def __call__(self):
        return self.ms

    def advance(self, ms):
        self.ms += ms


@pytest.fixture
def api():
    server = ReplayApiServer()
    server.load("deployments.json", "nodes.json", "pods.json", "scale.json")
    yield server
    server.close()


def make_driver(api, namespace=None, writer=None, clock=None):
    configuration = k8s_client.Configuration(host=api.url)
    policy = elastic.ElasticPolicy(cooldown_ms=COOLDOWN_MS, settle_ms=SETTLE_MS)
    clock = clock or FakeClock()
    return kube_driver.KubeDriver(k8s_client.ApiClient(configuration), policy, namespace=namespace,
                                  clock=clock, writer=writer), clock


def patches(requests):
    return {r["path"]: r["body"]["spec"]["replicas"] for r in requests if r["method"] == "PATCH"}


def targets(plan):
    return {d.name: d.target for d in plan.jobs}


def grown(api, capsys=None):
    """A driver past its first two ticks: adopted at 2 + 2, then grown to 6 + 4."""
    driver, clock = make_driver(api)
    driver.tick()
    clock.advance(SETTLE_MS)
    plan = driver.tick()
    assert targets(plan) == {A: 6, B: 4}
    api.take()
    if capsys is not None:
        capsys.readouterr()
    return driver, clock


# ---------------------------------------------------------------- the recordings themselves

class _Response:
    def __init__(self, obj):
        self.data = json.dumps(obj)


def _unknown_fields(ours, theirs, path=""):
    """Fields of the recording the typed model does not know (it drops them). A null
    (the API server writes `creationTimestamp: null` in templates) is dropped too."""
    out = []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key, value in ours.items():
            if value is None:
                continue
            if key not in theirs:
                out.append(f"{path}.{key}")
            else:
                out += _unknown_fields(value, theirs[key], f"{path}.{key}")
    elif isinstance(ours, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            out += _unknown_fields(a, b, f"{path}[{i}]")
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in RECORDED.glob("*.json")))
def test_recorded_bodies_are_what_the_api_returns(name):
    api = k8s_client.ApiClient()
    for ex in recording(name):
        body = ex["response"]["body"]
        version = body["apiVersion"].split("/")[-1]
        model = version[0].upper() + version[1:] + body["kind"]
        decoded = api.deserialize(_Response(body), model)
        unknown = _unknown_fields(body, api.sanitize_for_serialization(decoded))
        assert not unknown, f"{name}: fields no {model} has: {unknown}"


# ---------------------------------------------------------------- capacity, adoption, actions

def test_capacity_is_counted_from_nodes_and_pods(api):
    driver, _ = make_driver(api)
    plan = driver.tick()
    # node-1: 7910m - 1350m (kube-proxy, calico, pl-master-0) = 6560m -> 3 slots of 2 cpu;
    # node-2: 15890m - 2450m = 13440m -> 6; node-6: 7Gi - 4Gi (pl-pserver-r1-0) = 3Gi -> 1
    # slot of 3Gi (cpu would allow 2). The trainers' own requests are not subtracted.
    assert plan.capacity == 10
    snap = driver.snapshot()
    assert snap["capacity_text"] == "capacity 10 slots (a slot: cpu 2, memory 3Gi, 1 pod): 10 on 3 usable nodes of 6"
    assert snap["trainer_pods"] == 4
    gets = [(r["path"], r["query"]) for r in api.take("GET")]
    # Paged like kubectl; the PodList's second page is asked for with its continue token.
    assert [p for p, _ in gets] == ["/apis/apps/v1/deployments", "/api/v1/nodes", "/api/v1/pods", "/api/v1/pods"]
    assert gets[0][1] == {"labelSelector": "paddle-like.dev/elastic=true", "limit": "500"}
    assert gets[2][1] == {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed", "limit": "500"}
    assert gets[3][1]["continue"] == recording("pods.json")[0]["response"]["body"]["metadata"]["continue"]


def test_first_tick_adopts_the_running_trainers_and_changes_nothing(api, capsys):
    driver, clock = make_driver(api)
    plan = driver.tick()
    assert targets(plan) == {A: 2, B: 2} and not any(d.changed for d in plan.jobs)
    assert api.take("PATCH") == []
    out = capsys.readouterr().out
    assert f"{A}: adopted with 2 trainers (min 1, max 6, priority 0)" in out
    assert f"{B}: adopted with 2 trainers (min 2, max 4, priority 10)" in out
    # Before the jobs have been off their shares for settle_s, still nothing.
    clock.advance(SETTLE_MS - 1)
    driver.tick()
    assert api.take("PATCH") == []


def test_grow_patches_the_deployments_scale_subresource(api, capsys):
    driver, clock = make_driver(api)
    driver.tick()
    api.take()
    clock.advance(SETTLE_MS)
    plan = driver.tick()
    requests = api.take("PATCH")
    assert patches(requests) == {SCALE_A: 6, SCALE_B: 4}
    for r in requests:
        # A strategic merge patch of spec.replicas only: Kubernetes stops or starts the
        # trainers itself (SIGTERM with the Pod's grace period when it shrinks).
        assert r["body"] == {"spec": {"replicas": r["body"]["spec"]["replicas"]}}
        assert r["headers"]["content-type"] == "application/strategic-merge-patch+json"
    assert {d.name: d.reason for d in plan.jobs} == {A: "grow", B: "grow"}
    out = capsys.readouterr().out
    assert f"{A}: 2 -> 6 trainers (grow; share 6, running 2, min 1, max 6)" in out
    assert f"{B}: 2 -> 4 trainers (grow; share 4, running 2, min 2, max 4)" in out
    assert "plan: capacity 10, assigned 10" in out
    # The API server now shows the new replicas: nothing more to do.
    clock.advance(1000)
    driver.tick()
    assert api.take("PATCH") == []


def test_a_higher_priority_pending_pod_reclaims_trainers_at_once(api, capsys):
    driver, clock = grown(api, capsys)
    api.load("pods_pending_high_priority.json")
    clock.advance(2000)  # well inside the 30 s cooldown: reclaim ignores it
    plan = driver.tick()
    # team-c/etl-nightly (priority 1000, 4 cpu / 8Gi) needs ceil(8Gi / 3Gi) = 3 slots;
    # the scavenger (priority -200) and team-a's own pending trainer take nothing.
    assert plan.capacity == 7
    assert patches(api.take("PATCH")) == {SCALE_A: 3}  # the lowest priority gives them back
    assert {d.name: (d.target, d.reason) for d in plan.jobs} == {A: (3, "reclaim"), B: (4, "unchanged")}
    out = capsys.readouterr().out
    assert f"{A}: 6 -> 3 trainers (reclaim; share 3" in out
    assert "less 3 for 1 pending higher-priority pod(s) (team-c/etl-nightly-28611360-xk4vd)" in out


def test_over_commitment_is_reported_and_never_cuts_below_the_minimums(api, capsys):
    driver, clock = grown(api, capsys)
    api.load("nodes_two_lost.json")  # node-1 and node-2 stop reporting: 1 slot left
    clock.advance(2000)
    plan = driver.tick()
    assert plan.capacity == 1 and plan.over_committed and plan.sum_minimums == 3
    # Cut to their minimums, not below: each job keeps its last trainers.
    assert patches(api.take("PATCH")) == {SCALE_A: 1, SCALE_B: 2}
    err = capsys.readouterr().err
    assert err.count("over-committed: capacity 1 slots is below the admitted minimums (3); "
                     "no job is cut below its minimum") == 1
    for _ in range(2):
        clock.advance(SETTLE_MS + COOLDOWN_MS)
        driver.tick()
    assert api.take("PATCH") == []
    assert "over-committed" not in capsys.readouterr().err  # once per change of state
    assert driver.snapshot()["over_committed"]
    api.load("nodes.json")
    clock.advance(1000)
    driver.tick()
    assert "no longer over-committed: capacity 10" in capsys.readouterr().out


def test_bad_annotations_skip_that_job_with_one_line_naming_the_annotation(api, capsys):
    api.load("deployments_bad_annotations.json")
    driver, clock = make_driver(api)
    plan = driver.tick()
    err = capsys.readouterr().err.splitlines()
    wanted = [
        "deployment team-b/ctr-trainer: annotation paddle-like.dev/min-trainers=5 is above "
        "paddle-like.dev/max-trainers=2; not managed until fixed",
        "deployment team-c/etl-trainer: annotation paddle-like.dev/priority='high' is not an integer; "
        "not managed until fixed",
        "deployment team-d/rank-trainer: annotation paddle-like.dev/max-trainers is missing; not managed until fixed",
    ]
    assert [line.split(": ", 1)[1] for line in err if " ERROR " in line] == wanted
    # The others go on: team-a/pl-trainer is managed alone.
    assert targets(plan) == {A: 2}
    clock.advance(SETTLE_MS)
    plan = driver.tick()
    assert patches(api.take("PATCH")) == {SCALE_A: 6}
    assert "ERROR" not in capsys.readouterr().err  # each problem is logged once, not every tick
    assert sorted(driver.snapshot()["problems"]) == ["team-b/ctr-trainer", "team-c/etl-trainer", "team-d/rank-trainer"]


def test_a_job_whose_annotations_break_keeps_its_last_bounds(api, capsys):
    driver, clock = grown(api, capsys)
    api.load("deployments_bad_annotations.json")  # recorded before the grow: bring it up to date
    api.set_replicas("team-a", "pl-trainer", 6)
    api.set_replicas("team-b", "ctr-trainer", 4)
    clock.advance(1000)
    plan = driver.tick()
    assert "deployment team-b/ctr-trainer: annotation paddle-like.dev/min-trainers=5 is above " \
           "paddle-like.dev/max-trainers=2; keeping its last valid bounds" in capsys.readouterr().err
    assert targets(plan)[B] == 4 and api.take("PATCH") == []


def test_a_refused_patch_is_logged_and_retried(api, capsys):
    driver, clock = make_driver(api)
    driver.tick()
    api.load("scale_forbidden.json")
    clock.advance(SETTLE_MS)
    driver.tick()
    assert patches(api.take("PATCH")) == {SCALE_A: 6, SCALE_B: 4}
    err = capsys.readouterr().err
    assert (f"{A}: scaling to 6 trainers failed (HTTP 403 Forbidden: deployments.apps \"pl-trainer\" is forbidden: "
            "User \"system:serviceaccount:paddle-like-system:pl-autoscaler\" cannot patch resource") in err
    api.load("scale.json")
    clock.advance(1000)
    driver.tick()
    assert patches(api.take("PATCH")) == {SCALE_A: 6}  # level-triggered: replicas still differ
    assert driver.snapshot()["scale_requests"] == {"ok": 2, "error": 1}


def test_replicas_changed_by_hand_are_restored(api, capsys):
    driver, clock = grown(api, capsys)
    api.set_replicas("team-a", "pl-trainer", 9)  # kubectl scale --replicas=9
    clock.advance(1000)
    driver.tick()
    assert patches(api.take("PATCH")) == {SCALE_A: 6}
    assert f"{A}: replicas 9 were set outside the autoscaler; restoring its target 6" in capsys.readouterr().err


def test_an_unreadable_cluster_decides_nothing(api, capsys):
    driver, clock = grown(api, capsys)
    api.load("nodes_forbidden.json")
    for _ in range(3):
        clock.advance(SETTLE_MS)
        assert driver.tick() is None
    # No node list must never read as zero capacity: nothing is reclaimed.
    assert api.take("PATCH") == []
    err = capsys.readouterr().err
    assert err.count("cannot read the cluster (HTTP 403 Forbidden: nodes is forbidden") == 1
    assert driver.snapshot()["ok"] is False
    api.load("nodes.json")
    assert driver.tick() is not None and "the cluster can be read again" in capsys.readouterr().out


def test_a_deployment_gone_from_the_list_is_removed_from_the_policy(api, capsys):
    driver, clock = grown(api, capsys)
    api.edit_items("DeploymentList", lambda items: [d for d in items if d["metadata"]["namespace"] != "team-b"])
    clock.advance(1000)
    plan = driver.tick()
    assert [d.name for d in plan.jobs] == [A]
    assert f"{B}: no longer an elastic job (deleted or unlabelled); its slots are free" in capsys.readouterr().out
    assert api.take("PATCH") == []


def test_a_job_that_appears_later_waits_for_admission(api, capsys):
    api.load("nodes_two_lost.json")  # 1 slot
    api.edit_items("DeploymentList", lambda items: [d for d in items if d["metadata"]["namespace"] == "team-a"])
    driver, clock = make_driver(api)
    plan = driver.tick()
    # Adopted at 2, but 1 slot is all there is: reclaimed to its minimum at once.
    assert patches(api.take("PATCH")) == {SCALE_A: 1} and plan.jobs[0].reason == "reclaim"
    api.load("deployments.json")  # team-b/ctr-trainer (min 2) appears with 2 replicas
    api.set_replicas("team-a", "pl-trainer", 1)
    clock.advance(1000)
    plan = driver.tick()
    assert {d.name: (d.target, d.reason) for d in plan.jobs} == {B: (0, "queued"), A: (1, "unchanged")}
    assert patches(api.take("PATCH")) == {SCALE_B: 0}
    out = capsys.readouterr().out
    assert f"{B}: new elastic job (min 2, max 4, priority 10)" in out
    assert f"{B}: waits for admission (queued); scaling its 2 replicas to 0" in out


def test_a_dry_run_decides_and_logs_but_never_patches(api, capsys):
    configuration = k8s_client.Configuration(host=api.url)
    clock = FakeClock()
    driver = kube_driver.KubeDriver(k8s_client.ApiClient(configuration),
                                    elastic.ElasticPolicy(cooldown_ms=COOLDOWN_MS, settle_ms=SETTLE_MS),
                                    clock=clock, dry_run=True)
    driver.tick()
    for _ in range(3):
        clock.advance(SETTLE_MS)
        driver.tick()
    assert api.take("PATCH") == []
    out = capsys.readouterr().out
    assert out.count(f"{A}: dry run: would scale from 2 to 6 trainers") == 1
    assert out.count(f"{A}: 2 -> 6 trainers (grow") == 1


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
