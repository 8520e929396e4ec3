"""Offline checks of the cluster setup (k8s/cluster: the PaddleLikeJob CRD, the trainers'
PriorityClass, the operator) and of the jobs written as PaddleLikeJobs (k8s/jobs/*),
without an API server and without the operator (test_operator*.py run it).

  - every kustomization renders (compared with `kubectl kustomize` when a recent
    kubectl is installed); built-in objects decode into the Kubernetes client's typed
    models with no field dropped (the CRD too);
  - the CRD's schema is structural and uses only what tests/k8s/openapi_lite.py checks;
    every PaddleLikeJob of k8s/jobs validates against it, and a job with a wrong field is
    refused with the field's path (the validator can fail);
  - cluster-scoped objects are the cluster setup's alone: no job kustomization ships one;
  - the operator's RBAC has no wildcard, reads no Secret, and is bound to its account;
  - docker/Dockerfile builds the Python package into the image, with what the operator
    and a Python trainer need.

Run by ctest as part of k8s_manifests (`python3 -m pytest -q tests/k8s`).
"""

import copy
import re
import shutil
import subprocess

import pytest
import yaml
from kubernetes import client as k8s_client

import openapi_lite
import test_manifests as m
from manifests import CLUSTER, JOB_RESOURCES, REPO, TARGETS, objects

CRD_NAME = "paddlelikejobs.paddle-like.dev"
CLUSTER_SCOPED = {"PriorityClass", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace"}
CUSTOM_API_GROUPS = ("paddle-like.dev/", "cert-manager.io/")


def crd():
    return m.one(objects(CLUSTER), "CustomResourceDefinition", CRD_NAME)


def schema():
    return openapi_lite.crd_schema(crd(), "v1")


def jobs(target):
    return [o for o in objects(target) if o["kind"] == "PaddleLikeJob"]


# ---------------------------------------------------------------- rendering and typed models

@pytest.mark.parametrize("target", [CLUSTER] + JOB_RESOURCES)
def test_renders_without_duplicates(target):
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects(target)]
    assert keys and len(keys) == len(set(keys)), f"k8s/{target}: {keys}"


def test_cluster_setup_is_the_crd_the_priorityclass_and_the_operator():
    kinds = sorted(o["kind"] for o in objects(CLUSTER))
    assert kinds == sorted(["CustomResourceDefinition", "PriorityClass", "Namespace", "ServiceAccount",
                            "ClusterRole", "ClusterRoleBinding", "Deployment"])


@pytest.mark.parametrize("target", [CLUSTER] + JOB_RESOURCES)
def test_render_matches_kubectl_kustomize(target):
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed: rendered by tests/k8s/kustomize_lite.py only")
    major = m._kustomize_version()
    if major is None or major < 4:
        pytest.skip(f"kubectl's kustomize is v{major}, older than v4")
    out = subprocess.run(["kubectl", "kustomize", str(REPO / "k8s" / target)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.stdout) if o}
    assert {(o["kind"], o["metadata"]["name"]): o for o in objects(target)} == theirs


@pytest.mark.parametrize("target", [CLUSTER] + JOB_RESOURCES)
def test_built_in_objects_decode_into_typed_models(target):
    api = k8s_client.ApiClient()
    checked = 0
    for obj in objects(target):
        if obj["apiVersion"].startswith(CUSTOM_API_GROUPS):
            continue  # no typed model: the CRD's schema checks them (below)
        version = obj["apiVersion"].split("/")[-1]
        model = version[0].upper() + version[1:] + obj["kind"]
        decoded = api.deserialize(m._Response(obj), model)
        diffs = [d for d in m._differences(obj, api.sanitize_for_serialization(decoded))
                 if not _same_number(d)]
        assert not diffs, f"k8s/{target} {m.where(obj)}:\n  " + "\n  ".join(diffs)
        checked += 1
    assert checked, f"k8s/{target}: no built-in object"


def _same_number(difference):
    """A schema's minimum: 1 comes back as 1.0 (the model's field is a float): the same."""
    m_ = re.fullmatch(r".*\.(minimum|maximum): (-?\d+) came back as (-?\d+)\.0", difference)
    return bool(m_) and m_.group(2) == m_.group(3)


# ---------------------------------------------------------------- the CRD and the jobs

