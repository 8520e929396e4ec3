"""What the operator makes of a PaddleLikeJob (python/paddle_like/k8s/job_objects.py and
job_tls.py), checked offline like the manifests of k8s/base:

  - the objects of the example MLP job (k8s/jobs/example/mlp.yaml) pass the checks
    test_manifests.py, test_network_policy.py, test_pserver_replicas.py and
    test_autoscaler_manifests.py run on every job overlay: typed models, the flags and
    PL_* variables the binaries read, ports, probes, the master's address, pserver
    indexes, claims, mutual TLS per role, replicas kept off each other's nodes, the
    autoscaler's bounds;
  - a job running a script of its own (own-loop.yaml) gets the environment
    pl.distributed.init() reads, and its command as PID 1;
  - two jobs in one namespace share no name, and each one's NetworkPolicy keeps the
    other's Pods out;
  - the PodDisruptionBudget covers the master and the pservers, not the trainers;
  - cert-manager issues exactly the Secrets the Pods mount, from a CA of the job's own.

Needs the built package (paddle_like imports its extension): ctest k8s_operator.
"""

import copy
import importlib.util
import re
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("paddle_like") is None:  # run by hand: the build tree's package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "build" / "python"))

from paddle_like.elastic import kube_capacity
from paddle_like.k8s import job_objects, job_spec, job_tls

import manifests
import test_autoscaler_manifests
import test_manifests
import test_network_policy
import test_pserver_replicas

EXAMPLE = "jobs/example"
NAMESPACE = "team-a"


def example_job(name):
    (job,) = [o for o in manifests.objects(EXAMPLE) if o["kind"] == "PaddleLikeJob" and o["metadata"]["name"] == name]
    job["metadata"].update(namespace=NAMESPACE, uid=f"uid-{name}", generation=1)  # what the API server adds
    return job


def spec_of(name):
    return job_spec.parse(example_job(name))


MLP = "fashion-mnist-mlp"
OWN = "fashion-mnist-own-loop"


def built_in(objs):
    return [o for o in objs if not o["apiVersion"].startswith("cert-manager.io/")]


# ---------------------------------------------------------------- the manifest checks, on the operator's objects

SHARED_CHECKS = [
    test_manifests.test_objects_decode_into_typed_models,
    test_manifests.test_containers_use_flags_and_env_the_binaries_read,
    test_manifests.test_service_links_are_off,
    test_manifests.test_every_container_has_cpu_and_memory_requests_and_limits,
    test_manifests.test_services_reach_container_ports,
    test_manifests.test_statefulsets_have_headless_governing_services,
    test_manifests.test_master_address_is_the_masters_stable_name,
    test_manifests.test_pserver_index_is_the_pod_ordinal,
    test_manifests.test_state_lives_on_per_pod_claims,
    test_manifests.test_trainers_are_elastic_and_preemptible,
    test_manifests.test_volumes_claims_and_config_keys_exist,
    test_manifests.test_master_and_trainers_see_the_data_at_the_same_path,
    test_manifests.test_overlays_set_a_pullable_image,
    test_network_policy.test_the_jobs_grpc_ports_admit_only_the_jobs_pods,
    test_network_policy.test_every_process_talks_mutual_tls_with_its_roles_certificate,
    test_network_policy.test_pserver_sets_mount_one_certificate_per_shard,
    test_pserver_replicas.test_every_shard_has_replicas_that_never_share_a_node,
    test_autoscaler_manifests.test_job_trainers_are_elastic_within_their_bounds,
]


@pytest.fixture
def as_target(monkeypatch):
    """Makes the manifest checks read the given objects as their target's."""
    def use(spec, objs):
        def fake_objects(target):
            return copy.deepcopy(objs) if target == "operator" else original(target)
        original = manifests.objects
        monkeypatch.setattr(manifests, "objects", fake_objects)
        monkeypatch.setattr(test_manifests, "objects", fake_objects)
        # The job's own Pods carry its name; its Secrets are named after it.
        monkeypatch.setattr(test_network_policy, "JOB", spec.labels())
        monkeypatch.setattr(test_network_policy, "TLS_SECRETS", f"{spec.name}-tls-")
        return "operator"
    return use


