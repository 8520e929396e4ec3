"""The PaddleLikeJob operator (python/paddle_like/k8s/operator.py) against a stand-in API
server and stand-in masters.

No Kubernetes API server can run here, so the operator has NOT been run against a real
cluster by these tests. It runs, with the official Python client, against
tests/k8s/fake_apiserver.py: objects kept in memory behind the REST paths the client
calls (list, create, merge-patch, delete), seeded and overridden by hand-written
exchanges in the shape of a v1.29 API server's (tests/k8s/recorded/operator/*.json: the
jobs as applied, Pods in several states, a refused create, a cluster without
cert-manager); and the masters' /status.json pages replayed from recorded pages in
master/status_page.cc's format. The recorded bodies are checked below: built-in ones
decode into the client's typed models, jobs validate against the CRD, master pages
carry only fields the status page writes.

The story of the main test: the two example jobs of k8s/jobs/example are applied in
team-a; the operator makes their objects, follows their masters, waits for their
trainers' final evaluation once the masters say done, marks them Succeeded and deletes
their trainers (and master and pservers): nothing is made again after that.

Needs the built package (paddle_like imports its extension): ctest k8s_operator.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if importlib.util.find_spec("paddle_like") is None:  # run by hand: the build tree's package
    sys.path.insert(0, str(REPO / "build" / "python"))

from kubernetes import client as k8s_client

from paddle_like.k8s import job_objects, job_spec, operator

import fake_apiserver
import manifests
import openapi_lite
import test_manifests
from fake_apiserver import FakeApiServer, FakeMasters, recording, unknown_fields
from test_job_resources import schema

JOBS = ("paddle-like.dev/v1", "paddlelikejobs")
MLP, OWN = "fashion-mnist-mlp", "fashion-mnist-own-loop"
NOW = 1717401000  # 2024-06-03T07:50:00Z


class Clock:
    def __init__(self):
        self.now = NOW

    def __call__(self):
        return self.now


@pytest.fixture
def cluster():
    api, masters = FakeApiServer(), FakeMasters()
    yield api, masters
    api.close()
    masters.close()


def make_operator(api, masters, namespace=None, clock=None):
    client = k8s_client.ApiClient(k8s_client.Configuration(host=api.url))
    return operator.JobOperator(client, namespace=namespace, master_url=masters.url, clock=clock or Clock(),
                                http_timeout_s=2)


def job(api, namespace, name):
    return api.get(*JOBS[:1], namespace, JOBS[1], name)


def condition(obj, type_):
    """(status, reason) of a condition, as `kubectl wait --for=condition=TYPE` reads it."""
    for c in (obj.get("status") or {}).get("conditions", []):
        if c["type"] == type_:
            return c["status"], c["reason"]
    return None


def posted(requests):
    return sorted((r["path"].rsplit("/", 1)[-1], r["body"]["metadata"]["name"]) for r in requests
                  if r["method"] == "POST")


def deleted(requests):
    return sorted((r["path"].split("/")[-2], r["path"].split("/")[-1]) for r in requests if r["method"] == "DELETE")


def spec_of(api, name):
    return job_spec.parse(job(api, "team-a", name))


def set_pods(api, name):
    api.clear("pods")
    api.seed(name)


# ---------------------------------------------------------------- a job from apply to Succeeded

def test_a_job_runs_from_apply_to_succeeded_and_its_trainers_stop(cluster, capsys):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    clock = Clock()
    op = make_operator(api, masters, clock=clock)

    # 1. New jobs: every object each one is made of is created, labelled and owned by it.
    assert op.tick() == {f"team-a/{MLP}": "Pending", f"team-a/{OWN}": "Pending"}
    requests = api.take()
    for name in (MLP, OWN):
        spec = spec_of(api, name)
        want = job_objects.render(spec)
        made = [r["body"] for r in requests if r["method"] == "POST" and r["body"]["metadata"]["labels"]
                [job_spec.JOB_LABEL] == name]
        assert made == want, f"{name}: the operator created other objects than job_objects.render says"
        assert all(o["metadata"]["ownerReferences"][0]["uid"] == job(api, "team-a", name)["metadata"]["uid"]
                   for o in made)
        status = job(api, "team-a", name)["status"]
        assert condition(job(api, "team-a", name), "Created") == ("True", "ChildrenCreated")
        assert condition(job(api, "team-a", name), "Running") == ("False", "MasterNotServing")
        assert status["phase"] == "Pending" and status["masterAddress"] == f"{name}-master-0.{name}-master:7000"
    # Two jobs in one namespace: no object of one is named like one of the other's.
    by_job = {name: {(r["path"], r["body"]["metadata"]["name"]) for r in requests if r["method"] == "POST"
                     and r["body"]["metadata"]["labels"][job_spec.JOB_LABEL] == name} for name in (MLP, OWN)}
    assert by_job[MLP] and by_job[OWN] and not by_job[MLP] & by_job[OWN]
    status_patches = [r for r in requests if r["method"] == "PATCH"]
    assert {r["content_type"] for r in status_patches} == {"application/merge-patch+json"}
    assert all(r["path"].endswith("/status") for r in status_patches)

    # 2. The next pass makes nothing new; the masters serve: Running, with progress.
    masters.load("masters_running.json")
    set_pods(api, "pods_running.json")
    assert op.tick() == {f"team-a/{MLP}": "Running", f"team-a/{OWN}": "Running"}
    assert posted(api.take()) == []
    mlp = job(api, "team-a", MLP)
    assert condition(mlp, "Running") == ("True", "MasterServing")
    assert mlp["status"]["progress"] == {"pass": 3, "passes": 10, "tasksTodo": 412, "tasksPending": 4,
                                         "tasksDone": 184, "tasksFailed": 0, "samplesDone": 1177600,
                                         "liveTrainers": 2}
    created_at = [c["lastTransitionTime"] for c in mlp["status"]["conditions"] if c["type"] == "Created"]

    # 3. The masters say the job is done; the trainers still evaluate: nothing is deleted yet.
    masters.load("masters_done.json")
    clock.now += 60
    op.tick()
    assert deleted(api.take()) == []
    assert condition(job(api, "team-a", MLP), "Running") == ("True", "Evaluating")
    assert "trainer" in api.names("deployments", "team-a")[0]

    # 4. Every trainer exited 0 once: Succeeded, trainers deleted first, then the servers.
    set_pods(api, "pods_evaluated.json")
    clock.now += 30
    assert op.tick() == {f"team-a/{MLP}": "Succeeded", f"team-a/{OWN}": "Succeeded"}
    requests = api.take()
    gone = deleted(requests)
    for name in (MLP, OWN):
        spec = spec_of(api, name)
        assert ("deployments", f"{name}-trainer") in gone
        assert {("statefulsets", n) for n in [f"{name}-master"] + job_objects.pserver_set_names(spec)} <= set(gone)
        assert ("poddisruptionbudgets", f"{name}-servers") in gone
        first = [i for i, r in enumerate(requests) if r["method"] == "DELETE" and name in r["path"]]
        assert requests[first[0]]["path"].endswith(f"/deployments/{name}-trainer"), "stop the trainers first"
        assert all(r["query"] == {"propagationPolicy": "Background"} for r in requests if r["method"] == "DELETE")
        done = job(api, "team-a", name)
        assert condition(done, "Succeeded") == ("True", "JobDone")
        assert condition(done, "Running") == ("False", "JobDone")
        assert done["status"]["phase"] == "Succeeded" and done["status"]["completionTime"] == "2024-06-03T07:51:30Z"
    assert [c["lastTransitionTime"] for c in job(api, "team-a", MLP)["status"]["conditions"]
            if c["type"] == "Created"] == created_at, "a condition that did not change keeps its transition time"
    assert api.names("deployments") == [] and api.names("statefulsets") == []
    # The NetworkPolicy and certificates stay until the job is deleted (garbage collection).
    assert api.names("networkpolicies", "team-a") == [MLP, OWN]

    # 5. Over is over: nothing is made again, no status is rewritten.
    assert op.tick() == {f"team-a/{MLP}": "Succeeded", f"team-a/{OWN}": "Succeeded"}
    assert [r["method"] for r in api.take() if r["method"] != "GET"] == []
    out = capsys.readouterr()
    assert f"team-a/{MLP}: Succeeded: " in out.out and "JobDone: 10 passes done: 600 tasks" in out.out


def test_trainers_that_never_finish_evaluating_are_stopped_after_the_timeout(cluster):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    api.remove(*JOBS[:1], "team-a", JOBS[1], OWN)
    clock = Clock()
    op = make_operator(api, masters, clock=clock)
    op.tick()
    masters.load("masters_done.json")
    set_pods(api, "pods_running.json")  # trainers that never exit
    op.tick()
    clock.now += 599
    op.tick()
    assert condition(job(api, "team-a", MLP), "Running") == ("True", "Evaluating")
    assert deleted(api.take()) == []
    clock.now += 1
    op.tick()
    done = job(api, "team-a", MLP)
    assert condition(done, "Succeeded") == ("True", "JobDone")
    assert "2 trainers still evaluating after 600 s are stopped" in done["status"]["conditions"][-1]["message"]
    assert ("deployments", f"{MLP}-trainer") in deleted(api.take())


def test_more_failed_tasks_than_allowed_fail_the_job(cluster):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    api.remove(*JOBS[:1], "team-a", JOBS[1], OWN)
    op = make_operator(api, masters)
    op.tick()
    masters.load("masters_done_failed_tasks.json")
    set_pods(api, "pods_evaluated.json")
    assert op.tick() == {f"team-a/{MLP}": "Failed"}
    failed = job(api, "team-a", MLP)
    assert condition(failed, "Failed") == ("True", "TasksFailed")
    assert condition(failed, "Succeeded") is None
    message = [c["message"] for c in failed["status"]["conditions"] if c["type"] == "Failed"][0]
    assert "2 tasks failed 3 times and were set aside (ids 57, 311)" in message
    assert "spec.runPolicy.maxFailedTasks is 0" in message
    assert ("deployments", f"{MLP}-trainer") in deleted(api.take())


def test_a_crash_looping_trainer_fails_its_job_only(cluster, capsys):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    op = make_operator(api, masters)
    op.tick()
    masters.load("masters_running.json")
    set_pods(api, "pods_crashloop.json")
    assert op.tick() == {f"team-a/{MLP}": "Running", f"team-a/{OWN}": "Failed"}
    own = job(api, "team-a", OWN)
    assert condition(own, "Failed") == ("True", "BackoffLimitExceeded")
    message = [c["message"] for c in own["status"]["conditions"] if c["type"] == "Failed"][0]
    assert message == (f"Pod {OWN}-trainer-7d4f9b6c8-m5n7r container trainer restarted 7 times "
                       "(spec.runPolicy.backoffLimit 6), last exit code 1 (Error)")
    gone = deleted(api.take())
    assert ("deployments", f"{OWN}-trainer") in gone and not [n for _, n in gone if n.startswith(MLP)]
    assert f"team-a/{OWN}: Failed: " in capsys.readouterr().err


def test_clean_pod_policy_trainers_keeps_the_master_and_pservers(cluster):
    api, masters = cluster
    api.seed("job_provided_tls.json")
    op = make_operator(api, masters)
    op.tick()
    assert api.names("issuers") == [] and api.names("certificates") == [], "Provided: no cert-manager objects"
    dep = api.get("apps/v1", "team-c", "deployments", "ctr-small-trainer")
    assert job_objects.ELASTIC_LABEL not in dep["metadata"]["labels"], "elastic: false"
    masters.pages["/team-c/ctr-small/status.json"] = recording("masters_done.json")[0]["response"]["body"]
    assert op.tick() == {"team-c/ctr-small": "Succeeded"}  # no trainer Pods: nothing to wait for
    assert deleted(api.take()) == [("deployments", "ctr-small-trainer")]
    assert api.names("statefulsets", "team-c") == ["ctr-small-master", "ctr-small-pserver"]


# ---------------------------------------------------------------- bad specs, refusals, a missing cert-manager

def test_a_bad_spec_is_reported_on_the_job_and_nothing_is_made_until_it_is_fixed(cluster, capsys):
    api, masters = cluster
    api.seed("job_invalid.json")
    op = make_operator(api, masters)
    assert op.tick() == {"team-b/ctr": "Failed"}
    bad = job(api, "team-b", "ctr")
    assert condition(bad, "Failed") == ("True", "InvalidSpec")
    assert bad["status"]["conditions"][-1]["message"] == (
        "spec.trainer.minReplicas: 5 is above spec.trainer.maxReplicas (2)")
    assert posted(api.take()) == []
    assert "spec.trainer.minReplicas: 5 is above" in capsys.readouterr().err
    op.tick()  # said once, written once
    assert [r for r in api.take() if r["method"] != "GET"] == [] and capsys.readouterr().err == ""
    # kubectl apply of the fixed spec: a new generation; the job is made.
    fixed = job(api, "team-b", "ctr")
    fixed["spec"]["trainer"]["maxReplicas"] = 8
    fixed["metadata"]["generation"] = 2
    api.put(*JOBS, fixed)
    assert op.tick() == {"team-b/ctr": "Pending"}
    now = job(api, "team-b", "ctr")
    assert condition(now, "Failed") is None and now["status"]["observedGeneration"] == 2
    assert ("statefulsets", "ctr-master") in posted(api.take())


def test_a_refused_create_is_reported_and_retried(cluster, capsys):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    api.answer("create_forbidden.json")
    op = make_operator(api, masters)
    op.tick()
    mlp = job(api, "team-a", MLP)
    assert condition(mlp, "Created") == ("False", "CreateFailed")
    message = mlp["status"]["conditions"][0]["message"]
    assert message.startswith(f"creating StatefulSet {MLP}-master: HTTP 403 Forbidden: statefulsets.apps is forbidden")
    assert api.names("statefulsets") == [] and f"{MLP}-trainer" in api.names("deployments")
    assert "retried next pass" in capsys.readouterr().err
    api.forget_answers()
    op.tick()
    assert condition(job(api, "team-a", MLP), "Created") == ("True", "ChildrenCreated")
    assert {n for _, n in posted(api.take())} >= {f"{MLP}-master", f"{MLP}-pserver", f"{MLP}-pserver-r1"}


def test_without_cert_manager_only_the_jobs_that_need_it_wait(cluster):
    api, masters = cluster
    api.seed("jobs_team_a.json", "job_provided_tls.json")
    api.answer("cert_manager_missing.json")
    op = make_operator(api, masters)
    op.tick()
    mlp = job(api, "team-a", MLP)
    assert condition(mlp, "Created") == ("False", "CreateFailed")
    assert "cert-manager is not installed" in mlp["status"]["conditions"][0]["message"]
    assert "spec.tls.certificates: Provided" in mlp["status"]["conditions"][0]["message"]
    # Its other objects are made (their Pods wait for the Secrets); the other job is unaffected.
    assert f"{MLP}-master" in api.names("statefulsets")
    assert condition(job(api, "team-c", "ctr-small"), "Created") == ("True", "ChildrenCreated")
    assert not [r for r in api.take("POST") if "cert-manager" in r["path"]]


def test_an_unreadable_cluster_changes_nothing(cluster, capsys):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    api.answer("jobs_forbidden.json")
    op = make_operator(api, masters)
    assert op.tick() is None and op.tick() is None
    assert [r for r in api.take() if r["method"] != "GET"] == []
    err = capsys.readouterr().err
    assert err.count("cannot read the cluster (HTTP 403 Forbidden: paddlelikejobs.paddle-like.dev is forbidden") == 1
    api.forget_answers()
    assert op.tick() is not None and "the cluster can be read again" in capsys.readouterr().out


def test_changed_trainer_bounds_reach_the_autoscaler(cluster, capsys):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    op = make_operator(api, masters, namespace="team-a")
    op.tick()
    changed = job(api, "team-a", MLP)
    changed["spec"]["trainer"].update(minReplicas=2, maxReplicas=32, priority=5)
    api.put(*JOBS, changed)
    api.take()
    op.tick()
    (patch,) = [r for r in api.take("PATCH") if "/deployments/" in r["path"]]
    assert patch["path"] == f"/apis/apps/v1/namespaces/team-a/deployments/{MLP}-trainer"
    assert patch["content_type"] == "application/strategic-merge-patch+json"
    annotations = api.get("apps/v1", "team-a", "deployments", f"{MLP}-trainer")["metadata"]["annotations"]
    assert annotations == {job_objects.MIN_ANNOTATION: "2", job_objects.MAX_ANNOTATION: "32",
                           job_objects.PRIORITY_ANNOTATION: "5"}
    assert "trainers now min 2, max 32, priority 5, elastic" in capsys.readouterr().out
    op.tick()
    assert not [r for r in api.take("PATCH") if "/deployments/" in r["path"]], "patched once"


# ---------------------------------------------------------------- the manifests' contract with the operator

def _rbac_triple(request):
    parts = request["path"].strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    verb = {"GET": "get" if len(rest) > 1 else "list", "PATCH": "patch", "PUT": "update", "POST": "create",
            "DELETE": "delete"}[request["method"]]
    return group, resource, verb


def test_the_clusterrole_grants_exactly_what_the_operator_uses(cluster):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    op = make_operator(api, masters)
    op.tick()
    changed = job(api, "team-a", MLP)
    changed["spec"]["trainer"]["maxReplicas"] = 20
    api.put(*JOBS, changed)
    op.tick()
    masters.load("masters_done.json")
    set_pods(api, "pods_evaluated.json")
    op.tick()
    used = {_rbac_triple(r) for r in api.take()}
    role = manifests.one(manifests.objects(manifests.CLUSTER), "ClusterRole", "pl-operator")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == used, f"ClusterRole grants {sorted(granted - used)} unused, lacks {sorted(used - granted)}"


def test_the_operator_deployment_runs_it_with_flags_it_accepts():
    dep = manifests.one(manifests.objects(manifests.CLUSTER), "Deployment", "pl-operator")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    env = {v["name"]: v for v in c["env"]}
    args = [re.sub(r"\$\((\w+)\)", lambda m: "paddle-like-system" if m.group(1) in env else m.group(0), a)
            for a in c["args"]]
    parsed = operator._parser().parse_args(args)  # exits (fails the test) on an unknown flag
    assert parsed.all_namespaces and parsed.operator_namespace == dep["metadata"]["namespace"]
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert {p["name"]: p["containerPort"] for p in c["ports"]}["http"] == parsed.http_port
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "http"}


def test_the_recorded_bodies_are_what_the_api_and_the_masters_return():
    api = k8s_client.ApiClient()
    page_fields = set(re.findall(r'\\"(\w+)\\":', (REPO / "master/status_page.cc").read_text()))
    for path in sorted(fake_apiserver.RECORDED.glob("*.json")):
        for ex in recording(path.name):
            body = ex["response"]["body"]
            if path.name.startswith("masters_"):
                fields = set(body) | set(body["job"]) | {k for t in body["trainers"] for k in t} | \
                    {k for p in body["pservers"] for k in p} | {k for c in body["curves"].values() for k in c}
                assert fields <= page_fields, f"{path.name}: {sorted(fields - page_fields)} not in status_page.cc"
            elif body["kind"] == "PaddleLikeJobList":
                for item in body["items"]:
                    problems = openapi_lite.validate(item, schema())
                    assert not problems, f"{path.name} {item['metadata']['name']}: {problems}"
            else:
                model = "V1" + body["kind"]
                decoded = api.deserialize(test_manifests._Response(body), model)
                unknown = unknown_fields(body, api.sanitize_for_serialization(decoded))
                assert not unknown, f"{path.name}: fields the typed model does not know: {unknown}"


def test_the_seeded_pod_lists_are_the_requests_the_operator_makes(cluster):
    api, masters = cluster
    api.seed("jobs_team_a.json")
    make_operator(api, masters).tick()
    sent = {(r["method"], r["path"], tuple(sorted(r["query"].items()))) for r in api.take()}
    for name in ("pods_running.json", "jobs_team_a.json", "cert_manager_missing.json", "jobs_forbidden.json"):
        for ex in recording(name):
            r = ex["request"]
            assert (r["method"], r["path"], tuple(sorted(r["query"].items()))) in sent, f"{name}: {r}"


# ---------------------------------------------------------------- command line, /metrics, /healthz

def _kubeconfig(tmp_path, url):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "op"}}],
        "users": [{"name": "op", "user": {"token": "t"}}]}))
    return path


def _run_cli(args):
    # The folder holding the package operator.py was imported from (no symlink resolved:
    # the build tree's .py files are links to python/, beside the extension).
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(operator.__file__))))
    env = dict(os.environ, PYTHONPATH=package_root, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "paddle_like.k8s.operator", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_command_line_once_through_a_kubeconfig(cluster, tmp_path):
    api, _ = cluster
    api.seed("job_provided_tls.json")
    out = _run_cli(["--namespace", "team-c", "--once", "--http_port", "-1",
                    "--kubeconfig", str(_kubeconfig(tmp_path, api.url))])
    assert out.returncode == 0, out.stderr
    assert "team-c/ctr-small: created StatefulSet ctr-small-master" in out.stdout
    assert api.names("statefulsets", "team-c") == ["ctr-small-master", "ctr-small-pserver"]
    # One namespace: every list is the namespace's.
    lists = api.take("GET")
    assert lists and all(r["path"].split("/")[-3:-1] == ["namespaces", "team-c"] for r in lists), lists


def test_command_line_errors_name_the_flag(cluster, tmp_path):
    api, _ = cluster
    out = _run_cli(["--all-namespaces", "--period_s", "0"])
    assert out.returncode == 2 and "--period_s=0.0: must be above 0" in out.stderr
    out = _run_cli(["--once"])
    assert out.returncode == 2 and "one of the arguments --namespace --all-namespaces" in out.stderr
    out = _run_cli(["--all-namespaces", "--once", "--http_port", "-1",
                    "--kubeconfig", str(_kubeconfig(tmp_path, api.url + "/nowhere"))])
    assert out.returncode == 1 and "cannot read the cluster (HTTP 404" in out.stderr


def test_metrics_and_healthz(cluster):
    api, masters = cluster
    api.seed("jobs_team_a.json", "job_invalid.json")
    op = make_operator(api, masters)
    server = op.serve("127.0.0.1", 0, stale_after_s=300)
    try:
        op.tick()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
        assert 'pl_operator_jobs{phase="Pending"} 2' in text and 'pl_operator_jobs{phase="Failed"} 1' in text
        created = sum(len(job_objects.render(spec_of(api, n))) for n in (MLP, OWN))
        assert f"pl_operator_created_total {created}" in text and "pl_operator_ticks_total 1" in text
        assert urllib.request.urlopen(base + "/healthz", timeout=10).read() == b"ok\n"
        assert not op.healthy(stale_after_s=-1)  # a stuck loop: the kubelet restarts the Pod
    finally:
        server.shutdown()
