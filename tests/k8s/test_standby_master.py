"""Offline checks of the standby masters of k8s/overlays/standby (k8s/README.md, section 8):
two pl-master Pods campaign for the job's leadership on an etcd lease, keep the job's
state in etcd, and only the leader listens on its gRPC port.

  - the overlay renders (and, with every other kustomization, passes the generic checks
    of test_manifests.py and test_network_policy.py: typed models, flags, ports, TLS);
  - etcd: a StatefulSet of 3 members under a headless Service that publishes members
    before they are ready, started together, each --name its Pod's name, an
    --initial-cluster naming all three at their peer URLs, its data on its own claim;
    an etcd leader election fits in the masters' lease;
  - the masters: 2 replicas, neither waiting for the other to be ready, no claim, every
    one started with --etcd_endpoints naming every member of the etcd Service, a fixed
    --port, a valid --etcd_prefix; ready = its gRPC port open (leading), and no probe that
    would restart a standby for not listening;
  - the pservers and trainers reach the masters through a Service with a virtual IP that
    publishes no Pod that is not ready (the leader alone);
  - NetworkPolicy: the masters reach etcd on 2379, members each other on 2380, and
    nothing else of the job (or outside it) reaches etcd;
  - the image runs etcd: docker/Dockerfile installs Debian's etcd-server.

Run by ctest with the rest of tests/k8s (`python3 -m pytest -q tests/k8s`).
"""
import re

import pytest

import manifests as m
import test_manifests as tm
import test_network_policy as netpol

STANDBY = "overlays/standby"
ETCD_MEMBERS = 3
COMPONENT = "app.kubernetes.io/component"


def _objs():
    return m.objects(STANDBY)


def _etcd(objs):
    sts, c = m.container_named(objs, "etcd")
    assert sts["kind"] == "StatefulSet", m.where(sts)
    return sts, c, m.one(objs, "Service", sts["spec"]["serviceName"])


def _master(objs):
    sts, c = m.container_named(objs, "pl-master")
    assert sts["kind"] == "StatefulSet", m.where(sts)
    return sts, c


def _port(container, name):
    found = [p["containerPort"] for p in container["ports"] if p.get("name") == name]
    assert len(found) == 1, f"container {container['name']}: {len(found)} ports named {name}"
    return found[0]


def _service_port(svc, target):
    """The Service's port that sends to the container port named `target`."""
    found = [p["port"] for p in svc["spec"]["ports"] if p.get("targetPort") == target]
    assert len(found) == 1, f"{m.where(svc)}: {len(found)} ports to {target}"
    return found[0]


def _member_names(sts):
    return [f"{sts['metadata']['name']}-{i}" for i in range(sts["spec"]["replicas"])]


# ---------------------------------------------------------------- the overlay

def test_the_overlay_is_one_of_the_checked_targets():
    # Every generic check (typed models, yamllint, kubectl kustomize, flags and env of
    # each binary, ports, claims, TLS, NetworkPolicy) runs on each of m.TARGETS.
    assert STANDBY in m.TARGETS and STANDBY in m.OVERLAYS


def test_the_overlay_renders_the_example_job_with_etcd_and_a_leader_service():
    objs = _objs()
    keys = {(o["kind"], o["metadata"]["name"]) for o in objs}
    example = {(o["kind"], o["metadata"]["name"]) for o in m.objects("overlays/example")}
    assert example <= keys, f"missing objects of the example job: {sorted(example - keys)}"
    added = keys - example
    assert added == {("Service", "pl-etcd"), ("StatefulSet", "pl-etcd"), ("PodDisruptionBudget", "pl-etcd"),
                     ("NetworkPolicy", "pl-etcd-ingress"), ("Service", "pl-master-leader")}, sorted(added)


def test_the_overlay_decodes_into_typed_models():
    tm.test_objects_decode_into_typed_models(STANDBY)


# ---------------------------------------------------------------- etcd

