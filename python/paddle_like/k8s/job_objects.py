"""The Kubernetes objects one PaddleLikeJob is made of: what the operator creates.

For a job *J* (every name derived from it, so a namespace holds any number of jobs):

    Service + StatefulSet J-master       the master, J-master-0.J-master:7000 (PL_MASTER_ADDR),
                                         its state on the claim state-J-master-0
    Service + StatefulSet J-pserver      the first copy of every shard (Pod ordinal = index),
      (and J-pserver-r1, J-pserver-r2)   the other copies (spec.pserver.copies), kept off
                                         each other's nodes
    Deployment J-trainer                 the trainers: pl-trainer, or spec.trainer.command;
                                         an elastic job of the autoscaler (label and
                                         annotations) unless spec.trainer.elastic is false
    NetworkPolicy J                      only J's Pods reach J's ports (the operator and
                                         monitoring namespaces reach the status page)
    PodDisruptionBudget J-servers        one master or pserver Pod voluntarily down at a time
    Issuers and Certificates             the job's CA and one certificate per role (job_tls.py)

The containers run what k8s/base runs, with the same flags and PL_* variables, the
job's settings written in directly (no ConfigMap). tests/k8s/test_operator_objects.py
runs the manifest checks of tests/k8s on these objects.

Pure: no API calls.
"""

from paddle_like.k8s import job_tls
from paddle_like.k8s.job_spec import DATA_MOUNT, JOB_LABEL

__all__ = ["render", "names", "pserver_set_names", "trainer_name", "trainer_annotations", "CHILD_KINDS",
           "ELASTIC_LABEL", "MIN_ANNOTATION", "MAX_ANNOTATION", "PRIORITY_ANNOTATION"]

# The autoscaler's label and annotations (paddle_like/elastic/kube_capacity.py; not
# imported: that package loads the C++ policy).
ELASTIC_LABEL = "paddle-like.dev/elastic"
MIN_ANNOTATION = "paddle-like.dev/min-trainers"
MAX_ANNOTATION = "paddle-like.dev/max-trainers"
PRIORITY_ANNOTATION = "paddle-like.dev/priority"
REPLICA_LABEL = "paddle-like.dev/replica"
BIN = "/usr/local/bin/"  # docker/Dockerfile installs the binaries here
UID = 10001              # docker/Dockerfile's USER
MASTER_PORT, PSERVER_PORT, HTTP_PORT, METRICS_PORT = 7000, 7100, 8080, 9090
# (apiVersion, kind) of every child, in the order they are created: certificates before
# the Pods that mount their Secrets, Services before their StatefulSets.
CHILD_KINDS = (("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate"), ("v1", "Service"),
               ("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"), ("networking.k8s.io/v1", "NetworkPolicy"),
               ("policy/v1", "PodDisruptionBudget"))


def pserver_set_names(spec):
    """One StatefulSet per copy of the shards: J-pserver, J-pserver-r1, ..."""
    return [f"{spec.name}-pserver" + (f"-r{r}" if r else "") for r in range(spec["pserver.copies"])]


def trainer_name(spec):
    return f"{spec.name}-trainer"


def _pod_security():
    return {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
            # Owns the certificate files (mode 0440): without it they are root's alone.
            "fsGroup": UID, "seccompProfile": {"type": "RuntimeDefault"}}


def _container_security():
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _template_metadata(spec, component, app_name, extra_labels=None):
    labels = dict(spec.labels(component), **{"app.kubernetes.io/name": app_name}, **(extra_labels or {}))
    # Prometheus finds /metrics through these (the common scrape-config convention).
    return {"labels": labels, "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT),
                                              "prometheus.io/path": "/metrics"}}


def _tcp_probes(port_name, startup=True):
    """Up to 10 minutes to start serving (state or shard restored first); only then does
    liveness count."""
    probes = {"readinessProbe": {"tcpSocket": {"port": port_name}, "periodSeconds": 5},
              "livenessProbe": {"tcpSocket": {"port": port_name}, "periodSeconds": 10, "failureThreshold": 6}}
    if startup:
        probes["startupProbe"] = {"tcpSocket": {"port": port_name}, "periodSeconds": 5, "failureThreshold": 120}
    return probes


def _claim_template(spec, name, component, storage):
    return {"metadata": {"name": name, "labels": spec.labels(component)},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}


def _dataset_volume(spec):
    return {"name": "dataset", "persistentVolumeClaim": {"claimName": spec["data.claimName"], "readOnly": True}}


