"""The fields of a PaddleLikeJob, their defaults and their checks.

``parse(job)`` turns a PaddleLikeJob (a dict as the API returns it) into a ``JobSpec``
with every default filled in, or raises ``SpecError`` naming the field at fault:
``spec.trainer.minReplicas: 5 is above spec.trainer.maxReplicas (2)``. ``FIELDS`` is the
table both the operator and the CRD (k8s/cluster/crd.yaml) follow: the test
tests/k8s/test_operator_spec.py checks that the CRD's openAPIV3Schema declares exactly
these fields with the same types, enums and bounds. The API server applies the schema
when a job is applied; the checks here that no schema can say (one field against
another, the names the job's objects get) run in the operator.

Pure: no API calls.
"""

import dataclasses
import re

__all__ = ["GROUP", "VERSION", "KIND", "PLURAL", "FIELDS", "Field", "JobSpec", "SpecError", "parse",
           "MAX_NAME_LENGTH", "DEFAULT_PRIORITY_CLASS", "JOB_LABEL", "MANAGED_BY", "OPERATOR_NAME"]

GROUP = "paddle-like.dev"
VERSION = "v1"
KIND = "PaddleLikeJob"
PLURAL = "paddlelikejobs"
DEFAULT_PRIORITY_CLASS = "pl-trainer-preemptible"  # k8s/cluster/priorityclass.yaml
# The longest child name is "<job>-pserver-r2" (a StatefulSet); its Pods' label
# controller-revision-hash is "<that name>-<10 characters>" and a label value holds 63.
MAX_NAME_LENGTH = 40
# Every child object and Pod carries the job's name in JOB_LABEL (what its selectors,
# NetworkPolicy and PodDisruptionBudget match) and in app.kubernetes.io/part-of (as the
# manifests of k8s/base do), and is marked as the operator's (what it lists).
JOB_LABEL = "paddle-like.dev/job-name"
PART_OF = "app.kubernetes.io/part-of"
COMPONENT = "app.kubernetes.io/component"
MANAGED_BY = "app.kubernetes.io/managed-by"
OPERATOR_NAME = "pl-operator"
DATA_MOUNT = "/data"  # where spec.data.claimName is mounted, in the master and the trainers

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FLAG = re.compile(r"--(\w+)=.*", re.S)


class SpecError(ValueError):
    """A PaddleLikeJob the operator cannot run; the message starts with the field."""


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of spec: its path under spec, JSON type, default (None: none) and bounds."""
    path: str
    type: str                  # string, integer, number, boolean, array, object
    default: object = None
    enum: tuple = ()
    minimum: float = None
    maximum: float = None
    exclusive_minimum: bool = False
    required: bool = False
    items: str = None          # the type of an array's items


FIELDS = (
    Field("image", "string", required=True),
    Field("tls.certificates", "string", "CertManager", enum=("CertManager", "Provided")),
    Field("data.train", "string", required=True),
    Field("data.test", "string"),
    Field("data.claimName", "string"),
    Field("master.passes", "integer", 1, minimum=1),
    Field("master.chunksPerTask", "integer", 1, minimum=1),
    Field("master.leaseMs", "integer", 10000, minimum=1),
    Field("master.maxFailures", "integer", 3, minimum=1),
    Field("master.seed", "integer", 1, minimum=0),
    Field("master.storage", "string", "1Gi"),
    Field("pserver.shards", "integer", 2, minimum=1, maximum=256),
    Field("pserver.copies", "integer", 2, minimum=1, maximum=3),
    Field("pserver.checkpointEveryS", "integer", 30, minimum=0),
    Field("pserver.storage", "string", "5Gi"),
    Field("trainer.replicas", "integer", minimum=0),
    Field("trainer.minReplicas", "integer", 1, minimum=0),
    Field("trainer.maxReplicas", "integer", 16, minimum=1),
    Field("trainer.priority", "integer", 0),
    Field("trainer.elastic", "boolean", True),
    Field("trainer.priorityClassName", "string", DEFAULT_PRIORITY_CLASS),
    Field("trainer.sync", "boolean", False),
    Field("trainer.model", "string", enum=("mlp", "cnn", "ctr")),
    Field("trainer.optimizer", "string", enum=("sgd", "momentum", "adagrad", "adam")),
    Field("trainer.lr", "number", minimum=0, exclusive_minimum=True),
    Field("trainer.batchSize", "integer", minimum=1),
    Field("trainer.device", "string", enum=("cpu", "gpu", "auto")),
    Field("trainer.command", "array", items="string"),
    Field("trainer.args", "array", items="string"),
    Field("trainer.env", "array", items="object"),
    Field("trainer.scriptConfigMap", "string"),
    Field("trainer.resources", "object"),
    Field("runPolicy.cleanPodPolicy", "string", "All", enum=("Trainers", "All")),
    Field("runPolicy.backoffLimit", "integer", 6, minimum=0),
    Field("runPolicy.maxFailedTasks", "integer", 0, minimum=0),
    Field("runPolicy.evaluationTimeoutSeconds", "integer", 600, minimum=0),
)
_BY_PATH = {f.path: f for f in FIELDS}
# The built-in trainer's (pl-trainer's) settings and their defaults: a command trainer
# takes its own flags, so these are refused with one.
BUILTIN_DEFAULTS = {"model": "mlp", "optimizer": "adam", "lr": 0.001, "batchSize": 64, "device": "cpu"}
# Flags of pl-trainer that the operator sets from the fields above; spec.trainer.args may not repeat them.
OPERATOR_TRAINER_FLAGS = {"model", "optimizer", "lr", "batch_size", "seed", "device", "threads", "test_data",
                          "log_every_s", "metrics_port", "master", "sync", "rank", "tls_dir", "insecure"}
DEFAULT_TRAINER_RESOURCES = {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """A PaddleLikeJob with its defaults filled in. `values`: field path -> value (every
    field of FIELDS that has a value); the properties name the ones read most."""
    namespace: str
    name: str
    uid: str
    generation: int
    values: dict

    def __getitem__(self, path):
        return self.values.get(path)

    @property
    def builtin_trainer(self):
        """True: the trainers run pl-trainer; False: spec.trainer.command."""
        return self.values.get("trainer.command") is None

    @property
    def master_address(self):
        """host:port of the master as every Pod of the job reaches it."""
        return f"{self.name}-master-0.{self.name}-master:7000"

    def labels(self, component=None):
        """The labels of the job's objects (and of a component's: master, pserver, trainer)."""
        out = {JOB_LABEL: self.name, PART_OF: self.name, MANAGED_BY: OPERATOR_NAME}
        if component:
            out[COMPONENT] = component
        return out

    def selector(self, component):
        """matchLabels of one component's Pods."""
        return {JOB_LABEL: self.name, COMPONENT: component}

    def metadata(self, name, component=None, app_name=None):
        """metadata of a child object: in the job's namespace, labelled, owned by the job."""
        labels = self.labels(component)
        if app_name:
            labels["app.kubernetes.io/name"] = app_name
        return {"name": name, "namespace": self.namespace, "labels": labels,
                "ownerReferences": [self.owner_reference]}

    @property
    def owner_reference(self):
        """Makes every child object the job's: `kubectl delete paddlelikejob` deletes them."""
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": self.name, "uid": self.uid,
                "controller": True}


