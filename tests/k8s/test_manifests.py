"""Offline checks of the Kubernetes manifests in k8s/ (no API server needed).

Every kustomization under k8s/ is rendered (tests/k8s/kustomize_lite.py; compared
with `kubectl kustomize` when a recent kubectl is installed), and then:
  - every file passes yamllint (which also catches duplicate keys PyYAML would merge);
  - every object decodes into its typed model of the Kubernetes Python client and
    re-serialises to the same document: an unknown or misspelled field is dropped by
    the model and shows up as a difference; a missing required field fails to decode;
  - the job's contract holds: the containers run the project's binaries with flags
    those binaries accept (parsed from master/main.cc, pserver/main.cc,
    trainer/main.cc) and PL_* variables their mains read; every $(VAR) is defined;
    Service ports reach container ports; StatefulSets name a headless Service; the
    pserver index derived in the shell equals the Pod ordinal; the pserver count
    agrees with num_pservers; volumes, claims and ConfigMap keys referenced exist.
The pservers' replicas are checked in test_pserver_replicas.py; reading the rendered
objects and what each container runs is manifests.py.

Run by ctest (tests/k8s/CMakeLists.txt) as `/usr/bin/python3 -m pytest -q tests/k8s`.
Needs the Debian packages python3-kubernetes, python3-yaml, python3-pytest, yamllint.
"""

import functools
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

try:
    from kubernetes import client as k8s_client
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(
        "tests/k8s needs the Kubernetes Python client: apt-get install python3-kubernetes "
        "(it is in the Makefile's DEB_PACKAGES; run `make deps`)") from e
try:
    from yamllint import linter as yamllint_linter
    from yamllint.config import YamlLintConfig
except ImportError as e:  # pragma: no cover
    raise ImportError("tests/k8s needs yamllint: apt-get install yamllint (Makefile DEB_PACKAGES)") from e

import kustomize_lite
from manifests import (
    REPO, K8S, TARGETS, OVERLAYS, BIN_PREFIX, SYSTEM_BINARIES, PART_OF, CLUSTER,
    objects, by_kind, one, workloads, where,
    invocation, binary_name, env_value, script_exports, resolved_args,
    flag_values, containers_of, containers_running, container_named)


YAMLLINT_CONFIG = """
extends: default
rules:
  line-length: {max: 120}
  document-start: disable
  truthy: {allowed-values: ["true", "false"], check-keys: false}
  comments: {min-spaces-from-content: 1}
  key-duplicates: enable
"""


# ---------------------------------------------------------------- the binaries' side

def _source(rel):
    return (REPO / rel).read_text(encoding="utf-8")


ETCD = "/usr/bin/etcd"
# The member flags of etcd 3.4 (Debian 12's etcd-server, what docker/Dockerfile installs),
# as `etcd --help` lists them: the contract where etcd is not installed here (the
# Makefile's DEB_PACKAGES has it; with it, its own --help is read instead).
ETCD_34_FLAGS = set("""
    name data-dir wal-dir snapshot-count heartbeat-interval election-timeout initial-election-tick-advance
    listen-peer-urls listen-client-urls max-snapshots max-wals quota-backend-bytes backend-batch-interval
    backend-batch-limit max-txn-ops max-request-bytes max-concurrent-streams grpc-keepalive-min-time
    grpc-keepalive-interval grpc-keepalive-timeout initial-advertise-peer-urls initial-cluster
    initial-cluster-state initial-cluster-token advertise-client-urls discovery discovery-fallback
    discovery-proxy discovery-srv discovery-srv-name strict-reconfig-check pre-vote auto-compaction-retention
    auto-compaction-mode enable-v2 cert-file key-file client-cert-auth client-crl-file
    client-cert-allowed-hostname trusted-ca-file auto-tls peer-cert-file peer-key-file peer-client-cert-auth
    peer-trusted-ca-file peer-cert-allowed-cn peer-cert-allowed-hostname peer-auto-tls peer-crl-file
    cipher-suites cors host-whitelist auth-token bcrypt-cost auth-token-ttl enable-pprof metrics
    listen-metrics-urls logger log-outputs log-level force-new-cluster debug
""".split())


