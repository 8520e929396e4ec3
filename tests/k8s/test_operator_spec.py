"""The PaddleLikeJob's fields as the operator reads them (python/paddle_like/k8s/job_spec.py)
against the CRD (k8s/cluster/crd.yaml): the same fields with the same types, enums and
bounds; the defaults it fills in; and the specs it refuses, each with a message that
starts with the field at fault.

Needs the built package (paddle_like imports its extension): ctest k8s_operator.
"""

import copy
import importlib.util
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("paddle_like") is None:  # run by hand: the build tree's package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "build" / "python"))

from paddle_like.k8s import job_spec
from paddle_like.k8s.job_spec import FIELDS, SpecError, parse

import manifests
import openapi_lite
from test_job_resources import schema


def _leaves(node, prefix=""):
    """{path under spec: its schema} of every field the CRD declares (objects with
    properties are walked into; the rest are fields)."""
    out = {}
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        if sub.get("type") == "object" and "properties" in sub and path not in {f.path for f in FIELDS}:
            out.update(_leaves(sub, path))
        else:
            out[path] = sub
    return out


def _required(node, prefix=""):
    out = set()
    for name in node.get("required", []):
        out.add(f"{prefix}.{name}" if prefix else name)
    for name, sub in node.get("properties", {}).items():
        if sub.get("type") == "object":
            out |= _required(sub, f"{prefix}.{name}" if prefix else name)
    return out


def test_the_crd_declares_exactly_the_fields_the_operator_reads():
    crd_spec = schema()["properties"]["spec"]
    leaves = _leaves(crd_spec)
    assert sorted(leaves) == sorted(f.path for f in FIELDS), (
        f"only in the CRD: {sorted(set(leaves) - {f.path for f in FIELDS})}; "
        f"only in job_spec.FIELDS: {sorted({f.path for f in FIELDS} - set(leaves))}")
    for f in FIELDS:
        s = leaves[f.path]
        assert s["type"] == f.type, f.path
        assert tuple(s.get("enum", ())) == f.enum, f.path
        assert s.get("minimum") == f.minimum and s.get("maximum") == f.maximum, f.path
        assert bool(s.get("exclusiveMinimum")) == f.exclusive_minimum, f.path
        if f.items:
            assert s["items"]["type"] == f.items, f.path
    # A required field's parents are required too (data for data.train).
    assert {p for p in _required(crd_spec) if p in {f.path for f in FIELDS}} == {f.path for f in FIELDS if f.required}


def _job(spec=None, name="mnist"):
    base = {"image": "registry.example.com/paddle-like:0.1.0",
            "data": {"claimName": "fm", "train": "/data/fm/train.plrec", "test": "/data/fm/test.plrec"}}
    return {"apiVersion": "paddle-like.dev/v1", "kind": "PaddleLikeJob",
            "metadata": {"name": name, "namespace": "team-a", "uid": "u-1", "generation": 3},
            "spec": spec if spec is not None else base}


