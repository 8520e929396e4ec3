"""Offline checks of k8s/autoscaler (the elastic-trainer autoscaler) and of the elastic
trainers' label and annotations in the job manifests. No API server needed; yamllint
covers these files in test_manifests.py (every k8s/**/*.yaml). What needs the driver
itself (the flags it accepts, the API calls the ClusterRole must allow) is checked in
test_kube_driver.py.

Run by ctest with the rest of tests/k8s (`python3 -m pytest -q tests/k8s`).
"""

import shutil
import subprocess

import pytest
import yaml
from kubernetes import client as k8s_client

import manifests
import test_manifests as m

# The driver's names (python/paddle_like/elastic/kube_driver.py; test_kube_driver.py
# reads the job manifests with the driver itself).
ELASTIC_LABEL = "paddle-like.dev/elastic"
MIN_ANNOTATION = "paddle-like.dev/min-trainers"
MAX_ANNOTATION = "paddle-like.dev/max-trainers"
PRIORITY_ANNOTATION = "paddle-like.dev/priority"
READ_VERBS = {"get", "list", "watch"}


def autoscaler():
    return manifests.objects(manifests.AUTOSCALER)


def test_renders_without_duplicates():
    keys = [(o["kind"], o["metadata"]["name"]) for o in autoscaler()]
    assert sorted(keys) == sorted(set(keys)) and keys
    assert {k for k, _ in keys} == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"}


def test_render_matches_kubectl_kustomize():
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed: rendered by tests/k8s/kustomize_lite.py only")
    major = m._kustomize_version()
    if major is None or major < 4:
        pytest.skip(f"kubectl's kustomize is v{major}, older than v4")
    out = subprocess.run(["kubectl", "kustomize", str(manifests.K8S / manifests.AUTOSCALER)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.stdout) if o}
    assert {(o["kind"], o["metadata"]["name"]): o for o in autoscaler()} == theirs


def test_objects_decode_into_typed_models():
    api = k8s_client.ApiClient()
    for obj in autoscaler():
        version = obj["apiVersion"].split("/")[-1]
        model = version[0].upper() + version[1:] + obj["kind"]
        decoded = api.deserialize(m._Response(obj), model)
        diffs = m._differences(obj, api.sanitize_for_serialization(decoded))
        assert not diffs, f"{m.where(obj)}:\n  " + "\n  ".join(diffs)


def test_namespaced_objects_live_in_the_namespace_it_creates():
    objs = autoscaler()
    (ns,) = m.by_kind(objs, "Namespace")
    for o in objs:
        if o["kind"] in ("ServiceAccount", "Deployment"):
            assert o["metadata"].get("namespace") == ns["metadata"]["name"], m.where(o)


def test_rbac_is_minimal_and_bound_to_the_autoscalers_service_account():
    objs = autoscaler()
    (role,) = m.by_kind(objs, "ClusterRole")
    (binding,) = m.by_kind(objs, "ClusterRoleBinding")
    (dep,) = m.by_kind(objs, "Deployment")
    (sa,) = m.by_kind(objs, "ServiceAccount")
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"ClusterRole {role['metadata']['name']}: wildcard in {field}"
        assert not {"secrets", "configmaps", "pods/exec", "pods/log"} & set(rule["resources"]), rule
        writes = set(rule["verbs"]) - READ_VERBS
        assert not writes or (rule["resources"] == ["deployments/scale"] and writes <= {"patch", "update"}), (
            f"the autoscaler may write only a Deployment's scale: {rule}")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]


def test_one_autoscaler_at_a_time_locked_down():
    (dep,) = m.by_kind(autoscaler(), "Deployment")
    # Two drivers would both act (and fight over replicas): one replica, never a surge.
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    spec = dep["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec.get("enableServiceLinks") is False
    (c,) = spec["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind]), kind
    assert "/" in c["image"] and ":" in c["image"].rsplit("/", 1)[-1], f"image {c['image']!r} has no registry or tag"


@pytest.mark.parametrize("target", m.TARGETS)
def test_job_trainers_are_elastic_within_their_bounds(target):
    objs = m.objects(target)
    dep, _ = m.container_named(objs, "pl-trainer")
    assert dep["metadata"]["labels"].get(ELASTIC_LABEL) == "true", f"k8s/{target}: trainers not labelled elastic"
    annotations = dep["metadata"]["annotations"]
    lo, hi = int(annotations[MIN_ANNOTATION]), int(annotations[MAX_ANNOTATION])
    int(annotations.get(PRIORITY_ANNOTATION, "0"))
    assert 0 <= lo <= hi and hi >= 1, f"k8s/{target}: min {lo}, max {hi}"
    # The autoscaler adopts the replicas it finds: the applied count should be a valid one.
    assert lo <= dep["spec"]["replicas"] <= hi, (
        f"k8s/{target}: replicas {dep['spec']['replicas']} outside [{lo}, {hi}]")