def test_etcd_is_three_members_started_together_under_a_headless_service():
    objs = _objs()
    sts, c, svc = _etcd(objs)
    assert sts["spec"]["replicas"] == ETCD_MEMBERS, "3 members: a quorum of 2 survives the loss of one"
    # No member is ready before a quorum runs: OrderedReady would never start the second.
    assert sts["spec"].get("podManagementPolicy") == "Parallel", m.where(sts)
    assert svc["spec"].get("clusterIP") == "None", f"{m.where(svc)}: headless, for the members' names"
    assert svc["spec"].get("publishNotReadyAddresses") is True, (
        f"{m.where(svc)}: members must resolve each other before they are ready (a quorum)")
    assert _service_port(svc, "client") == _port(c, "client") == 2379
    assert _service_port(svc, "peer") == _port(c, "peer") == 2380
    claims = [t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])]
    assert claims, f"{m.where(sts)}: every member needs its own persistent volume"
    pdb = [o for o in objs if o["kind"] == "PodDisruptionBudget"
           and netpol._selects(o["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])]
    assert len(pdb) == 1 and pdb[0]["spec"].get("maxUnavailable") == 1, "a drain must keep the quorum"


def test_etcd_initial_cluster_names_all_three_members():
    objs = _objs()
    sts, c, svc = _etcd(objs)
    members = _member_names(sts)
    service, peer, client = svc["metadata"]["name"], _service_port(svc, "peer"), _service_port(svc, "client")
    expected = {name: f"http://{name}.{service}:{peer}" for name in members}
    tokens = set()
    for ordinal, pod in enumerate(members):
        flags = m.flag_values(m.resolved_args(sts, c, objs, ordinal))
        cluster = dict(entry.split("=", 1) for entry in flags["initial-cluster"].split(","))
        assert cluster == expected, f"Pod {pod}: --initial-cluster={flags['initial-cluster']}"
        assert flags["name"] == pod, f"Pod {pod} would join as {flags['name']!r}"
        assert flags["initial-advertise-peer-urls"] == cluster[pod], f"Pod {pod}: its peer URL is not its entry"
        assert flags["advertise-client-urls"] == f"http://{pod}.{service}:{client}", pod
        assert flags["listen-peer-urls"] == f"http://0.0.0.0:{_port(c, 'peer')}", pod
        assert flags["listen-client-urls"] == f"http://0.0.0.0:{_port(c, 'client')}", pod
        assert flags["initial-cluster-state"] == "new", pod
        tokens.add(flags["initial-cluster-token"])
    assert len(tokens) == 1, f"the members disagree on --initial-cluster-token: {tokens}"


def test_an_etcd_leader_election_fits_in_the_masters_lease():
    objs = _objs()
    sts, c, _ = _etcd(objs)
    flags = m.flag_values(m.resolved_args(sts, c, objs))
    heartbeat, election = int(flags["heartbeat-interval"]), int(flags["election-timeout"])
    assert (heartbeat, election) == (50, 500), "the values the project's tests run etcd with"
    master, mc = _master(objs)
    ttl_s = int(m.flag_values(m.resolved_args(master, mc, objs)).get("leader_ttl_s", "2"))
    # etcd replaces a lost leader within about two election timeouts; meanwhile the
    # masters' lease must not run out, or the leader would exit for nothing.
    assert 2 * election < ttl_s * 1000, f"--election-timeout={election} ms against a {ttl_s} s lease"


def test_etcd_runs_from_the_jobs_image_which_installs_it():
    objs = _objs()
    sts, c, _ = _etcd(objs)
    _, mc = _master(objs)
    assert m.invocation(c)[0] in m.SYSTEM_BINARIES and m.binary_name(m.invocation(c)[0]) == "etcd"
    assert c["image"] == mc["image"], "etcd runs from the job's image (docker/Dockerfile installs etcd-server)"
    dockerfile = (m.REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    runtime = dockerfile[dockerfile.index("AS runtime"):]
    assert re.search(r"echo etcd-server;", runtime), "docker/Dockerfile's runtime stage does not install etcd-server"


# ---------------------------------------------------------------- the masters

def test_the_master_is_a_leader_and_a_standby_with_no_claim():
    objs = _objs()
    sts, c = _master(objs)
    spec = sts["spec"]
    assert spec["replicas"] == 2, "leader + standby"
    assert spec.get("podManagementPolicy") == "Parallel", "the standby is never ready: nothing may wait for it"
    # A RollingUpdate waits for each updated Pod to be ready: an updated standby never is.
    assert spec.get("updateStrategy", {}).get("type") == "OnDelete", m.where(sts)
    assert not spec.get("volumeClaimTemplates"), "the job's state is in etcd: no claim"
    env = {v["name"] for v in c.get("env", [])}
    assert "state_dir" not in m.flag_values(m.resolved_args(sts, c, objs)) and "PL_STATE_DIR" not in env
    terms = spec["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    own = spec["template"]["metadata"]["labels"]
    assert any(t.get("topologyKey") == "kubernetes.io/hostname" and netpol._selects(t["labelSelector"], own)
               for t in terms), "leader and standby on one node would be lost together"


def test_every_master_names_the_etcd_service_and_a_fixed_port():
    objs = _objs()
    sts, c = _master(objs)
    etcd, _, etcd_svc = _etcd(objs)
    members = {f"{pod}.{etcd_svc['metadata']['name']}:{_service_port(etcd_svc, 'client')}"
               for pod in _member_names(etcd)}
    for ordinal in range(sts["spec"]["replicas"]):
        args, env = m.resolved_process(sts, c, objs, ordinal)
        flags = m.flag_values(args)
        endpoints = flags.get("etcd_endpoints", "")
        assert set(endpoints.split(",")) == members, (
            f"pl-master-{ordinal}: --etcd_endpoints={endpoints!r}, want every member of the etcd Service "
            f"{sorted(members)}")
        port = flags.get("port", env.get("PL_MASTER_PORT"))
        assert port is not None and int(port) == _port(c, "grpc") != 0, (
            f"pl-master-{ordinal}: --port={port}: with etcd the port is fixed, the grpc containerPort")
        prefix = flags.get("etcd_prefix", "")
        assert prefix.startswith("/") and not prefix.endswith("/"), f"--etcd_prefix={prefix!r}"
        assert int(flags.get("leader_ttl_s", "2")) >= 1


def test_the_masters_readiness_is_its_grpc_port_and_no_probe_restarts_a_standby():
    objs = _objs()
    sts, c = _master(objs)
    grpc = {"grpc", _port(c, "grpc")}
    ready = c.get("readinessProbe", {})
    assert ready.get("tcpSocket", {}).get("port") in grpc, f"readinessProbe {ready}: want the gRPC port"
    # A new leader is behind the Service within a second or two of serving.
    assert ready.get("periodSeconds", 10) <= 2, ready
    for probe in ("startupProbe", "livenessProbe"):
        port = c.get(probe, {}).get("tcpSocket", {}).get("port")
        assert port not in grpc, f"{probe} on the gRPC port, which a standby never opens: it would be restarted"
    # Alive: the status page's port, which leader and standby open at start (--http_port).
    http = int(m.flag_values(m.resolved_args(sts, c, objs))["http_port"])
    assert c["livenessProbe"]["tcpSocket"]["port"] in ("http", http) and _port(c, "http") == http


def test_the_masters_service_routes_to_the_ready_pod_only():
    objs = _objs()
    sts, c = _master(objs)
    addresses = set()
    for o, cc in m.containers_running(objs, "pl-pserver") + m.containers_running(objs, "pl-trainer"):
        env = {v["name"]: v.get("value") for v in cc.get("env", [])}
        addresses.add(m.flag_values(m.resolved_args(o, cc, objs)).get("master", env.get("PL_MASTER_ADDR")))
    assert len(addresses) == 1, f"pservers and trainers disagree on the master's address: {addresses}"
    host, port = addresses.pop().rsplit(":", 1)
    assert "," not in host and "." not in host, f"{host}: one Service's name, not a Pod's (a Pod may be the standby)"
    svc = m.one(objs, "Service", host)
    spec = svc["spec"]
    assert spec.get("publishNotReadyAddresses", False) is False, f"{m.where(svc)} would route to the standby"
    assert spec.get("clusterIP") != "None", (
        f"{m.where(svc)}: headless; gRPC resolves a name again at most every 30 s, a virtual IP needs no resolving")
    assert spec["selector"] and netpol._selects({"matchLabels": spec["selector"]},
                                                sts["spec"]["template"]["metadata"]["labels"])
    selected = [o for o in m.workloads(objs)
                if netpol._selects({"matchLabels": spec["selector"]}, o["spec"]["template"]["metadata"]["labels"])]
    assert selected == [sts], f"{m.where(svc)} selects {[m.where(o) for o in selected]}"
    assert _service_port(svc, "grpc") == int(port), f"{host}:{port} is not the Service's gRPC port"
    assert f"{host}:{port}" in tm.leader_endpoints(objs)


# ---------------------------------------------------------------- NetworkPolicy

def _labels_of(objs, component):
    found = [o["spec"]["template"]["metadata"]["labels"] for o in m.workloads(objs)
             if o["spec"]["template"]["metadata"]["labels"].get(COMPONENT) == component]
    assert found, f"no workload of component {component}"
    return found[0]


def _reaches(objs, source_labels, target_labels, port):
    """Whether a Pod with `source_labels` (one of another namespace when None) may open
    `port` on a Pod with `target_labels` under the Ingress policies selecting that Pod."""
    policies = [p for p in netpol._policies(objs) if netpol._selects(p["spec"]["podSelector"], target_labels)]
    assert policies, f"no NetworkPolicy selects the Pods labelled {target_labels}"
    return any(netpol._admits(rule, source_labels, port, {}) for p in policies for rule in p["spec"].get("ingress", []))


def test_network_policy_admits_masters_to_etcd_and_members_to_each_other_only():
    objs = _objs()
    etcd, c, _ = _etcd(objs)
    client, peer = _port(c, "client"), _port(c, "peer")
    etcd_labels = etcd["spec"]["template"]["metadata"]["labels"]
    master = _labels_of(objs, "master")
    assert _reaches(objs, master, etcd_labels, client), "the masters cannot reach etcd on 2379"
    assert _reaches(objs, etcd_labels, etcd_labels, peer), "the members cannot reach each other on 2380"
    # Nobody else: etcd takes no password and no certificate.
    for component in ("trainer", "pserver"):
        for port in (client, peer):
            assert not _reaches(objs, _labels_of(objs, component), etcd_labels, port), (
                f"a {component} reaches etcd on {port}: it could write the job's state")
    assert not _reaches(objs, master, etcd_labels, peer), "the masters need etcd's client port only"
    for port in (client, peer):
        assert not _reaches(objs, None, etcd_labels, port), f"etcd's {port} is open outside the namespace"
        assert not _reaches(objs, {m.PART_OF: "other-job"}, etcd_labels, port), f"another job reaches etcd's {port}"
    # The masters still take the job's calls (the job's own policy still selects them).
    assert _reaches(objs, _labels_of(objs, "trainer"), master, _port(m.container_named(objs, "pl-master")[1], "grpc"))