@functools.lru_cache(maxsize=None)
def etcd_flags():
    """The flags etcd accepts: its own --help where it is installed, else ETCD_34_FLAGS."""
    if not os.access(ETCD, os.X_OK):
        return frozenset(ETCD_34_FLAGS)
    out = subprocess.run([ETCD, "--help"], capture_output=True, text=True, timeout=60)
    flags = set(re.findall(r"^\s+--([\w-]+)", out.stdout + out.stderr, re.M))
    assert len(flags) >= 20, f"parsed only {sorted(flags)} from `etcd --help`"
    return frozenset(flags)


@functools.lru_cache(maxsize=None)
def binary_contract():
    """For each binary: the flags it accepts and the PL_* variables its main reads."""
    master = _source("master/main.cc")
    pserver = _source("pserver/pserver_main.cc")  # pserver/main.cc runs it
    trainer = _source("trainer/main.cc")
    # Every binary defines its flags with ABSL_FLAG in its main, or for pl-pserver in
    # the PserverMain its main runs (pl::cli parses them).
    absl_flags = re.compile(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)\s*,")
    flags = {
        "pl-master": set(absl_flags.findall(master)),
        "pl-pserver": set(absl_flags.findall(pserver)),
        "pl-trainer": set(absl_flags.findall(trainer)),
    }
    env = {name: set(re.findall(r'"(PL_[A-Z0-9_]+)"', src))
           for name, src in (("pl-master", master), ("pl-pserver", pserver), ("pl-trainer", trainer))}
    # --logdir, --metrics_port, --metrics_port_file: defined once for every main that
    # includes telemetry_flags.h; their PL_* fallbacks apply where the main asks for
    # them (WithTelemetryEnv).
    telemetry = _source("paddle_like/metrics/telemetry_flags.cc")
    for name, src in (("pl-master", master), ("pl-pserver", pserver), ("pl-trainer", trainer)):
        if '"paddle_like/metrics/telemetry_flags.h"' in src:
            flags[name] |= set(absl_flags.findall(telemetry))
        if "WithTelemetryEnv(" in src:
            env[name] |= set(re.findall(r'"(PL_[A-Z0-9_]+)"', telemetry))
    # --tls_dir, --insecure: defined once in tls_flags.cc for every main that includes
    # it; PL_TLS_DIR applies where the main asks for it (WithTlsEnv).
    tls = _source("paddle_like/rpc/tls_flags.cc")
    for name, src in (("pl-master", master), ("pl-pserver", pserver), ("pl-trainer", trainer)):
        if '"paddle_like/rpc/tls_flags.h"' in src:
            flags[name] |= set(absl_flags.findall(tls))
        if "WithTlsEnv(" in src:
            env[name] |= set(re.findall(r'"(PL_[A-Z0-9_]+)"', tls))
    for name in flags:
        # A parser that finds nothing would make every later check vacuous.
        assert len(flags[name]) >= 5, f"parsed only {sorted(flags[name])} as the flags of {name}"
        assert env[name], f"parsed no PL_* variables from the main of {name}"
    # etcd (k8s/overlays/standby) reads no PL_* variable.
    flags["etcd"], env["etcd"] = set(etcd_flags()), set()
    return {name: {"flags": flags[name], "env": env[name]} for name in flags}


def test_source_parsing_finds_the_documented_flags():
    c = binary_contract()
    assert {"state_dir", "data", "port", "host", "num_pservers", "lease_ms"} <= c["pl-master"]["flags"]
    assert {"index", "num_pservers", "advertise_host", "checkpoint_dir", "host", "port"} <= c["pl-pserver"]["flags"]
    assert {"model", "master", "device", "threads", "test_data"} <= c["pl-trainer"]["flags"]
    assert "PL_ADVERTISE_HOST" in c["pl-pserver"]["env"] and "PL_MASTER_ADDR" in c["pl-pserver"]["env"]
    assert {"PL_MASTER_ADDR", "PL_SYNC", "PL_TRAINER_RANK", "PL_LOGDIR"} <= c["pl-trainer"]["env"]
    for name in ("pl-master", "pl-pserver", "pl-trainer"):
        assert {"logdir", "metrics_port"} <= c[name]["flags"], name
        assert {"tls_dir", "insecure"} <= c[name]["flags"] and "PL_TLS_DIR" in c[name]["env"], name