def _type_ok(value, type_):
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "array": list, "object": dict}[type_])


def _walk(obj, prefix, out):
    """Flattens nested dicts into "a.b.c" -> value; stops at known fields (their values
    may be lists or maps) and reports unknown ones."""
    for key, value in obj.items():
        path = f"{prefix}.{key}" if prefix else key
        if path in _BY_PATH:
            out[path] = value
        elif any(p.startswith(path + ".") for p in _BY_PATH):
            if not isinstance(value, dict):
                raise SpecError(f"spec.{path}: {value!r} is not an object")
            _walk(value, path, out)
        else:
            raise SpecError(f"spec.{path}: unknown field")


def _check_field(f, value):
    where = f"spec.{f.path}"
    if not _type_ok(value, f.type):
        raise SpecError(f"{where}: {value!r} is not of type {f.type}")
    if f.enum and value not in f.enum:
        raise SpecError(f"{where}: {value!r} is not one of {', '.join(f.enum)}")
    if f.minimum is not None and (value <= f.minimum if f.exclusive_minimum else value < f.minimum):
        raise SpecError(f"{where}: {value} is {'not above' if f.exclusive_minimum else 'below'} {f.minimum:g}")
    if f.maximum is not None and value > f.maximum:
        raise SpecError(f"{where}: {value} is above {f.maximum:g}")
    if f.items is not None:
        for i, item in enumerate(value):
            if not _type_ok(item, f.items):
                raise SpecError(f"{where}[{i}]: {item!r} is not of type {f.items}")
    if f.type == "string" and not value:
        raise SpecError(f"{where}: empty")


def _check_name(meta):
    name = meta.get("name") or ""
    if len(name) > MAX_NAME_LENGTH or not _DNS_LABEL.fullmatch(name):
        raise SpecError(f"metadata.name: {name!r} must be at most {MAX_NAME_LENGTH} characters of a-z, 0-9 and "
                        "'-', starting with a letter and ending with a letter or digit (it names the job's "
                        "Services and StatefulSets)")


