"""What a Kubernetes cluster offers the elastic policy: the elastic jobs, read from their
Deployments' label and annotations, and the capacity in slots, measured from the nodes'
allocatable resources and the requests of the pods bound to them. kube_driver.py's module
documentation gives the rules (what a slot is, which nodes count, what reclaims).

Pure functions over the API's objects (as plain dicts or typed models); no API calls.
"""

import collections
import dataclasses
import math
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity

__all__ = ["Job", "Capacity", "read_job", "measure_capacity", "pod_request", "selects",
           "ELASTIC_LABEL", "MIN_ANNOTATION", "MAX_ANNOTATION", "PRIORITY_ANNOTATION"]

ELASTIC_LABEL = "paddle-like.dev/elastic"
MIN_ANNOTATION = "paddle-like.dev/min-trainers"
MAX_ANNOTATION = "paddle-like.dev/max-trainers"
PRIORITY_ANNOTATION = "paddle-like.dev/priority"
SLOT_POD = Decimal(1)  # every trainer also takes one of the node's `pods`


# ---------------------------------------------------------------- reading objects

@dataclasses.dataclass
class Job:
    """One elastic Deployment as the driver sees it at one tick."""
    namespace: str
    name: str
    min_trainers: int
    max_trainers: int
    priority: int
    replicas: int           # spec.replicas: what Kubernetes is asked to run
    ready: int              # status.readyReplicas: the trainers running
    request: dict           # one trainer's request, resource -> Decimal
    selector: dict          # spec.selector: which pods are its trainers
    tolerations: list

    @property
    def key(self):
        return f"{self.namespace}/{self.name}"

    @property
    def bounds(self):
        return (self.min_trainers, self.max_trainers, self.priority)


def _container_request(container):
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    # A container with a limit and no request gets the limit as its request (API defaulting).
    return {r: parse_quantity(requests.get(r, limits.get(r))) for r in set(requests) | set(limits)}


def pod_request(pod_spec):
    """What the scheduler reserves for a Pod: resource -> Decimal (no "pods" entry)."""
    total = collections.Counter()
    for c in pod_spec.get("containers") or []:
        total.update(_container_request(c))
    for c in pod_spec.get("initContainers") or []:  # run one at a time, before the others
        for r, q in _container_request(c).items():
            total[r] = max(total[r], q)
    for r, q in (pod_spec.get("overhead") or {}).items():
        total[r] += parse_quantity(q)
    return {r: Decimal(q) for r, q in total.items() if q > 0}


def _int_annotation(annotations, key, default=None):
    """(value, None) or (None, why) for an integer annotation."""
    raw = annotations.get(key)
    if raw is None:
        return (default, None) if default is not None else (None, f"annotation {key} is missing")
    try:
        return int(str(raw).strip()), None
    except ValueError:
        return None, f"annotation {key}={raw!r} is not an integer"


def read_job(deployment):
    """(Job, None) from an elastic Deployment (a dict as the API returns it), or
    (None, "why") naming the annotation at fault."""
    meta = deployment["metadata"]
    annotations = meta.get("annotations") or {}
    lo, why = _int_annotation(annotations, MIN_ANNOTATION)
    if why is None:
        hi, why = _int_annotation(annotations, MAX_ANNOTATION)
    if why is None:
        prio, why = _int_annotation(annotations, PRIORITY_ANNOTATION, default=0)
    if why is None:
        if lo < 0:
            why = f"annotation {MIN_ANNOTATION}={lo} is below 0"
        elif hi < 1:
            why = f"annotation {MAX_ANNOTATION}={hi} is below 1"
        elif lo > hi:
            why = f"annotation {MIN_ANNOTATION}={lo} is above {MAX_ANNOTATION}={hi}"
    if why is not None:
        return None, why
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    replicas = spec.get("replicas")
    return Job(namespace=meta["namespace"], name=meta["name"], min_trainers=lo, max_trainers=hi,
               priority=prio, replicas=1 if replicas is None else int(replicas),
               ready=int(status.get("readyReplicas") or 0), request=pod_request(template),
               selector=spec.get("selector") or {}, tolerations=template.get("tolerations") or []), None