def _kustomize_version():
    out = subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        return None
    m = re.match(r"v?(\d+)", json.loads(out.stdout).get("kustomizeVersion", ""))
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("target", TARGETS)
def test_renders(target):
    objs = objects(target)
    assert objs, f"k8s/{target} renders nothing"
    keys = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys)), f"k8s/{target}: duplicate objects {keys}"


@pytest.mark.parametrize("target", TARGETS)
def test_render_matches_kubectl_kustomize(target):
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed: the manifests are rendered by tests/k8s/kustomize_lite.py only")
    major = _kustomize_version()
    if major is None or major < 4:
        pytest.skip(f"kubectl's kustomize is v{major}, older than v4 (no `replicas`/`patches`)")
    out = subprocess.run(["kubectl", "kustomize", str(K8S / target)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kubectl kustomize k8s/{target} failed:\n{out.stderr}"
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out.stdout) if o}
    ours = {(o["kind"], o["metadata"]["name"]): o for o in objects(target)}
    assert sorted(ours) == sorted(theirs)
    for key, obj in ours.items():
        assert obj == theirs[key], f"k8s/{target}: {key} differs between kustomize_lite and kubectl kustomize"


# ---------------------------------------------------------------- YAML and typed models

def test_yamllint():
    config = YamlLintConfig(YAMLLINT_CONFIG)
    problems = []
    for path in sorted(K8S.rglob("*.yaml")):
        for p in yamllint_linter.run(path.read_text(encoding="utf-8"), config, str(path)):
            problems.append(f"{path.relative_to(REPO)}:{p.line}:{p.column}: {p.level}: {p.message}")
    assert not problems, "\n".join(problems)


class _Response:
    """What ApiClient.deserialize reads: a body in `data`."""

    def __init__(self, obj):
        self.data = json.dumps(obj)


def _differences(ours, theirs, path="", out=None):
    out = [] if out is None else out
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in ours:
            where_ = f"{path}.{key}" if path else key
            if key not in theirs:
                out.append(f"{where_}: unknown field (the typed model dropped it)")
            else:
                _differences(ours[key], theirs[key], where_, out)
        for key in set(theirs) - set(ours):
            out.append(f"{path}.{key}: added by the typed model")
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _differences(a, b, f"{path}[{i}]", out)
    elif ours != theirs or type(ours) is not type(theirs):
        out.append(f"{path}: {ours!r} came back as {theirs!r}")
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_objects_decode_into_typed_models(target):
    api = k8s_client.ApiClient()
    for obj in objects(target):
        version = obj["apiVersion"].split("/")[-1]
        model = version[0].upper() + version[1:] + obj["kind"]
        assert hasattr(k8s_client, model), f"{where(obj)}: the Kubernetes client has no model {model}"
        try:
            decoded = api.deserialize(_Response(obj), model)
        except (ValueError, TypeError) as e:
            pytest.fail(f"k8s/{target} {where(obj)} does not decode into {model}: {e}")
        back = api.sanitize_for_serialization(decoded)
        diffs = _differences(obj, back)
        assert not diffs, f"k8s/{target} {where(obj)}:\n  " + "\n  ".join(diffs)