def test_crd_serves_one_structural_version_with_a_status_subresource():
    c = crd()
    spec = c["spec"]
    assert spec["group"] == "paddle-like.dev" and spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "PaddleLikeJob"
    assert c["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
    (version,) = spec["versions"]
    assert version["served"] and version["storage"]
    # The operator writes status through the subresource; `kubectl wait` reads its conditions.
    assert version["subresources"] == {"status": {}}
    problems = openapi_lite.check_schema(version["schema"]["openAPIV3Schema"])
    assert not problems, "\n".join(problems)
    conditions = schema()["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(conditions["items"]["properties"])
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].lstrip(".").split(".")
        # metadata is the API server's (ObjectMeta): the schema says only `type: object`.
        node = {"properties": dict(schema()["properties"],
                                   metadata={"properties": {"creationTimestamp": {}}})}
        for part in path:
            assert part in node.get("properties", {}), f"printer column {column['name']}: {column['jsonPath']}"
            node = node["properties"][part]


@pytest.mark.parametrize("target", JOB_RESOURCES)
def test_every_job_validates_against_the_crd(target):
    found = jobs(target)
    assert found, f"k8s/{target} renders no PaddleLikeJob"
    for job in found:
        problems = openapi_lite.validate(job, schema())
        assert not problems, f"k8s/{target} {m.where(job)}:\n  " + "\n  ".join(problems)
        assert "namespace" not in job["metadata"], "a job takes its namespace from kubectl apply -n"


@pytest.mark.parametrize("change, problem", [
    (lambda s: s["trainer"].update(minReplicas="2"), "spec.trainer.minReplicas: '2' is not of type integer"),
    (lambda s: s["trainer"].update(model="resnet"), "spec.trainer.model: 'resnet' is not one of"),
    (lambda s: s["pserver"].update(copies=4), "spec.pserver.copies: 4 is above 3"),
    (lambda s: s["trainer"].update(lr=0), "spec.trainer.lr: 0 is below or at 0"),
    (lambda s: s["master"].update(pases=3), "spec.master.pases: unknown field"),
    (lambda s: s.pop("image"), "spec.image: required"),
    (lambda s: s["trainer"].update(resources={"limits": {"cpu": True}}), "spec.trainer.resources.limits.cpu"),
])
def test_the_schema_refuses_a_wrong_field_and_names_it(change, problem):
    job = copy.deepcopy(jobs(JOB_RESOURCES[0])[0])
    change(job["spec"])
    problems = openapi_lite.validate(job, schema())
    assert any(p.startswith(problem) for p in problems), problems


def test_two_jobs_share_one_namespace_with_distinct_names():
    # The example puts both jobs in the namespace `kubectl apply -n` gives: what they make
    # is named after them (tests/k8s/test_operator_objects.py checks the names are disjoint).
    found = [j for t in JOB_RESOURCES for j in jobs(t)]
    names = [j["metadata"]["name"] for j in found]
    assert len(found) >= 2 and len(set(names)) == len(names)
    claims = {j["spec"]["data"].get("claimName") for j in found}
    pvcs = {o["metadata"]["name"] for t in JOB_RESOURCES for o in objects(t) if o["kind"] == "PersistentVolumeClaim"}
    assert claims <= pvcs, f"the jobs read the claims {claims}, the example makes {pvcs}"
    assert any("command" in j["spec"]["trainer"] for j in found), "no example of a job running a script of its own"


# ---------------------------------------------------------------- cluster-scoped objects, RBAC

@pytest.mark.parametrize("target", TARGETS + JOB_RESOURCES)
def test_no_job_ships_a_cluster_scoped_object(target):
    # Applying a job must not need cluster-admin, and deleting one must not remove what
    # other jobs use (the PriorityClass was once part of k8s/base).
    shipped = [m.where(o) for o in objects(target) if o["kind"] in CLUSTER_SCOPED]
    assert not shipped, f"k8s/{target} ships cluster-scoped {shipped}: they belong in k8s/cluster"


def test_the_operators_rbac_is_bounded_and_bound_to_its_account():
    objs = objects(CLUSTER)
    role = m.one(objs, "ClusterRole", "pl-operator")
    binding = m.one(objs, "ClusterRoleBinding", "pl-operator")
    sa = m.one(objs, "ServiceAccount", "pl-operator")
    dep = m.one(objs, "Deployment", "pl-operator")
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        assert not {"secrets", "configmaps", "pods/exec", "pods/log", "pods/proxy"} & set(rule["resources"]), rule
        assert not {"escalate", "bind", "impersonate", "update"} & set(rule["verbs"]), rule
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    spec = dep["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    namespace = m.one(objs, "Namespace", "paddle-like-system")["metadata"]["name"]
    assert dep["metadata"]["namespace"] == sa["metadata"]["namespace"] == namespace


def test_the_operator_runs_alone_locked_down_from_the_project_image():
    dep = m.one(objects(CLUSTER), "Deployment", "pl-operator")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}, "two would both act"
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["command"] == ["python3", "-m", "paddle_like.k8s.operator"]
    assert spec["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
    assert "/" in c["image"] and ":" in c["image"].rsplit("/", 1)[-1], c["image"]
    # Every job's NetworkPolicy admits this label to the status page the operator reads.
    assert spec.get("enableServiceLinks") is False
    assert dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "pl-operator"


# ---------------------------------------------------------------- the image

def _dockerfile():
    return (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")


def test_the_image_carries_python_and_the_package():
    text = _dockerfile()
    assert "PL_BUILD_PYTHON=OFF" not in text, "the image is built without the Python extension"
    site = re.search(r"^ARG PL_PYTHON_SITE=(\S+)", text, re.M)
    assert site, "docker/Dockerfile names no site-packages folder (ARG PL_PYTHON_SITE)"
    # Debian 12's python3 (3.11) looks in /usr/local/lib/python3.11/dist-packages.
    assert site.group(1) == "/usr/local/lib/python3.11/dist-packages"
    assert re.search(r"^COPY --from=build \S+/paddle_like/? \$\{PL_PYTHON_SITE\}/paddle_like/?\s*$", text, re.M), (
        "the runtime stage does not copy the built package into PL_PYTHON_SITE")
    for package in ("python3", "python3-numpy", "python3-kubernetes"):
        assert re.search(rf"\b{re.escape(package)}\b", text.split("AS runtime", 1)[1]), (
            f"the runtime image does not install {package}")
    assert re.search(r"python3 -c ['\"]import paddle_like", text), "the image build never imports the package"


def test_the_example_script_is_where_the_example_job_runs_it():
    text = _dockerfile()
    m_ = re.search(r"^COPY python/examples/ (\S+)\s*$", text, re.M)
    assert m_, "docker/Dockerfile does not copy python/examples into the image"
    for target in JOB_RESOURCES:
        for job in jobs(target):
            command = job["spec"]["trainer"].get("command")
            if command and command[0] == "python3" and not command[1].startswith("/job/"):
                assert command[1].startswith(m_.group(1)), f"{command[1]} is not in the image's {m_.group(1)}"
                assert (REPO / "python" / "examples" / command[1][len(m_.group(1)):].lstrip("/")).is_file()