def _headless_service(spec, name, component, app_name, selector, ports):
    return {"apiVersion": "v1", "kind": "Service", "metadata": spec.metadata(name, component, app_name),
            # Headless: the name resolves to the Pod itself; resolvable as soon as the
            # Pod has an IP (clients retry until it serves).
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector,
                     "ports": [{"name": n, "port": p, "targetPort": n} for n, p in ports]}}


def master(spec):
    name = f"{spec.name}-master"
    uses_files = not spec["data.train"].startswith("indices:")
    mounts = [{"name": "tls", "mountPath": job_tls.TLS_DIR, "readOnly": True}, {"name": "state", "mountPath": "/state"}]
    volumes = [job_tls.secret_volume(spec, "master")]
    if uses_files:  # the master reads the record files' indexes; indices:N needs no data
        mounts.append({"name": "dataset", "mountPath": DATA_MOUNT, "readOnly": True})
        volumes.append(_dataset_volume(spec))
    container = {
        "name": "master", "image": spec["image"], "imagePullPolicy": "IfNotPresent",
        "command": [BIN + "pl-master"],
        "args": ["--host=0.0.0.0", f"--port={MASTER_PORT}", "--state_dir=/state", f"--data={spec['data.train']}",
                 f"--passes={spec['master.passes']}", f"--chunks_per_task={spec['master.chunksPerTask']}",
                 f"--lease_ms={spec['master.leaseMs']}", f"--max_failures={spec['master.maxFailures']}",
                 f"--seed={spec['master.seed']}", f"--replicas={spec['pserver.copies']}",
                 f"--metrics_port={METRICS_PORT}", f"--http_port={HTTP_PORT}"],
        "env": [{"name": "PL_TLS_DIR", "value": job_tls.TLS_DIR},
                {"name": "PL_NUM_PSERVERS", "value": str(spec["pserver.shards"])}],
        "ports": [{"name": "grpc", "containerPort": MASTER_PORT}, {"name": "metrics", "containerPort": METRICS_PORT},
                  {"name": "http", "containerPort": HTTP_PORT}],
        **_tcp_probes("grpc"),
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": _container_security(), "volumeMounts": mounts}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": spec.metadata(name, "master", "pl-master"),
           "spec": {"serviceName": name, "replicas": 1, "selector": {"matchLabels": spec.selector("master")},
                    "template": {"metadata": _template_metadata(spec, "master", "pl-master"),
                                 "spec": {"enableServiceLinks": False, "terminationGracePeriodSeconds": 30,
                                          "securityContext": _pod_security(), "containers": [container],
                                          "volumes": volumes}},
                    "volumeClaimTemplates": [_claim_template(spec, "state", "master", spec["master.storage"])]}}
    return [_headless_service(spec, name, "master", "pl-master", spec.selector("master"),
                              [("grpc", MASTER_PORT), ("http", HTTP_PORT)]), sts]


def _pserver_command(spec):
    # The index is the Pod's ordinal, the suffix of its name (J-pserver-r1-3 -> 3), and
    # so is its certificate's folder; exec: the pserver replaces the shell and gets SIGTERM.
    flags = ['--index="${POD_NAME##*-}"', "--host=0.0.0.0", f"--port={PSERVER_PORT}",
             "--checkpoint_dir=/checkpoints", f"--checkpoint_every_s={spec['pserver.checkpointEveryS']}",
             f"--replicas={spec['pserver.copies']}", "--replica_checkpoints=true", f"--metrics_port={METRICS_PORT}"]
    return (f'export PL_TLS_DIR="{job_tls.pserver_tls_dir("${POD_NAME##*-}")}"; '
            f"exec {BIN}pl-pserver " + " ".join(flags))