@pytest.mark.parametrize("target", TARGETS)
def test_containers_use_flags_and_env_the_binaries_read(target):
    objs = objects(target)
    contract = binary_contract()
    for o, c in containers_of(objs):
        binary, args, script = invocation(c)
        name = binary_name(binary)
        assert name in contract, f"{where(o, c)}: runs {name}, which the test knows no contract for"
        unknown = set(flag_values(args)) - contract[name]["flags"]
        assert not unknown, f"{where(o, c)}: {name} does not accept --{', --'.join(sorted(unknown))}"
        defined = [v["name"] for v in c.get("env", [])]
        assert len(defined) == len(set(defined)), f"{where(o, c)}: an env variable is defined twice"
        text = " ".join(list(c.get("command", [])) + list(c.get("args", [])))
        referenced = set(re.findall(r"\$\((\w+)\)", text))
        if script is not None:
            referenced |= set(re.findall(r"\$\{?(\w+)", script.replace("$(", "")))
        exported = script_exports(script)
        missing = referenced - set(defined) - set(exported)
        assert not missing, f"{where(o, c)}: uses undefined variables {sorted(missing)}"
        for var in exported:
            assert var not in defined, f"{where(o, c)}: {var} is both in env and exported by the script"
            assert var.startswith("PL_") and var in contract[name]["env"], (
                f"{where(o, c)}: the script exports {var}, which {name}'s main does not read")
        for var in defined:
            if var.startswith("PL_"):
                assert var in contract[name]["env"], f"{where(o, c)}: {name}'s main does not read {var}"
            else:
                assert var in referenced, f"{where(o, c)}: {var} is defined but never used"


@pytest.mark.parametrize("target", TARGETS)
def test_service_links_are_off(target):
    # A Service named pl-master would inject PL_MASTER_PORT=tcp://IP:PORT, which
    # pl-master reads as its port.
    for o in workloads(objects(target)):
        assert o["spec"]["template"]["spec"].get("enableServiceLinks") is False, where(o)


@pytest.mark.parametrize("target", TARGETS)
def test_every_container_has_cpu_and_memory_requests_and_limits(target):
    for o, c in containers_of(objects(target)):
        for kind in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                assert resource in c.get("resources", {}).get(kind, {}), f"{where(o, c)}: no {kind}.{resource}"


# ---------------------------------------------------------------- networking

def _selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _container_ports(o):
    ports = {}
    for c in o["spec"]["template"]["spec"]["containers"]:
        for p in c.get("ports", []):
            ports[p["containerPort"]] = p
            if "name" in p:
                ports[p["name"]] = p
    return ports


@pytest.mark.parametrize("target", TARGETS)
def test_services_reach_container_ports(target):
    objs = objects(target)
    for svc in by_kind(objs, "Service"):
        selected = [o for o in workloads(objs)
                    if _selects(svc["spec"].get("selector"), o["spec"]["template"]["metadata"]["labels"])]
        assert len(selected) == 1, f"{where(svc)} selects {[where(o) for o in selected]} (want exactly one)"
        ports = _container_ports(selected[0])
        for p in svc["spec"]["ports"]:
            assert p.get("targetPort", p["port"]) in ports, f"{where(svc)}: port {p} has no matching containerPort"
    for o, c in containers_of(objs):
        ports = _container_ports(o)
        # Servers only: a port that only serves /metrics (a trainer's) is nobody's dependency.
        serves = [p for p in c.get("ports", []) if p.get("name") != "metrics"]
        for probe in ("readinessProbe", "livenessProbe") if serves else ():
            assert probe in c, f"{where(o, c)}: serves but has no {probe}"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if "tcpSocket" in c.get(probe, {}):
                assert c[probe]["tcpSocket"]["port"] in ports, f"{where(o, c)}: {probe} probes an undeclared port"
        port = flag_values(resolved_args(o, c, objs)).get("port")
        if port is not None:
            assert int(port) in ports, f"{where(o, c)}: listens on --port={port}, not a declared containerPort"


@pytest.mark.parametrize("target", TARGETS)
def test_statefulsets_have_headless_governing_services(target):
    objs = objects(target)
    for sts in by_kind(objs, "StatefulSet"):
        svc = one(objs, "Service", sts["spec"]["serviceName"])
        assert svc["spec"].get("clusterIP") == "None", f"{where(svc)} must be headless (clusterIP: None)"
        assert _selects(svc["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"]), where(svc)
    for o in workloads(objs):
        assert _selects(o["spec"]["selector"]["matchLabels"], o["spec"]["template"]["metadata"]["labels"]), where(o)