@pytest.mark.parametrize("check", SHARED_CHECKS, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_the_example_jobs_objects_pass_the_manifest_checks(check, as_target):
    spec = spec_of(MLP)
    claim = [o for o in manifests.objects(EXAMPLE) if o["kind"] == "PersistentVolumeClaim"]
    check(as_target(spec, built_in(job_objects.render(spec)) + claim))


def test_the_checks_can_fail_on_the_operators_objects(as_target):
    spec = spec_of(MLP)
    objs = built_in(job_objects.render(spec))
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    dep["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = "elsewhere:7000"  # PL_MASTER_ADDR
    with pytest.raises(AssertionError, match="master address 'elsewhere:7000'"):
        test_manifests.test_master_address_is_the_masters_stable_name(as_target(spec, objs))


# ---------------------------------------------------------------- a trainer of your own

def test_a_script_trainer_gets_what_pl_distributed_init_reads():
    spec = spec_of(OWN)
    objs = job_objects.render(spec)
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    # PID 1 is the script's interpreter: SIGTERM reaches it (own_loop.py gives its task back).
    assert c["command"] == ["python3", "/usr/local/share/paddle-like/examples/own_loop.py"]
    assert c["args"] == ["--idx_dir=/data/fashion-mnist-idx", "--batch_size=64"]
    env = {v["name"]: v for v in c["env"]}
    source = (manifests.REPO / "python/paddle_like/distributed/environment.py").read_text()
    reads = set(re.findall(r'"(PL_[A-Z_]+)"', source))
    assert {"PL_MASTER_ADDR", "PL_TRAINER_RANK", "PL_SYNC", "PL_TLS_DIR"} <= reads
    assert {n for n in env if n.startswith("PL_")} == {"PL_MASTER_ADDR", "PL_TRAINER_RANK", "PL_SYNC", "PL_TLS_DIR"}
    assert env["PL_MASTER_ADDR"]["value"] == f"{OWN}-master-0.{OWN}-master:7000"
    assert env["PL_TRAINER_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["OMP_NUM_THREADS"]["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu"
    mounts = {mt["mountPath"]: mt for mt in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[env["PL_TLS_DIR"]["value"]]["name"]]["secret"]["secretName"] == f"{OWN}-tls-trainer"
    assert volumes[mounts["/data"]["name"]]["persistentVolumeClaim"] == {"claimName": "fashion-mnist", "readOnly": True}
    # The master cuts sample indices: it reads no data, so mounts none.
    (master,) = [o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == f"{OWN}-master"]
    mc = master["spec"]["template"]["spec"]["containers"][0]
    assert "--data=indices:60000" in mc["args"]
    assert "/data" not in {mt["mountPath"] for mt in mc["volumeMounts"]}


def test_a_script_from_a_configmap_is_mounted_at_job():
    job = example_job(OWN)
    job["spec"]["trainer"].update(command=["python3", "/job/train.py"], scriptConfigMap="my-train")
    (dep,) = [o for o in job_objects.render(job_spec.parse(job)) if o["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (mount,) = [mt for mt in pod["containers"][0]["volumeMounts"] if mt["mountPath"] == "/job"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == "my-train" and mount["readOnly"]


# ---------------------------------------------------------------- many jobs in one namespace

@pytest.mark.parametrize("a, b", [(MLP, OWN), ("x", "x-pserver"), ("x", "x-master"), ("x", "x-tls"),
                                  ("a-trainer", "a"), ("x-pserver-r1", "x")])
def test_two_jobs_in_one_namespace_share_no_name(a, b):
    specs = []
    for name in (a, b):
        job = example_job(MLP)
        job["metadata"]["name"] = name
        job["spec"]["pserver"]["copies"] = 3
        specs.append(job_spec.parse(job))
    first, second = (job_objects.names(s) for s in specs)
    assert not first & second, f"{a} and {b} both make {sorted(first & second)}"
    for spec in specs:
        for o in job_objects.render(spec):
            assert o["metadata"]["labels"][job_spec.JOB_LABEL] == spec.name
            assert o["metadata"]["ownerReferences"] == [spec.owner_reference]
            assert o["metadata"]["namespace"] == NAMESPACE


def test_one_jobs_pods_cannot_reach_anothers_in_the_same_namespace():
    mlp, own = spec_of(MLP), spec_of(OWN)
    policy = [o for o in job_objects.render(mlp) if o["kind"] == "NetworkPolicy"]
    trainer_of_own = own.labels("trainer")
    trainer_of_mlp = mlp.labels("trainer")
    for port in (job_objects.MASTER_PORT, job_objects.PSERVER_PORT, job_objects.HTTP_PORT):
        rules = [r for p in policy for r in p["spec"]["ingress"]]
        assert any(test_network_policy._admits(r, trainer_of_mlp, port, {}) for r in rules), port
        assert not any(test_network_policy._admits(r, trainer_of_own, port, {}) for r in rules), (
            f"a Pod of {OWN} reaches port {port} of {MLP}")
    # The operator (another namespace) reads the status page, and only that.
    operator_rule = [r for r in policy[0]["spec"]["ingress"]
                     if any("kubernetes.io/metadata.name" in (s.get("namespaceSelector") or {}).get("matchLabels", {})
                            for s in r.get("from", []))]
    assert operator_rule and [p["port"] for r in operator_rule for p in r["ports"]] == [job_objects.HTTP_PORT]
    (source,) = operator_rule[0]["from"]
    assert source["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "paddle-like-system"}
    cluster_deployment = manifests.one(manifests.objects(manifests.CLUSTER), "Deployment", "pl-operator")
    operator_labels = cluster_deployment["spec"]["template"]["metadata"]["labels"]
    assert test_network_policy._selects(source["podSelector"], operator_labels)


def test_the_disruption_budget_covers_the_master_and_pservers_only():
    spec = spec_of(MLP)
    objs = job_objects.render(spec)
    (pdb,) = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1
    covered = set()
    for o in objs:
        if o["kind"] in ("StatefulSet", "Deployment"):
            labels = o["spec"]["template"]["metadata"]["labels"]
            if kube_capacity.selects(pdb["spec"]["selector"], labels):
                covered.add(labels["app.kubernetes.io/component"])
    assert covered == {"master", "pserver"}
    other = spec_of(OWN).labels("pserver")
    assert not kube_capacity.selects(pdb["spec"]["selector"], other), "it counts another job's pservers"


# ---------------------------------------------------------------- certificates

def test_cert_manager_issues_the_secrets_the_pods_mount_from_the_jobs_own_ca():
    spec = spec_of(MLP)
    objs = job_objects.render(spec)
    issuers = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Issuer"}
    certs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Certificate"}
    ca = certs[f"{MLP}-ca"]["spec"]
    assert ca["isCA"] and "selfSigned" in issuers[ca["issuerRef"]["name"]]["spec"]
    assert issuers[f"{MLP}-ca"]["spec"] == {"ca": {"secretName": ca["secretName"]}}
    issued = {c["spec"]["secretName"]: c["spec"] for name, c in certs.items() if name != f"{MLP}-ca"}
    assert sorted(c["commonName"] for c in issued.values()) == sorted(job_tls.roles(spec))
    for c in issued.values():
        assert c["issuerRef"] == {"name": f"{MLP}-ca", "kind": "Issuer"} and c["dnsNames"] == [job_tls.DNS_NAME]
        assert {"server auth", "client auth"} <= set(c["usages"])
    mounted = set()
    for o in objs:
        if o["kind"] in ("StatefulSet", "Deployment"):
            for v in o["spec"]["template"]["spec"]["volumes"]:
                if "secret" in v:
                    mounted.add(v["secret"]["secretName"])
                for s in (v.get("projected") or {}).get("sources", []):
                    mounted.add(s["secret"]["name"])
    assert mounted == set(issued) - {f"{MLP}-tls-launch"}, "a mounted Secret nobody issues, or the reverse"
    # The `launch` certificate is for an operator's tools (pl-status): no Pod mounts it.


def test_provided_certificates_make_no_cert_manager_objects():
    job = example_job(MLP)
    job["spec"]["tls"] = {"certificates": "Provided"}
    assert not [o for o in job_objects.render(job_spec.parse(job)) if o["apiVersion"].startswith("cert-manager")]


# ---------------------------------------------------------------- the trainers, for the autoscaler

@pytest.mark.parametrize("elastic", [True, False])
def test_the_autoscaler_reads_the_jobs_bounds_from_its_trainers(elastic):
    job = example_job(MLP)
    job["spec"]["trainer"].update(minReplicas=2, maxReplicas=12, priority=7, replicas=3, elastic=elastic)
    (dep,) = [o for o in job_objects.render(job_spec.parse(job)) if o["kind"] == "Deployment"]
    read, why = kube_capacity.read_job(dep)
    assert why is None and (read.min_trainers, read.max_trainers, read.priority, read.replicas) == (2, 12, 7, 3)
    assert (dep["metadata"]["labels"].get(kube_capacity.ELASTIC_LABEL) == "true") == elastic


def test_gpu_trainers_are_tolerated_on_gpu_nodes():
    job = example_job(MLP)
    job["spec"]["trainer"].update(device="gpu", resources={
        "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 1},
        "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1}})
    (dep,) = [o for o in job_objects.render(job_spec.parse(job)) if o["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert "--device=gpu" in pod["containers"][0]["args"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