def test_defaults_fill_every_field_the_objects_need():
    s = parse(_job())
    assert (s.name, s.namespace, s.uid, s.generation) == ("mnist", "team-a", "u-1", 3)
    assert s.master_address == "mnist-master-0.mnist-master:7000"
    assert s.builtin_trainer
    expected = {"tls.certificates": "CertManager", "master.passes": 1, "pserver.shards": 2, "pserver.copies": 2,
                "trainer.minReplicas": 1, "trainer.maxReplicas": 16, "trainer.replicas": 1, "trainer.elastic": True,
                "trainer.priorityClassName": "pl-trainer-preemptible", "trainer.model": "mlp",
                "trainer.optimizer": "adam", "trainer.lr": 0.001, "trainer.device": "cpu",
                "runPolicy.cleanPodPolicy": "All", "runPolicy.backoffLimit": 6, "runPolicy.maxFailedTasks": 0}
    assert {k: s[k] for k in expected} == expected
    assert s["trainer.resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}


def test_the_example_jobs_parse():
    for job in (o for o in manifests.objects("jobs/example") if o["kind"] == "PaddleLikeJob"):
        job["metadata"]["namespace"] = "team-a"
        s = parse(job)
        assert s["trainer.replicas"] == job["spec"]["trainer"]["replicas"]


def _with(change):
    job = _job()
    change(job["spec"])
    return job


def _command(s):
    s["trainer"] = {"command": ["python3", "/job/train.py"]}


BAD = [
    (lambda s: s["trainer"].update(minReplicas=5, maxReplicas=2) if "trainer" in s else
     s.update(trainer={"minReplicas": 5, "maxReplicas": 2}),
     "spec.trainer.minReplicas: 5 is above spec.trainer.maxReplicas (2)"),
    (lambda s: s.update(trainer={"replicas": 20}),
     "spec.trainer.replicas: 20 is outside [minReplicas 1, maxReplicas 16]"),
    (lambda s: s.update(trainer={"maxReplicas": 0}), "spec.trainer.maxReplicas: 0 is below 1"),
    (lambda s: s.update(trainer={"model": "resnet"}), "spec.trainer.model: 'resnet' is not one of mlp, cnn, ctr"),
    (lambda s: s.update(trainer={"lr": 0}), "spec.trainer.lr: 0 is not above 0"),
    (lambda s: s.update(trainer={"elastic": "yes"}), "spec.trainer.elastic: 'yes' is not of type boolean"),
    (lambda s: s.update(pserver={"shards": True}), "spec.pserver.shards: True is not of type integer"),
    (lambda s: s.update(pserver={"copies": 4}), "spec.pserver.copies: 4 is above 3"),
    (lambda s: s.update(master={"pases": 3}), "spec.master.pases: unknown field"),
    (lambda s: s.update(master=3), "spec.master: 3 is not an object"),
    (lambda s: s.pop("image"), "spec.image: required"),
    (lambda s: s["data"].pop("claimName"), "spec.data.claimName: required for spec.data.train"),
    (lambda s: s["data"].update(train="/mnt/train.plrec"), "spec.data.train: '/mnt/train.plrec' is not under /data/"),
    (lambda s: s["data"].update(train="indices:60000"), "spec.data.train: 'indices:60000' cuts the job into sample"),
    (lambda s: (_command(s), s["data"].update(train="indices:6e4")), "spec.data.train: 'indices:6e4': write indices:N"),
    (lambda s: (_command(s), s["trainer"].update(model="mlp")), "spec.trainer.model: a setting of the built-in"),
    (lambda s: (_command(s), s["trainer"].update(command=[])), "spec.trainer.command: empty"),
    (lambda s: (_command(s), s["trainer"].update(env=[{"name": "PL_MASTER_ADDR", "value": "x"}])),
     "spec.trainer.env[0]: PL_MASTER_ADDR is set by the operator"),
    (lambda s: (_command(s), s["trainer"].update(env=[{"name": "A B"}])), "spec.trainer.env[0]: {'name': 'A B'}"),
    (lambda s: s.update(trainer={"args": ["--model=cnn"]}), "spec.trainer.args[0]: --model is set by the operator"),
    (lambda s: s.update(trainer={"args": ["-v"]}), "spec.trainer.args[0]: '-v': write pl-trainer flags as"),
    (lambda s: s.update(trainer={"scriptConfigMap": "x"}), "spec.trainer.scriptConfigMap: only for a command"),
    (lambda s: s.update(trainer={"resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}),
     "spec.trainer.resources.requests.cpu: required"),
    (lambda s: s.update(trainer={"device": "gpu"}), "spec.trainer.device: gpu, but spec.trainer.resources.limits"),
    (lambda s: s.update(runPolicy={"cleanPodPolicy": "None"}), "spec.runPolicy.cleanPodPolicy: 'None' is not one of"),
    (lambda s: s.update(tls={"certificates": "SelfSigned"}), "spec.tls.certificates: 'SelfSigned' is not one of"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m.split(":")[0] + "/" + str(i) for i, (_, m) in enumerate(BAD)])
def test_a_bad_spec_is_refused_naming_the_field(change, message):
    with pytest.raises(SpecError) as e:
        parse(_with(change))
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("name, ok", [("mnist", True), ("a" * job_spec.MAX_NAME_LENGTH, True),
                                      ("a" * (job_spec.MAX_NAME_LENGTH + 1), False), ("Mnist", False),
                                      ("1mnist", False), ("mnist-", False), ("mn.ist", False)])
def test_job_names_that_name_services_and_statefulsets(name, ok):
    if ok:
        assert parse(_job(name=name)).name == name
    else:
        with pytest.raises(SpecError, match=r"^metadata\.name: "):
            parse(_job(name=name))


def test_what_the_schema_admits_the_operator_may_still_refuse_and_says_why():
    # minReplicas > maxReplicas passes the CRD's schema (no rule between fields there):
    # the operator's check is what reports it (the job's Failed condition, InvalidSpec).
    job = _with(lambda s: s.update(trainer={"minReplicas": 5, "maxReplicas": 2}))
    assert not openapi_lite.validate(copy.deepcopy(job), schema())
    with pytest.raises(SpecError, match="minReplicas"):
        parse(job)