def _master_endpoint(objs):
    """host:port names that reach pl-master: <pod>.<service>:port and <service>:port."""
    sts, _ = container_named(objs, "pl-master")
    svc = one(objs, "Service", sts["spec"]["serviceName"])
    names = {svc["metadata"]["name"], f"{sts['metadata']['name']}-0.{svc['metadata']['name']}"}
    return {f"{n}:{p['port']}" for n in names for p in svc["spec"]["ports"]}


def leader_endpoints(objs):
    """host:port names that reach the leading master alone, when masters stand by
    (pl-master --etcd_endpoints): <service>:port of a Service with a virtual IP that
    selects the masters, publishes no Pod that is not ready (a standby never is), and
    sends that port to the masters' gRPC port."""
    sts, c = container_named(objs, "pl-master")
    grpc = {p["containerPort"] for p in c["ports"] if p.get("name") == "grpc"} | {"grpc"}
    found = set()
    for svc in by_kind(objs, "Service"):
        spec = svc["spec"]
        if (spec.get("clusterIP") == "None" or spec.get("publishNotReadyAddresses")
                or not _selects(spec.get("selector"), sts["spec"]["template"]["metadata"]["labels"])):
            continue
        found |= {f"{svc['metadata']['name']}:{p['port']}" for p in spec["ports"]
                  if p.get("targetPort", p["port"]) in grpc}
    return found


def masters_stand_by(objs):
    """Whether the masters lead through etcd (k8s/overlays/standby), a standby beside the leader."""
    sts, c = container_named(objs, "pl-master")
    return "etcd_endpoints" in flag_values(resolved_args(sts, c, objs))


@pytest.mark.parametrize("target", TARGETS)
def test_master_address_is_the_masters_stable_name(target):
    objs = objects(target)
    sts, _ = container_named(objs, "pl-master")
    assert sts["kind"] == "StatefulSet", "the master is a StatefulSet"
    if masters_stand_by(objs):
        # Only the leader serves: pl-master-0 may be the standby.
        assert sts["spec"]["replicas"] >= 2, f"k8s/{target}: masters through etcd but no standby"
        endpoints = leader_endpoints(objs)
        assert endpoints, f"k8s/{target}: no Service of ready masters (the leader) to reach"
    else:
        assert sts["spec"]["replicas"] == 1, "the master is a StatefulSet of 1 (a standby needs etcd)"
        endpoints = _master_endpoint(objs)
    for o, c in containers_running(objs, "pl-pserver") + containers_running(objs, "pl-trainer"):
        env = {v["name"]: v.get("value") for v in c.get("env", [])}
        address = flag_values(resolved_args(o, c, objs)).get("master", env.get("PL_MASTER_ADDR"))
        assert address in endpoints, f"{where(o, c)}: master address {address!r} is none of {sorted(endpoints)}"


# ---------------------------------------------------------------- pservers

@pytest.mark.parametrize("target", TARGETS)
def test_pserver_index_is_the_pod_ordinal(target):
    objs = objects(target)
    for sts, c in containers_running(objs, "pl-pserver"):
        _check_pserver_set(target, objs, sts, c)


def _check_pserver_set(target, objs, sts, c):
    assert sts["kind"] == "StatefulSet"
    replicas = sts["spec"]["replicas"]
    env = {v["name"]: env_value(sts, c, v, objs, "x") for v in c["env"]}
    num = flag_values(resolved_args(sts, c, objs)).get("num_pservers", env.get("PL_NUM_PSERVERS"))
    assert num is not None and int(num) == replicas, (
        f"k8s/{target}: {replicas} pserver replicas but num_pservers={num}: they must agree")
    master, mc = container_named(objs, "pl-master")
    menv = {v["name"]: env_value(master, mc, v, objs, "x") for v in mc["env"]}
    master_num = flag_values(resolved_args(master, mc, objs)).get("num_pservers", menv.get("PL_NUM_PSERVERS"))
    assert master_num == num, f"master expects {master_num} pservers, the pservers say {num}"
    for ordinal in range(replicas):
        flags = flag_values(resolved_args(sts, c, objs, ordinal))
        index = flags.get("index", env.get("PL_PSERVER_INDEX"))
        assert index == str(ordinal), f"pod {sts['metadata']['name']}-{ordinal} would serve index {index!r}"
    flags = flag_values(resolved_args(sts, c, objs))
    assert flags.get("host", "0.0.0.0") == "0.0.0.0", "pservers must listen on all interfaces"
    advertise = flags.get("advertise_host", env.get("PL_ADVERTISE_HOST"))
    assert advertise and not advertise.startswith("127."), (
        f"pservers advertise {advertise!r}: trainers on other Pods cannot reach it")


