"""Renders a kustomization without kubectl: the subset of kustomize that k8s/ uses.

`make test` runs on a fresh Debian 12 machine, where no kubectl with a recent
kustomize is packaged (Debian's kubernetes-client embeds kustomize v2, which lacks
`replicas` and `patches`). So the test renders k8s/overlays/* itself, supporting only
what the manifests use -- `resources` (files and folders), `patches` (strategic-merge
files, matched by kind and name; `key: null` removes a field and `$patch: delete` an item
of a list merged by name), `images` and `replicas` -- and refuses anything else, so a
manifest change that needs more fails here instead of rendering wrongly.
When a kubectl with kustomize v4+ is installed, the test also checks that this
renderer and kubectl agree.
"""

import copy
from pathlib import Path

import yaml

SUPPORTED_FIELDS = {"apiVersion", "kind", "resources", "patches", "images", "replicas"}
SCALABLE_KINDS = {"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"}
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job"}

# Lists that strategic merge patches merge item by item (keyed by `name`) rather than
# replace, per the Kubernetes API's patchMergeKey for these fields.
MERGE_BY_NAME = {"containers", "initContainers", "env", "volumes", "volumeMounts", "imagePullSecrets"}


class RenderError(Exception):
    pass


def load_documents(path):
    """Every non-empty YAML document of a file."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def strategic_merge(base, patch, field=None):
    """Merges `patch` into `base` like a strategic merge patch. The one directive is
    `$patch: delete` on an item of a list merged by name (MERGE_BY_NAME): the item of that
    name is removed. Kubernetes matches volumeMounts by mountPath, so such an item names
    both, and the test's comparison with `kubectl kustomize` checks that they agree.
    A list merged by name comes out as kustomize (v5) writes it: the patch's items first,
    in the patch's order (merged into the base's item of the same name, if any), then the
    base's other items in their order."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if key.startswith("$"):
                raise RenderError(f"patch directive {key}: {value!r} is not supported here")
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = strategic_merge(out[key], value, key)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if field in MERGE_BY_NAME and isinstance(base, list) and isinstance(patch, list):
        rest = [copy.deepcopy(item) for item in base]
        first = []
        for item in patch:
            if not isinstance(item, dict) or "name" not in item:
                raise RenderError(f"patch item of '{field}' has no name: {item!r}")
            at = [i for i, have in enumerate(rest) if have.get("name") == item["name"]]
            directive = item.get("$patch")
            if directive is not None:
                if directive != "delete":
                    raise RenderError(f"patch item of '{field}': $patch: {directive!r} is not supported here")
                if not at:
                    raise RenderError(f"patch deletes {item['name']!r} from '{field}', which has none of that name")
                del rest[at[0]]
            elif at:
                first.append(strategic_merge(rest.pop(at[0]), item))
            else:
                first.append(copy.deepcopy(item))
        return first + rest
    return copy.deepcopy(patch)


def _split_image(image):
    """'reg:5000/app:1.0' -> ('reg:5000/app', ':1.0'); the tag or digest keeps its mark."""
    if "@" in image:
        name, digest = image.split("@", 1)
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def _set_images(pod_spec, rules):
    for key in ("containers", "initContainers"):
        for container in pod_spec.get(key, []):
            name, suffix = _split_image(container.get("image", ""))
            for rule in rules:
                if rule.get("name") != name:
                    continue
                new_name = rule.get("newName", name)
                if "digest" in rule:
                    suffix = "@" + rule["digest"]
                elif "newTag" in rule:
                    suffix = ":" + str(rule["newTag"])
                container["image"] = new_name + suffix


def _find(objects, kind, name, what):
    """The index of the one object of `kind` named `name`."""
    found = [i for i, o in enumerate(objects) if o.get("kind") == kind and o.get("metadata", {}).get("name") == name]
    if len(found) != 1:
        raise RenderError(f"{what}: {len(found)} objects of kind {kind} named {name!r} (need exactly 1)")
    return found[0]


def render(directory):
    """The objects the kustomization in `directory` produces, as plain dicts."""
    directory = Path(directory)
    kfile = directory / "kustomization.yaml"
    if not kfile.is_file():
        raise RenderError(f"{directory}: no kustomization.yaml")
    (k,) = load_documents(kfile)
    unknown = set(k) - SUPPORTED_FIELDS
    if unknown:
        raise RenderError(f"{kfile}: fields {sorted(unknown)} are not supported by tests/k8s/kustomize_lite.py")

    objects = []
    for resource in k.get("resources", []):
        path = (directory / resource).resolve()
        if path.is_dir():
            objects.extend(render(path))
        elif path.is_file():
            objects.extend(load_documents(path))
        else:
            raise RenderError(f"{kfile}: resource {resource!r} does not exist")

    for entry in k.get("patches", []):
        if set(entry) != {"path"}:
            raise RenderError(f"{kfile}: only file patches ('path') are supported, got {entry!r}")
        for patch in load_documents(directory / entry["path"]):
            name = patch.get("metadata", {}).get("name")
            at = _find(objects, patch.get("kind"), name, f"{kfile}: patch {entry['path']}")
            objects[at] = strategic_merge(objects[at], patch)

    for rule in k.get("replicas", []):
        matches = [o for o in objects if o["kind"] in SCALABLE_KINDS and o["metadata"]["name"] == rule["name"]]
        if not matches:
            raise RenderError(f"{kfile}: replicas for {rule['name']!r}: no such workload")
        for o in matches:
            o["spec"]["replicas"] = int(rule["count"])

    rules = k.get("images", [])
    for o in objects:
        if o["kind"] in POD_TEMPLATE_KINDS:
            _set_images(o["spec"]["template"]["spec"], rules)
    return objects
