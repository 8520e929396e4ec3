"""Offline checks of the job's NetworkPolicy in k8s/ (see test_manifests.py for the
rest): every Pod of the job is selected by an Ingress policy; its gRPC ports admit only
the job's own Pods; other sources reach at most the status page and /metrics. Behind
it, every process talks mutual TLS with its own role's certificate. etcd's members
(k8s/overlays/standby) admit only the masters and each other: test_standby_master.py.

Run by ctest with the rest of tests/k8s (`python3 -m pytest -q tests/k8s`).
"""
import posixpath

import pytest

import manifests as m

JOB = {m.PART_OF: "pl-job"}
OBSERVABLE_PORTS = {8080, 9090}


ETCD_COMPONENT = "etcd"  # app.kubernetes.io/component of etcd's members (k8s/overlays/standby)


def _matches(expression, labels):
    key, op, values = expression["key"], expression["operator"], expression.get("values", [])
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"label selector operator {op!r}")


def _selects(selector, labels):
    """Whether a LabelSelector (matchLabels and matchExpressions, both ANDed) selects
    these labels."""
    return (all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
            and all(_matches(e, labels) for e in selector.get("matchExpressions", [])))


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
        if labels.get("app.kubernetes.io/component") == ETCD_COMPONENT:
            continue  # only the masters and its members reach it: test_standby_master.py
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


# ---------------------------------------------------------------- mutual TLS, per role

TLS_FILES = ("tls.crt", "tls.key", "ca.crt")  # cert-manager's layout of a Certificate's Secret
TLS_SECRETS = "pl-job-tls-"  # + the role: the certificate's common name (k8s/README.md)
ROLE_OF_BINARY = {"pl-master": "master", "pl-trainer": "trainer", "pl-pserver": "pserver"}  # other tools: launch


def _pod_containers(workload):
    spec = workload["spec"]["template"]["spec"]
    return [c for key in ("initContainers", "containers") for c in spec.get(key, [])]


def _ordinals(workload):
    """The Pod ordinals to check: every one of a StatefulSet's, one Pod of anything else."""
    return range(workload["spec"]["replicas"]) if workload["kind"] == "StatefulSet" else range(1)


def _secret_files(volume):
    """{path in the volume: (Secret, key, mode, optional)} of a secret or projected volume."""
    if "secret" in volume:
        sources, default = [dict(volume["secret"], name=volume["secret"]["secretName"])], volume["secret"]
    elif "projected" in volume:
        sources = [s["secret"] for s in volume["projected"].get("sources", []) if "secret" in s]
        default = volume["projected"]
    else:
        return {}
    files = {}
    for s in sources:
        items = s.get("items") or [{"key": k, "path": k} for k in TLS_FILES]
        for item in items:
            mode = item.get("mode", default.get("defaultMode", 0o644))
            files[item["path"]] = (s["name"], item["key"], mode, bool(s.get("optional")))
    return files


def _mounted_secret_files(workload, container):
    """{absolute path: (Secret, key, mode, optional, its volumeMount)} a container sees."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
    files = {}
    for mt in container.get("volumeMounts", []):
        for path, info in _secret_files(volumes.get(mt["name"], {})).items():
            files[posixpath.join(mt["mountPath"], path)] = info + (mt,)
    return files


def _identity(objs, workload, container, ordinal):
    """The certificate's common name this process must present in the Pod with `ordinal`."""
    role = ROLE_OF_BINARY.get(m.binary_name(m.invocation(container)[0]), "launch")
    if role != "pserver":
        return role
    args, env = m.resolved_process(workload, container, objs, ordinal)
    return "pserver-" + m.flag_values(args).get("index", env.get("PL_PSERVER_INDEX", "?"))


