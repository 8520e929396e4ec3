"""Offline checks of the job's NetworkPolicy in k8s/ (see test_manifests.py for the
rest): every Pod of the job is selected by an Ingress policy; its gRPC ports admit only
the job's own Pods; other sources reach at most the status page and /metrics.

Run by ctest with the rest of tests/k8s (`python3 -m pytest -q tests/k8s`).
"""
import pytest

import test_manifests as m

JOB = {m.PART_OF: "pl-job"}
OBSERVABLE_PORTS = {8080, 9090}


def _selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()) and not selector.get(
        "matchExpressions")


def _policies(objs):
    return [o for o in objs if o["kind"] == "NetworkPolicy" and "Ingress" in o["spec"].get("policyTypes", [])]


def _pod_templates(objs):
    return [o for o in objs if o["kind"] in ("StatefulSet", "Deployment", "Job")]


def _ports_of(template):
    """{container port number: its name} of a Pod template."""
    ports = {}
    for c in template["spec"]["containers"]:
        for p in c.get("ports", []):
            ports[p["containerPort"]] = p.get("name", "")
    return ports


def _admits(rule, source_labels, port, ports_by_name):
    """Whether an ingress rule lets a Pod with `source_labels` (in another namespace
    when None) reach `port`."""
    sources = rule.get("from")
    if sources:
        ok = False
        for s in sources:
            if "podSelector" in s and "namespaceSelector" not in s:
                ok |= source_labels is not None and _selects(s["podSelector"], source_labels)
            if "namespaceSelector" in s:
                ok |= source_labels is None  # a namespace of the cluster's choosing
            if "ipBlock" in s:
                ok = True
        if not ok:
            return False
    rule_ports = rule.get("ports")
    if not rule_ports:
        return True
    for p in rule_ports:
        wanted = p.get("port")
        if wanted == port or (isinstance(wanted, str) and ports_by_name.get(port) == wanted):
            return True
    return False


@pytest.mark.parametrize("target", m.TARGETS)
def test_the_jobs_grpc_ports_admit_only_the_jobs_pods(target):
    objs = m.objects(target)
    policies = _policies(objs)
    assert policies, f"k8s/{target}: no Ingress NetworkPolicy"
    checked = 0
    for workload in _pod_templates(objs):
        template = workload["spec"]["template"]
        labels = template["metadata"]["labels"]
        mine = [p for p in policies if _selects(p["spec"]["podSelector"], labels)]
        assert mine, f"k8s/{target} {m.where(workload)}: no NetworkPolicy selects its Pods"
        ports = _ports_of(template)
        for port, name in ports.items():
            rules = [r for p in mine for r in p["spec"].get("ingress", [])]
            from_job = any(_admits(r, dict(JOB, **{"app.kubernetes.io/component": "trainer"}), port, ports) for r in rules)
            from_elsewhere = any(_admits(r, None, port, ports) for r in rules)
            from_stranger_pod = any(_admits(r, {m.PART_OF: "other-job"}, port, ports) for r in rules)
            assert from_job, f"k8s/{target} {m.where(workload)}: the job's own Pods cannot reach port {port}"
            assert not from_stranger_pod, f"k8s/{target} {m.where(workload)}: another job's Pod reaches port {port}"
            if name == "grpc":
                assert not from_elsewhere, f"k8s/{target} {m.where(workload)}: gRPC port {port} is open outside the job"
            else:
                assert port in OBSERVABLE_PORTS or not from_elsewhere, (
                    f"k8s/{target} {m.where(workload)}: port {port} ({name}) is open outside the job")
            checked += 1
    assert checked >= 5, f"k8s/{target}: only {checked} ports checked"


@pytest.mark.parametrize("target", m.TARGETS)
def test_every_process_talks_mutual_tls_with_the_jobs_secret(target):
    """PL_TLS_DIR in every container names where the job's Secret (tls.crt, tls.key,
    ca.crt) is mounted read-only; not optional, so a Pod never starts without it."""
    objs = m.objects(target)
    seen = 0
    for o, c in m.containers_of(objs):
        env = {v["name"]: v.get("value") for v in c.get("env", [])}
        assert "PL_TLS_DIR" in env, f"k8s/{target} {m.where(o, c)}: no PL_TLS_DIR (it would run insecure)"
        volumes = {v["name"]: v for v in o["spec"]["template"]["spec"].get("volumes", [])}
        mounts = [mt for mt in c.get("volumeMounts", []) if mt["mountPath"] == env["PL_TLS_DIR"]]
        assert mounts, f"k8s/{target} {m.where(o, c)}: nothing is mounted at {env['PL_TLS_DIR']}"
        assert mounts[0].get("readOnly"), f"k8s/{target} {m.where(o, c)}: mount the certificates read-only"
        secret = volumes.get(mounts[0]["name"], {}).get("secret")
        assert secret and secret["secretName"] == "pl-job-tls" and not secret.get("optional"), (
            f"k8s/{target} {m.where(o, c)}: {env['PL_TLS_DIR']} is not the job's Secret pl-job-tls")
        assert secret.get("defaultMode", 0o644) & 0o007 == 0, f"k8s/{target} {m.where(o, c)}: the key is world-readable"
        seen += 1
    assert seen >= 4, f"k8s/{target}: only {seen} containers"