def pserver_sets(spec):
    objects = []
    sets = pserver_set_names(spec)
    for copy, name in enumerate(sets):
        selector = dict(spec.selector("pserver"), **{REPLICA_LABEL: str(copy)})
        # Two copies of a shard never share a node: set against set, which every
        # Kubernetes version enforces (per shard would need matchLabelKeys, 1.31+).
        anti = [{"topologyKey": "kubernetes.io/hostname",
                 "labelSelector": {"matchLabels": dict(spec.selector("pserver"), **{REPLICA_LABEL: str(other)})}}
                for other in range(len(sets)) if other != copy]
        container = {
            "name": "pserver", "image": spec["image"], "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", _pserver_command(spec)],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    # Registered with the master, which hands it to the trainers.
                    {"name": "PL_ADVERTISE_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "PL_MASTER_ADDR", "value": spec.master_address},
                    {"name": "PL_NUM_PSERVERS", "value": str(spec["pserver.shards"])}],
            "ports": [{"name": "grpc", "containerPort": PSERVER_PORT},
                      {"name": "metrics", "containerPort": METRICS_PORT}],
            **_tcp_probes("grpc"),
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "securityContext": _container_security(),
            "volumeMounts": [{"name": "tls", "mountPath": job_tls.TLS_DIR, "readOnly": True},
                             {"name": "checkpoints", "mountPath": "/checkpoints"}]}
        pod = {"enableServiceLinks": False,
               # SIGTERM: hand the shard over, then write a final checkpoint.
               "terminationGracePeriodSeconds": 120, "securityContext": _pod_security(),
               "containers": [container], "volumes": [job_tls.pserver_tls_volume(spec)]}
        if anti:
            pod = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}}, **pod}
        objects.append(_headless_service(spec, name, "pserver", "pl-pserver", selector, [("grpc", PSERVER_PORT)]))
        objects.append({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": spec.metadata(name, "pserver", "pl-pserver"),
            "spec": {"serviceName": name, "replicas": spec["pserver.shards"], "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": selector},
                     "template": {"metadata": _template_metadata(spec, "pserver", "pl-pserver",
                                                                 {REPLICA_LABEL: str(copy)}),
                                  "spec": pod},
                     "volumeClaimTemplates": [_claim_template(spec, "checkpoints", "pserver",
                                                              spec["pserver.storage"])]}})
    return objects


def _threads_from_cpu_limit(var):
    # The CPU limit, rounded up: OpenMP would otherwise start one thread per core of the node.
    return {"name": var, "valueFrom": {"resourceFieldRef": {"containerName": "trainer", "resource": "limits.cpu",
                                                            "divisor": "1"}}}