@pytest.mark.parametrize("target", TARGETS)
def test_state_lives_on_per_pod_claims(target):
    objs = objects(target)
    # With etcd the master's state is in etcd (test_standby_master.py), and etcd's on the
    # members' claims.
    master = [] if masters_stand_by(objs) else [(container_named(objs, "pl-master"), "state_dir")]
    for (sts, c), flag in (master + [(sc, "checkpoint_dir") for sc in containers_running(objs, "pl-pserver")] +
                           [(ec, "data-dir") for ec in containers_running(objs, "etcd")]):
        env = {v["name"]: env_value(sts, c, v, objs, "x") for v in c["env"]}
        path = flag_values(resolved_args(sts, c, objs)).get(flag, env.get({"state_dir": "PL_STATE_DIR",
                                                                             "checkpoint_dir": "PL_CHECKPOINT_DIR",
                                                                             "data-dir": "ETCD_DATA_DIR"}[flag]))
        assert path, f"{where(sts, c)}: no --{flag}"
        claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])}
        mounts = [m for m in c["volumeMounts"] if m["name"] in claims]
        assert any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/") for m in mounts), (
            f"{where(sts, c)}: --{flag}={path} is not on a volumeClaimTemplates volume")


# ---------------------------------------------------------------- trainers

@pytest.mark.parametrize("target", TARGETS)
def test_trainers_are_elastic_and_preemptible(target):
    objs = objects(target)
    dep, c = container_named(objs, "pl-trainer")
    assert dep["kind"] == "Deployment"
    spec = dep["spec"]["template"]["spec"]
    # The PriorityClass is the cluster's (k8s/cluster), shared by every job, never a job's.
    assert not by_kind(objs, "PriorityClass"), f"k8s/{target} ships a PriorityClass: it belongs in k8s/cluster"
    pc = one(objects(CLUSTER), "PriorityClass", spec["priorityClassName"])
    assert pc["value"] < 0 and pc.get("preemptionPolicy") == "Never" and not pc.get("globalDefault", False)
    assert spec.get("terminationGracePeriodSeconds", 30) >= 30, "too short to return the task on SIGTERM"
    cmd = list(c.get("command", [])) + list(c.get("args", []))
    assert cmd[0] != "/bin/sh", "the trainer must be PID 1 to receive SIGTERM itself"
    # A scale-down first asks the trainer to leave after its task (SIGUSR1 to PID 1).
    hook = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    assert hook[:2] == ["/bin/sh", "-c"] and "kill -USR1 1" in hook[2], f"k8s/{target}: no leave hook: {hook}"
    flags = flag_values(resolved_args(dep, c, objs))
    assert flags["device"] in ("cpu", "gpu", "auto")
    assert int(flags["threads"]) >= 1
    gpus = c["resources"].get("limits", {}).get("nvidia.com/gpu")
    assert (flags["device"] == "gpu") == (gpus is not None), (
        f"k8s/{target}: --device={flags['device']} but nvidia.com/gpu limit {gpus}")


# ---------------------------------------------------------------- volumes and config