def _check_trainer(v):
    lo, hi = v["trainer.minReplicas"], v["trainer.maxReplicas"]
    if lo > hi:
        raise SpecError(f"spec.trainer.minReplicas: {lo} is above spec.trainer.maxReplicas ({hi})")
    replicas = v.get("trainer.replicas")
    if replicas is not None and not lo <= replicas <= hi:
        raise SpecError(f"spec.trainer.replicas: {replicas} is outside [minReplicas {lo}, maxReplicas {hi}]")
    if v.get("trainer.command") is not None:
        given = [k for k in BUILTIN_DEFAULTS if f"trainer.{k}" in v]
        if given:
            raise SpecError(f"spec.trainer.{given[0]}: a setting of the built-in trainer (pl-trainer), but "
                            "spec.trainer.command runs a command of your own: pass it in spec.trainer.args")
        if not v["trainer.command"]:
            raise SpecError("spec.trainer.command: empty (leave it out to run the built-in pl-trainer)")
    else:
        for i, arg in enumerate(v.get("trainer.args") or []):
            m = _FLAG.fullmatch(arg)
            if not m:
                raise SpecError(f"spec.trainer.args[{i}]: {arg!r}: write pl-trainer flags as --name=value")
            if m.group(1) in OPERATOR_TRAINER_FLAGS:
                raise SpecError(f"spec.trainer.args[{i}]: --{m.group(1)} is set by the operator from the job's "
                                "fields")
        if v.get("trainer.scriptConfigMap") is not None:
            raise SpecError("spec.trainer.scriptConfigMap: only for a command trainer (spec.trainer.command)")
    for i, var in enumerate(v.get("trainer.env") or []):
        name = var.get("name") if isinstance(var, dict) else None
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or set(var) - {"name", "value"} or \
                not isinstance(var.get("value", ""), str):
            raise SpecError(f"spec.trainer.env[{i}]: {var!r}: want {{name: NAME, value: \"text\"}}")
        if name.startswith("PL_") or name == "OMP_NUM_THREADS":
            raise SpecError(f"spec.trainer.env[{i}]: {name} is set by the operator (the job's contract "
                            "with its trainers)")
    resources = v.get("trainer.resources")
    if resources is not None:
        for kind, amounts in resources.items():
            if kind not in ("requests", "limits") or not isinstance(amounts, dict):
                raise SpecError(f"spec.trainer.resources.{kind}: want requests and limits, each a map of "
                                "resource to quantity")
            for resource, q in amounts.items():
                if not isinstance(q, (str, int)) or isinstance(q, bool):
                    raise SpecError(f"spec.trainer.resources.{kind}.{resource}: {q!r} is not a quantity")
        for kind in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in (resources.get(kind) or {}):
                    # The math threads follow the CPU limit; the autoscaler's slots, the requests.
                    raise SpecError(f"spec.trainer.resources.{kind}.{resource}: required")
    gpus = ((resources or DEFAULT_TRAINER_RESOURCES).get("limits") or {}).get("nvidia.com/gpu")
    device = v.get("trainer.device")
    if device == "gpu" and gpus is None:
        raise SpecError("spec.trainer.device: gpu, but spec.trainer.resources.limits has no nvidia.com/gpu")
    if device == "cpu" and gpus is not None:
        raise SpecError(f"spec.trainer.device: cpu, but the trainers ask for nvidia.com/gpu: {gpus}")


def _check_data(v):
    train, test, claim = v["data.train"], v.get("data.test"), v.get("data.claimName")
    indices = re.fullmatch(r"indices:[1-9]\d*(:[1-9]\d*)?", train)
    if train.startswith("indices:") and not indices:
        raise SpecError(f"spec.data.train: {train!r}: write indices:N or indices:N:K (N samples, K per chunk)")
    if indices and v.get("trainer.command") is None:
        raise SpecError(f"spec.data.train: {train!r} cuts the job into sample indices of a dataset the "
                        "trainers hold: that takes a command trainer (spec.trainer.command); pl-trainer "
                        "reads record files")
    for field, path in (("data.train", None if indices else train), ("data.test", test)):
        if path is None:
            continue
        if claim is None:
            raise SpecError(f"spec.data.claimName: required for spec.{field} ({path!r}): the claim holding "
                            f"the record files, mounted at {DATA_MOUNT}")
        if not path.startswith(DATA_MOUNT + "/"):
            raise SpecError(f"spec.{field}: {path!r} is not under {DATA_MOUNT}/, where spec.data.claimName is "
                            "mounted")


def parse(job):
    """The JobSpec of a PaddleLikeJob (a dict), or SpecError naming the field at fault."""
    meta = job.get("metadata") or {}
    _check_name(meta)
    spec = job.get("spec")
    if not isinstance(spec, dict):
        raise SpecError("spec: missing")
    given = {}
    _walk(spec, "", given)
    for f in FIELDS:
        if f.path in given:
            _check_field(f, given[f.path])
        elif f.required:
            raise SpecError(f"spec.{f.path}: required")
    values = {f.path: f.default for f in FIELDS if f.default is not None}
    values.update(given)
    if values.get("trainer.command") is None:
        for k, default in BUILTIN_DEFAULTS.items():
            values.setdefault(f"trainer.{k}", default)
    _check_trainer(values)
    _check_data(values)
    if values.get("trainer.replicas") is None:
        # Start where the autoscaler would admit the job: its minimum, at least one trainer.
        values["trainer.replicas"] = min(max(values["trainer.minReplicas"], 1), values["trainer.maxReplicas"])
    if values.get("trainer.resources") is None:
        values["trainer.resources"] = DEFAULT_TRAINER_RESOURCES
    return JobSpec(namespace=meta.get("namespace", ""), name=meta["name"], uid=meta.get("uid", ""),
                   generation=int(meta.get("generation") or 0), values=values)
