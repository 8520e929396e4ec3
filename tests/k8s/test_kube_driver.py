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

The replayed API server is kube_replay.py; what the driver shows (status page, metrics,
TensorBoard), its command line and its manifests are tested in test_kube_driver_cli.py.
Run by ctest as k8s_kube_driver (tests/k8s/CMakeLists.txt), with PYTHONPATH at the build
tree's python/; by hand, build/python is tried when paddle_like is not importable.
"""

import json

import pytest
from kubernetes import client as k8s_client

# `api`: the fixture (a replayed API server), used by name as the tests' argument.
from kube_replay import (A, B, COOLDOWN_MS, RECORDED, SCALE_A, SCALE_B, SETTLE_MS, FakeClock,  # noqa: F401
                         api, elastic, grown, kube_driver, make_driver, patches, recording, targets)


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
