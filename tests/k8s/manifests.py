"""The rendered Kubernetes manifests of k8s/ as the offline checks read them: every
kustomization's objects (rendered by kustomize_lite.py), lookups among them, and what
process each container runs: its binary, and its flags and environment as the binary
sees them in a given Pod ($(VAR) expanded, the shell script run). Shared by
test_manifests.py, test_network_policy.py and test_pserver_replicas.py.
"""

import functools
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import kustomize_lite

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
# k8s/autoscaler is not a job but the cluster's elastic-trainer autoscaler: its checks
# are in test_autoscaler_manifests.py (offline) and test_kube_driver.py (with the driver).
AUTOSCALER = "autoscaler"
# k8s/cluster prepares a cluster (the PaddleLikeJob CRD, the PriorityClass, the operator)
# and k8s/jobs/* are PaddleLikeJobs the operator turns into Pods: their checks are in
# test_job_resources.py (offline) and test_operator*.py (with the operator).
CLUSTER = "cluster"
JOBS = "jobs"
# The jobs written out as built-in objects (k8s/base and its overlays): the checks of
# test_manifests.py and its siblings run on each.
TARGETS = sorted(str(p.parent.relative_to(K8S)) for p in K8S.rglob("kustomization.yaml")
                 if p.parent.relative_to(K8S).parts[0] not in (AUTOSCALER, CLUSTER, JOBS))
JOB_RESOURCES = sorted(str(p.parent.relative_to(K8S)) for p in (K8S / JOBS).rglob("kustomization.yaml"))
OVERLAYS = [t for t in TARGETS if t != "base"]
BIN_PREFIX = "/usr/local/bin/"  # where docker/Dockerfile installs build/bin/*
# Binaries of the image that come from a Debian package docker/Dockerfile installs, not
# from the build: path -> (name, package). etcd: the masters' store in k8s/overlays/standby.
SYSTEM_BINARIES = {"/usr/bin/etcd": ("etcd", "etcd-server")}
PART_OF = "app.kubernetes.io/part-of"


# ---------------------------------------------------------------- rendering

@functools.lru_cache(maxsize=None)
def rendered(target):
    return tuple(kustomize_lite.render(K8S / target))


def objects(target):
    return [json.loads(json.dumps(o)) for o in rendered(target)]  # a fresh copy per use


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def one(objs, kind, name):
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def workloads(objs):
    return [o for o in objs if o["kind"] in kustomize_lite.POD_TEMPLATE_KINDS]


def where(o, container=None):
    return f"{o['kind']}/{o['metadata']['name']}" + (f" container {container['name']}" if container else "")


# ---------------------------------------------------------------- container invocations

def invocation(container):
    """(binary, ["--flag=value", ...], shell script or None) that a container runs. A
    script is `export NAME=value;` statements (none or more), then `exec BINARY FLAGS`."""
    argv = list(container.get("command", [])) + list(container.get("args", []))
    assert argv, f"container {container['name']}: no command (the image has no entrypoint)"
    if argv[:2] == ["/bin/sh", "-c"]:
        assert len(argv) == 3, f"container {container['name']}: sh -c takes one script"
        words = shlex.split(argv[2])
        while words and words[0] == "export":
            assert len(words) > 1 and re.fullmatch(r"[A-Z_][A-Z0-9_]*=[^;]*;", words[1]), (
                f"container {container['name']}: write `export NAME=value;` in {argv[2]!r}")
            words = words[2:]
        # exec: the binary replaces the shell, so SIGTERM reaches it (PID 1).
        assert words[0] == "exec", f"container {container['name']}: the script must exec the binary: {argv[2]!r}"
        return words[1], words[2:], argv[2]
    return argv[0], argv[1:], None


def binary_name(binary):
    if binary in SYSTEM_BINARIES:
        return SYSTEM_BINARIES[binary][0]
    assert binary.startswith(BIN_PREFIX), f"{binary}: not one of the image's binaries in {BIN_PREFIX}"
    return binary[len(BIN_PREFIX):]