@pytest.mark.parametrize("target", m.TARGETS)
def test_every_process_talks_mutual_tls_with_its_roles_certificate(target):
    """PL_TLS_DIR, as each Pod's process sees it, holds tls.crt, tls.key and ca.crt of
    the Secret pl-job-tls-<role> (master, trainer, pserver-<its index>), mounted
    read-only, not optional, readable by the Pod's fsGroup and no one else; and no
    container mounts the certificate of a role it does not have."""
    objs = m.objects(target)
    seen = 0
    for o in _pod_templates(objs):
        pod = o["spec"]["template"]["spec"]
        for c in _pod_containers(o):
            at = f"k8s/{target} {m.where(o, c)}"
            files = _mounted_secret_files(o, c)
            mine = {info[0] for info in files.values() if info[0].startswith(TLS_SECRETS) or info[0] == "pl-job-tls"}
            if m.binary_name(m.invocation(c)[0]) == "etcd":
                # Plaintext, as the masters' etcd client speaks it; its NetworkPolicy admits
                # the masters alone (test_standby_master.py). It holds no role's key.
                assert not mine, f"{at} mounts the certificates {sorted(mine)}"
                continue
            identities = set()
            for ordinal in _ordinals(o):
                identity = _identity(objs, o, c, ordinal)
                identities.add(identity)
                env = m.resolved_process(o, c, objs, ordinal)[1]
                assert env.get("PL_TLS_DIR"), f"{at} (Pod {ordinal}): no PL_TLS_DIR (it would run insecure)"
                for name in TLS_FILES:
                    path = posixpath.join(env["PL_TLS_DIR"], name)
                    assert path in files, f"{at} (Pod {ordinal}): no Secret puts {name} at {path}"
                    secret, key, _, _, mount = files[path]
                    assert (secret, key) == (TLS_SECRETS + identity, name), (
                        f"{at} (Pod {ordinal}) is {identity} but its {path} is {key} of Secret {secret}")
                    assert mount.get("readOnly"), f"{at}: mount the certificates read-only"
                    assert not mount.get("subPath"), f"{at}: a subPath mount never sees a renewed certificate"
            # Only its own: a pserver's Pods hold every shard's (one template for all
            # ordinals), nobody else's.
            wanted = {TLS_SECRETS + i for i in identities}
            assert mine == wanted, f"{at} mounts the certificates {sorted(mine)}, should be {sorted(wanted)}"
            for path, (secret, _, mode, optional, _) in files.items():
                assert not optional, f"{at}: Secret {secret} is optional (the Pod would start without it)"
                assert mode & 0o007 == 0, f"{at}: {path} is world-readable (mode {mode:o})"
                assert mode & 0o040 and pod.get("securityContext", {}).get("fsGroup") is not None, (
                    f"{at}: uid {pod['securityContext'].get('runAsUser')} cannot read {path} (mode {mode:o}): "
                    "the files are root's and the Pod's fsGroup's")
            seen += 1
    assert seen >= 4, f"k8s/{target}: only {seen} containers"


@pytest.mark.parametrize("target", m.TARGETS)
def test_pserver_sets_mount_one_certificate_per_shard(target):
    """A pserver StatefulSet of P Pods projects exactly pl-job-tls-pserver-0 .. P-1, each
    into its own folder pserver-<i>/ (so an overlay that changes P lists them again)."""
    objs = m.objects(target)
    sets = m.containers_running(objs, "pl-pserver")
    assert sets, f"k8s/{target}: no pservers"
    for o, c in sets:
        shards = o["spec"]["replicas"]
        volumes = {v["name"]: v for v in o["spec"]["template"]["spec"].get("volumes", [])}
        projected = [volumes[mt["name"]]["projected"] for mt in c.get("volumeMounts", [])
                     if "projected" in volumes.get(mt["name"], {})]
        assert len(projected) == 1, f"k8s/{target} {m.where(o, c)}: {len(projected)} projected volumes (want 1)"
        sources = projected[0]["sources"]
        names = [s.get("secret", {}).get("name") for s in sources]
        assert names == [f"{TLS_SECRETS}pserver-{i}" for i in range(shards)], (
            f"k8s/{target} {m.where(o)}: {shards} Pods but the certificates {names}")
        for i, s in enumerate(sources):
            items = sorted((item["key"], item["path"]) for item in s["secret"].get("items", []))
            assert items == sorted((k, f"pserver-{i}/{k}") for k in TLS_FILES), (
                f"k8s/{target} {m.where(o)}: {names[i]} is projected as {items}")
