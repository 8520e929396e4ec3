"""Validates an object against a CRD's openAPIV3Schema without an API server: the subset
of OpenAPI v3 (and of Kubernetes' structural-schema extensions) that k8s/cluster/crd.yaml
uses, and nothing more.

`check_schema(schema)` refuses a schema that uses a keyword this module does not
implement, or that is not structural (every node says its type), so a CRD change that
needs more fails the test instead of being waved through. `validate(obj, schema)`
returns the problems an API server would report for a custom resource, each naming the
path: a wrong type, a value outside an enum or bound, a missing required field, and (what
the API server would silently prune) a field the schema does not know.
"""

import re

IMPLEMENTED = {"type", "properties", "required", "items", "additionalProperties", "enum", "minimum", "maximum",
               "exclusiveMinimum", "description", "format", "x-kubernetes-int-or-string",
               "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float)}
FORMATS = {"int64": None, "date-time": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")}


def check_schema(schema, path="openAPIV3Schema"):
    """Problems with the schema itself (a list; empty when fine)."""
    problems = []
    unknown = set(schema) - IMPLEMENTED
    if unknown:
        problems.append(f"{path}: keywords {sorted(unknown)} are not implemented by tests/k8s/openapi_lite.py")
    if "type" not in schema and not schema.get("x-kubernetes-int-or-string") \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{path}: no type (a structural schema gives every node one)")
    if "type" in schema and schema["type"] not in TYPES:
        problems.append(f"{path}: type {schema['type']!r}")
    if schema.get("format") is not None and schema["format"] not in FORMATS:
        problems.append(f"{path}: format {schema['format']!r} is not implemented")
    for name, sub in (schema.get("properties") or {}).items():
        problems += check_schema(sub, f"{path}.{name}")
    for field in ("required",):
        for name in schema.get(field, []):
            if name not in (schema.get("properties") or {}):
                problems.append(f"{path}: required {name!r} is not among its properties")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += check_schema(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        problems += check_schema(schema["items"], f"{path}[]")
    if schema.get("type") == "array" and "items" not in schema:
        problems.append(f"{path}: an array without items")
    return problems


def _type_ok(value, type_):
    if type_ in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, TYPES[type_])


def validate(value, schema, path=""):
    """Problems of `value` against `schema` (a list of "path: what" lines)."""
    where = path or "<root>"
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return [f"{where}: {value!r} is neither an integer nor a string"]
        return []
    type_ = schema.get("type")
    if type_ is not None and not _type_ok(value, type_):
        return [f"{where}: {value!r} is not of type {type_}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            problems.append(f"{where}: {value} is below {'or at ' if schema.get('exclusiveMinimum') else ''}{low}")
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(f"{where}: {value} is above {schema['maximum']}")
    pattern = FORMATS.get(schema.get("format"))
    if pattern is not None and not pattern.fullmatch(value):
        problems.append(f"{where}: {value!r} is not a {schema['format']}")
    if type_ == "object":
        props = schema.get("properties") or {}
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{path}.{name}: required" if path else f"{name}: required")
        for name, sub in value.items():
            sub_path = f"{path}.{name}" if path else name
            if name in props:
                problems += validate(sub, props[name], sub_path)
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += validate(sub, schema["additionalProperties"], sub_path)
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and props:
                problems.append(f"{sub_path}: unknown field (the API server would prune it)")
    if type_ == "array":
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}[{i}]")
        if schema.get("x-kubernetes-list-type") == "map":
            keys = [tuple(item.get(k) for k in schema.get("x-kubernetes-list-map-keys", [])) for item in value]
            if len(keys) != len(set(keys)):
                problems.append(f"{where}: duplicate map keys {keys}")
    return problems


def crd_schema(crd, version):
    """The openAPIV3Schema of one version of a CustomResourceDefinition."""
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    raise KeyError(f"CRD {crd['metadata']['name']} has no version {version}")