def selects(selector, labels):
    """Whether a label selector (matchLabels, matchExpressions) selects `labels`. An
    empty selector selects nothing here (apps/v1 refuses one anyway)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if ((op == "In" and labels.get(key) not in values) or
                (op == "NotIn" and key in labels and labels[key] in values) or
                (op == "Exists" and key not in labels) or
                (op == "DoesNotExist" and key in labels)):
            return False
    return True


def _tolerates(tolerations, taint):
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint["key"]:
                return True
        elif t.get("key") == taint["key"] and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _node_usable(node, jobs):
    """Ready, not cordoned, and some job's trainers tolerate its scheduling taints."""
    conditions = (node.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return False
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return any(all(_tolerates(j.tolerations, t) for t in taints) for j in jobs)


def _unschedulable(pod):
    if pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") != "Pending":
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _format_quantity(resource, q):
    if resource == "cpu":
        return f"{q}" if q == q.to_integral_value() else f"{int(q * 1000)}m"
    for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if q >= size and q % size == 0:
            return f"{int(q // size)}{suffix}"
    return str(q)


@dataclasses.dataclass
class Capacity:
    """The slots training may use, and how they were counted."""
    slots: int = 0
    unit: dict = dataclasses.field(default_factory=dict)  # one slot: resource -> Decimal
    node_slots: dict = dataclasses.field(default_factory=dict)  # usable node -> slots
    nodes_total: int = 0
    trainer_pods: int = 0
    # Unschedulable pending pods above the trainers' priority: (namespace/name, priority, slots).
    pending: list = dataclasses.field(default_factory=list)

    @property
    def reclaimed(self):
        return sum(s for _, _, s in self.pending)

    def describe(self):
        if not self.unit:
            return f"capacity 0 slots: no elastic job to measure a slot by ({self.nodes_total} nodes)"
        unit = ", ".join(f"{r} {_format_quantity(r, q)}" for r, q in sorted(self.unit.items()) if r != "pods")
        text = (f"capacity {self.slots} slots (a slot: {unit}, 1 pod): {sum(self.node_slots.values())} on "
                f"{len(self.node_slots)} usable nodes of {self.nodes_total}")
        if self.pending:
            text += (f", less {self.reclaimed} for {len(self.pending)} pending higher-priority pod(s) "
                     f"({', '.join(n for n, _, _ in self.pending)})")
        return text


def measure_capacity(nodes, pods, jobs):
    """Capacity from NodeList/PodList items (dicts) and the managed jobs (see the module
    docstring for the rules)."""
    jobs = list(jobs)
    cap = Capacity(nodes_total=len(nodes))
    if not jobs:
        return cap
    unit = {"pods": SLOT_POD}
    for j in jobs:
        for r, q in j.request.items():
            unit[r] = max(unit.get(r, Decimal(0)), q)
    cap.unit = unit

    def is_trainer(pod):
        labels = pod["metadata"].get("labels") or {}
        return any(j.namespace == pod["metadata"].get("namespace") and selects(j.selector, labels) for j in jobs)

    used = collections.defaultdict(collections.Counter)
    trainer_priorities = []
    candidates = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if is_trainer(pod):
            cap.trainer_pods += 1
            trainer_priorities.append(int(pod["spec"].get("priority") or 0))
            continue
        node = pod["spec"].get("nodeName")
        if node:
            used[node].update(pod_request(pod["spec"]))
            used[node]["pods"] += 1
        elif _unschedulable(pod):
            candidates.append(pod)

    for node in nodes:
        if not _node_usable(node, jobs):
            continue
        name = node["metadata"]["name"]
        allocatable = {r: parse_quantity(q) for r, q in ((node.get("status") or {}).get("allocatable") or {}).items()}
        fits = [(allocatable.get(r, Decimal(0)) - used[name][r]) // q for r, q in unit.items()]
        cap.node_slots[name] = max(0, int(min(fits)))

    # No trainer pod: nothing a pending pod could preempt, so nothing to reclaim for it.
    if trainer_priorities:
        lowest = min(trainer_priorities)
        for pod in candidates:
            priority = int(pod["spec"].get("priority") or 0)
            if priority <= lowest:
                continue
            need = pod_request(pod["spec"])
            need["pods"] = SLOT_POD
            slots = max(1, max(math.ceil(need.get(r, Decimal(0)) / q) for r, q in unit.items()))
            cap.pending.append((f"{pod['metadata']['namespace']}/{pod['metadata']['name']}", priority, slots))
    cap.slots = max(0, sum(cap.node_slots.values()) - cap.reclaimed)
    return cap