@pytest.mark.parametrize("target", TARGETS)
def test_volumes_claims_and_config_keys_exist(target):
    objs = objects(target)
    pvcs = {p["metadata"]["name"]: p for p in by_kind(objs, "PersistentVolumeClaim")}
    for o in workloads(objs):
        spec = o["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        templates = {t["metadata"]["name"] for t in o["spec"].get("volumeClaimTemplates", [])}
        mounted = set()
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes or m["name"] in templates, f"{where(o, c)}: no volume {m['name']}"
                mounted.add(m["name"])
                claim = volumes.get(m["name"], {}).get("persistentVolumeClaim")
                if claim:
                    assert claim["claimName"] in pvcs, f"{where(o)}: no PersistentVolumeClaim {claim['claimName']}"
                    if "ReadOnlyMany" in pvcs[claim["claimName"]]["spec"]["accessModes"]:
                        assert m.get("readOnly") and claim.get("readOnly"), f"{where(o, c)}: mount it read-only"
            for var in c.get("env", []):
                ref = var.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    assert ref["key"] in one(objs, "ConfigMap", ref["name"])["data"], (
                        f"{where(o, c)}: ConfigMap {ref['name']} has no key {ref['key']}")
        unused = (set(volumes) | templates) - mounted
        assert not unused, f"{where(o)}: volumes {sorted(unused)} are never mounted"


def _dataset_mount(o, c):
    volumes = {v["name"]: v for v in o["spec"]["template"]["spec"].get("volumes", [])}
    for m in c.get("volumeMounts", []):
        if "persistentVolumeClaim" in volumes.get(m["name"], {}):
            return volumes[m["name"]]["persistentVolumeClaim"]["claimName"], m["mountPath"]
    return None, None


@pytest.mark.parametrize("target", TARGETS)
def test_master_and_trainers_see_the_data_at_the_same_path(target):
    # The master hands out chunks by the file paths it read; trainers open those paths.
    objs = objects(target)
    master, mc = container_named(objs, "pl-master")
    trainer, tc = container_named(objs, "pl-trainer")
    claim, path = _dataset_mount(master, mc)
    assert claim is not None, "the master mounts no dataset volume"
    assert _dataset_mount(trainer, tc) == (claim, path), "master and trainers mount the dataset differently"
    data = flag_values(resolved_args(master, mc, objs))["data"]
    test_data = flag_values(resolved_args(trainer, tc, objs))["test_data"]
    for p in (data, test_data):
        assert p.startswith(path.rstrip("/") + "/"), f"{p} is not on the dataset volume mounted at {path}"


@pytest.mark.parametrize("target", TARGETS)
def test_objects_are_labelled_with_one_job(target):
    jobs = set()
    for o in objects(target):
        if o["kind"] == "PriorityClass":
            continue  # cluster-scoped, shared by every job
        jobs.add(o["metadata"]["labels"].get(PART_OF))
        if o["kind"] in kustomize_lite.POD_TEMPLATE_KINDS:
            jobs.add(o["spec"]["template"]["metadata"]["labels"].get(PART_OF))
    assert len(jobs) == 1 and None not in jobs, f"k8s/{target}: {PART_OF} values {jobs}"


@pytest.mark.parametrize("target", OVERLAYS)
def test_overlays_set_a_pullable_image(target):
    for o, c in containers_of(objects(target)):
        assert "/" in c["image"] and ":" in c["image"].rsplit("/", 1)[-1], (
            f"k8s/{target} {where(o, c)}: image {c['image']!r} has no registry or tag (set `images`)")


def test_dockerfile_installs_the_binaries_where_the_manifests_run_them():
    dockerfile = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^COPY --from=build \S+/bin/ " + re.escape(BIN_PREFIX) + r"\s*$", dockerfile, re.M), (
        f"docker/Dockerfile does not copy the build's bin/ to {BIN_PREFIX}")
    uid = re.search(r"^USER (\d+)", dockerfile, re.M)
    assert uid, "docker/Dockerfile sets no numeric USER"
    runtime = dockerfile[dockerfile.index("AS runtime"):]
    for target in TARGETS:
        for o in workloads(objects(target)):
            assert o["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid.group(1)), where(o)
        for o, c in containers_of(objects(target)):
            binary = invocation(c)[0]
            if binary in SYSTEM_BINARIES:  # e.g. /usr/bin/etcd: Debian's etcd-server in the runtime stage
                package = SYSTEM_BINARIES[binary][1]
                assert re.search(rf"(?<![\w-]){re.escape(package)}(?![\w-])", runtime), (
                    f"k8s/{target} {where(o, c)} runs {binary}, but docker/Dockerfile's runtime stage does not "
                    f"install {package}")
