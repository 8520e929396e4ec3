"""Offline checks of the replicated pservers in k8s/ (see test_manifests.py for the rest):
every shard has --replicas copies, one per pserver StatefulSet, identical but for their
replica label, never adopting each other's Pods, kept off each other's nodes by a
required podAntiAffinity, and each checkpointing to its own claim.

Run by ctest with the rest of tests/k8s (`python3 -m pytest -q tests/k8s`).
"""
import json

import pytest

import test_manifests as m

REPLICA_LABEL = "paddle-like.dev/replica"


def _anti_affinity_terms(sts):
    anti = sts["spec"]["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
    return anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])


def _without_replica_identity(sts):
    """The Pod template less what tells the copies apart: their label and anti-affinity."""
    template = json.loads(json.dumps(sts["spec"]["template"]))
    template["metadata"]["labels"].pop(REPLICA_LABEL, None)
    template["spec"].pop("affinity", None)
    return template


@pytest.mark.parametrize("target", m.TARGETS)
def test_every_shard_has_replicas_that_never_share_a_node(target):
    objs = m.objects(target)
    sets = m.containers_running(objs, "pl-pserver")
    replicas = {m.flag_values(m.resolved_args(o, c, objs)).get("replicas") for o, c in sets}
    assert len(replicas) == 1, f"k8s/{target}: the pserver sets disagree on --replicas: {replicas}"
    declared = int(replicas.pop() or 1)
    assert declared == len(sets), (
        f"k8s/{target}: --replicas={declared} but {len(sets)} pserver StatefulSets run the copies")
    assert declared >= 2, f"k8s/{target}: a shard needs a second copy to survive its Pod's loss"
    counts = {o["spec"]["replicas"] for o, _ in sets}
    assert len(counts) == 1, f"k8s/{target}: the pserver sets have different replica counts {counts}"
    reference = _without_replica_identity(sets[0][0])
    for o, c in sets:
        assert _without_replica_identity(o) == reference, (
            f"k8s/{target}: {m.where(o)} runs a different pserver than {m.where(sets[0][0])}")
        # Each copy has its own claim: backups must write checkpoints too.
        assert m.flag_values(m.resolved_args(o, c, objs)).get("replica_checkpoints") == "true", m.where(o, c)
    for o, _ in sets:
        own = o["spec"]["template"]["metadata"]["labels"]
        others = [x for x, _ in sets if x is not o]
        assert not any(m._selects(o["spec"]["selector"]["matchLabels"], x["spec"]["template"]["metadata"]["labels"])
                       for x in others), f"{m.where(o)}'s selector would adopt another set's Pods"
        terms = [t for t in _anti_affinity_terms(o) if t.get("topologyKey") == "kubernetes.io/hostname"]
        for x in others:
            labels = x["spec"]["template"]["metadata"]["labels"]
            assert any(m._selects(t["labelSelector"]["matchLabels"], labels) for t in terms), (
                f"{m.where(o)} may share a node with {m.where(x)}: no required podAntiAffinity on the hostname")
        assert not any(m._selects(t["labelSelector"]["matchLabels"], own) for t in terms), (
            f"{m.where(o)} repels its own Pods: P shards would need P nodes per copy")