def env_value(obj, container, var, objs, pod_name):
    """The value Kubernetes gives `var` in this container (fake IP for status.podIP)."""
    if "value" in var:
        return var["value"]
    source = var["valueFrom"]
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        data = one(objs, "ConfigMap", ref["name"])["data"]
        assert ref["key"] in data, f"{where(obj, container)}: ConfigMap {ref['name']} has no key {ref['key']}"
        return data[ref["key"]]
    if "fieldRef" in source:
        return {"metadata.name": pod_name, "status.podIP": "10.1.2.3",
                "metadata.namespace": "default"}[source["fieldRef"]["fieldPath"]]
    if "resourceFieldRef" in source:
        ref = source["resourceFieldRef"]
        kind, resource = ref["resource"].split(".")
        quantity = str(container["resources"][kind][resource])
        assert ref.get("divisor", "1") == "1" and re.fullmatch(r"\d+m?", quantity), (ref, quantity)
        return str(-(-int(quantity[:-1]) // 1000)) if quantity.endswith("m") else quantity
    raise AssertionError(f"{where(obj, container)}: unsupported env source {source}")


def script_exports(script):
    """The variables a container's script exports before it execs the binary."""
    return re.findall(r"\bexport\s+([A-Z_][A-Z0-9_]*)=", script or "")


# Stands in for the binary in a container's script: prints its arguments and environment.
_SHOW_PROCESS = (f"exec {sys.executable} -c "
                 "'import json, os, sys; print(json.dumps([sys.argv[1:], dict(os.environ)]))'")


@functools.lru_cache(maxsize=None)
def _run_script(script, env_items):
    out = subprocess.run(["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin", **dict(env_items)},
                         capture_output=True, text=True, timeout=30)
    return out.returncode, out.stdout, out.stderr


def resolved_process(obj, container, objs, ordinal=0):
    """(flags, environment) as the binary sees them in the Pod with this ordinal: $(VAR)
    expanded by Kubernetes, then the shell script (if any) run by /bin/sh with the same
    env, so that what it exports counts too."""
    pod_name = f"{obj['metadata']['name']}-{ordinal}"
    env = {v["name"]: env_value(obj, container, v, objs, pod_name) for v in container.get("env", [])}

    def k8s_expand(text):
        return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), text)

    binary, args, script = invocation(container)
    if script is None:
        return [k8s_expand(a) for a in args], env
    script = k8s_expand(script).replace(f"exec {binary}", _SHOW_PROCESS, 1)
    rc, stdout, stderr = _run_script(script, tuple(sorted(env.items())))
    assert rc == 0, f"{where(obj, container)}: its script fails under /bin/sh: {stderr}"
    args, seen = json.loads(stdout)
    for name in ("PATH", "PWD", "SHLVL", "_"):  # the shell's, not the Pod's
        if name not in env:
            seen.pop(name, None)
    return args, seen


def resolved_args(obj, container, objs, ordinal=0):
    """The flags as the binary sees them in the Pod with this ordinal (resolved_process)."""
    return resolved_process(obj, container, objs, ordinal)[0]


def flag_values(args):
    values = {}
    for arg in args:
        m = re.fullmatch(r"--(\w[\w-]*)=(.*)", arg, re.S)  # etcd's flags have dashes
        assert m, f"argument {arg!r}: write flags as --name=value"
        assert m.group(1) not in values, f"flag --{m.group(1)} given twice"
        values[m.group(1)] = m.group(2)
    return values


def containers_of(objs):
    for o in workloads(objs):
        for c in o["spec"]["template"]["spec"].get("containers", []):
            yield o, c


def containers_running(objs, binary):
    return [(o, c) for o, c in containers_of(objs) if binary_name(invocation(c)[0]) == binary]


def container_named(objs, binary):
    found = containers_running(objs, binary)
    assert len(found) == 1, f"{len(found)} containers run {binary}"
    return found[0]
