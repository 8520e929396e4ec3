"""Checks of tests/k8s/kustomize_lite.py's strategic merge where the manifests depend on
its details: a list merged by name comes out in kustomize's order, `$patch: delete`
removes an item, and any other directive is refused. (With a kubectl whose kustomize is
v4+, test_manifests.py also compares every rendered kustomization with kubectl's.)

Run by ctest with the rest of tests/k8s (`python3 -m pytest -q tests/k8s`).
"""
import pytest

import kustomize_lite


def _container(env=None, mounts=None):
    return {"spec": {"containers": [{"name": "c", "env": env or [], "volumeMounts": mounts or []}]}}


def test_a_list_merged_by_name_puts_the_patchs_items_first_as_kustomize_does():
    base = _container(env=[{"name": n, "value": "1"} for n in "ABCD"])
    patch = _container(env=[{"name": "C", "value": "30"}, {"name": "NEW", "value": "n"}, {"name": "B", "value": "20"}])
    out = kustomize_lite.strategic_merge(base, patch)
    # What `kubectl kustomize` (kustomize v5.5) writes for the same base and patch.
    assert out["spec"]["containers"][0]["env"] == [
        {"name": "C", "value": "30"}, {"name": "NEW", "value": "n"}, {"name": "B", "value": "20"},
        {"name": "A", "value": "1"}, {"name": "D", "value": "1"}]


def test_patch_delete_removes_the_named_item_and_keeps_the_order_of_the_rest():
    base = _container(mounts=[{"name": v, "mountPath": f"/{v}"} for v in ("v1", "v2", "v3")])
    patch = _container(mounts=[{"name": "v2", "mountPath": "/v2", "$patch": "delete"}])
    out = kustomize_lite.strategic_merge(base, patch)
    assert out["spec"]["containers"][0]["volumeMounts"] == [{"name": "v1", "mountPath": "/v1"},
                                                            {"name": "v3", "mountPath": "/v3"}]


def test_null_removes_a_field():
    out = kustomize_lite.strategic_merge({"spec": {"a": 1, "b": 2}}, {"spec": {"a": None}})
    assert out == {"spec": {"b": 2}}


@pytest.mark.parametrize("patch, message", [
    (_container(mounts=[{"name": "v9", "$patch": "delete"}]), "which has none of that name"),
    (_container(mounts=[{"name": "v1", "$patch": "replace"}]), "is not supported"),
    ({"spec": {"$patch": "replace"}}, "is not supported"),
    ({"spec": {"$setElementOrder/containers": [{"name": "c"}]}}, "is not supported"),
])
def test_other_directives_and_deleting_what_is_not_there_are_refused(patch, message):
    base = _container(mounts=[{"name": "v1", "mountPath": "/v1"}])
    with pytest.raises(kustomize_lite.RenderError, match=message):
        kustomize_lite.strategic_merge(base, patch)