def _trainer_container(spec):
    env = [{"name": "PL_TLS_DIR", "value": job_tls.TLS_DIR},
           {"name": "PL_MASTER_ADDR", "value": spec.master_address},
           {"name": "PL_SYNC", "value": "1" if spec["trainer.sync"] else "0"},
           # Names the trainer in the master's and its own log lines.
           {"name": "PL_TRAINER_RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    mounts = [{"name": "tls", "mountPath": job_tls.TLS_DIR, "readOnly": True}]
    if spec["data.claimName"] is not None:
        mounts.append({"name": "dataset", "mountPath": DATA_MOUNT, "readOnly": True})
    if spec.builtin_trainer:
        command = [BIN + "pl-trainer"]
        args = [f"--model={spec['trainer.model']}", f"--optimizer={spec['trainer.optimizer']}",
                f"--lr={spec['trainer.lr']!r}", f"--batch_size={spec['trainer.batchSize']}",
                f"--seed={spec['master.seed']}", f"--device={spec['trainer.device']}", "--threads=$(JOB_THREADS)"]
        if spec["data.test"] is not None:
            args.append(f"--test_data={spec['data.test']}")
        args += ["--log_every_s=10", f"--metrics_port={METRICS_PORT}"] + list(spec["trainer.args"] or [])
        env.append(_threads_from_cpu_limit("JOB_THREADS"))
    else:
        command, args = list(spec["trainer.command"]), list(spec["trainer.args"] or [])
        env.append(_threads_from_cpu_limit("OMP_NUM_THREADS"))
        env += [dict(v) for v in spec["trainer.env"] or []]
        if spec["trainer.scriptConfigMap"] is not None:
            mounts.append({"name": "script", "mountPath": "/job", "readOnly": True})
    container = {"name": "trainer", "image": spec["image"], "imagePullPolicy": "IfNotPresent", "command": command,
                 "lifecycle": LEAVE_HOOK}
    if args:
        container["args"] = args
    container.update({"env": env, "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
                      "resources": spec["trainer.resources"], "securityContext": _container_security(),
                      "volumeMounts": mounts})
    return container


# Before a trainer Pod's SIGTERM (scale-down, preemption, drain): SIGUSR1 asks the
# trainer (PID 1) to finish the task in hand, report it and exit, so a shrink trains
# nothing twice; Kubernetes sends SIGTERM (give the task back now) when the hook ends,
# after at most LEAVE_GRACE_S, if the trainer is still there.
LEAVE_GRACE_S = 5
LEAVE_HOOK = {"preStop": {"exec": {"command": ["/bin/sh", "-c", f"kill -USR1 1; sleep {LEAVE_GRACE_S}"]}}}


def trainers(spec):
    name = trainer_name(spec)
    meta = spec.metadata(name, "trainer", "pl-trainer")
    if spec["trainer.elastic"]:
        meta["labels"][ELASTIC_LABEL] = "true"
    # The autoscaler's bounds (k8s/README.md, "Elastic trainers"): it sizes an elastic
    # Deployment between them; the operator changes them when the job's fields change.
    meta["annotations"] = trainer_annotations(spec)
    volumes = [job_tls.secret_volume(spec, "trainer")]
    if spec["data.claimName"] is not None:
        volumes.append(_dataset_volume(spec))
    if spec["trainer.scriptConfigMap"] is not None:
        volumes.append({"name": "script", "configMap": {"name": spec["trainer.scriptConfigMap"], "defaultMode": 0o444}})
    pod = {"priorityClassName": spec["trainer.priorityClassName"], "enableServiceLinks": False,
           # After the preStop hook (LEAVE_HOOK), SIGTERM is checked between steps: the
           # trainer finishes its step, returns its task to the master and leaves.
           "terminationGracePeriodSeconds": 60, "securityContext": _pod_security(),
           "containers": [_trainer_container(spec)], "volumes": volumes}
    if "nvidia.com/gpu" in (spec["trainer.resources"].get("limits") or {}):
        # GPU nodes are usually tainted so that only Pods asking for a GPU land there.
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
             "spec": {"replicas": spec["trainer.replicas"], "selector": {"matchLabels": spec.selector("trainer")},
                      # A rollout replaces trainers one by one without asking for extra
                      # capacity (a shared cluster may have none).
                      "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                      "template": {"metadata": _template_metadata(spec, "trainer", "pl-trainer"), "spec": pod}}}]


def trainer_annotations(spec):
    return {MIN_ANNOTATION: str(spec["trainer.minReplicas"]), MAX_ANNOTATION: str(spec["trainer.maxReplicas"]),
            PRIORITY_ANNOTATION: str(spec["trainer.priority"])}


def network_policy(spec, operator_namespace):
    """Only the job's own Pods reach its ports (another job in the same namespace cannot
    register a pserver or push gradients); the status page and /metrics are also open
    to namespaces labelled paddle-like.dev/monitoring=true, and the status page to the
    operator, which reads the job's progress there."""
    own = {"podSelector": {"matchLabels": {JOB_LABEL: spec.name}}}
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": spec.metadata(spec.name),
             "spec": {"podSelector": {"matchLabels": {JOB_LABEL: spec.name}},
                      "policyTypes": ["Ingress"],
                      "ingress": [
                          {"from": [own]},
                          {"from": [{"namespaceSelector": {"matchLabels": {"paddle-like.dev/monitoring": "true"}}}],
                           "ports": [{"port": METRICS_PORT, "protocol": "TCP"},
                                     {"port": HTTP_PORT, "protocol": "TCP"}]},
                          {"from": [{"namespaceSelector": {"matchLabels": {
                              "kubernetes.io/metadata.name": operator_namespace}},
                              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "pl-operator"}}}],
                           "ports": [{"port": HTTP_PORT, "protocol": "TCP"}]}]}}]


def disruption_budget(spec):
    """A drain evicts one master or pserver Pod of the job at a time, the next once the
    last is back: the two copies of a shard are never both evicted. Trainers have none:
    they return their task on SIGTERM and are meant to come and go."""
    return [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": spec.metadata(f"{spec.name}-servers"),
             "spec": {"maxUnavailable": 1,
                      "selector": {"matchLabels": {JOB_LABEL: spec.name},
                                   "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                                         "values": ["master", "pserver"]}]}}}]


def render(spec, operator_namespace="paddle-like-system"):
    """Every child object of the job, in the order of CHILD_KINDS."""
    objects = (job_tls.cert_manager_objects(spec) + master(spec) + pserver_sets(spec) + trainers(spec) +
               network_policy(spec, operator_namespace) + disruption_budget(spec))
    order = {kind: i for i, (_, kind) in enumerate(CHILD_KINDS)}
    return sorted(objects, key=lambda o: order[o["kind"]])


def names(spec):
    """{(kind, name)} of the job's children: what must not collide with another job's."""
    return {(o["kind"], o["metadata"]["name"]) for o in render(spec)}
