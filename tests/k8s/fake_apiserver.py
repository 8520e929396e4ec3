"""A stand-in for a Kubernetes API server, for the operator's tests (test_operator.py).

No API server can run here (no cluster, no kind, no network), so the operator is run
against this: a local http.server on 127.0.0.1 that the official `kubernetes` client
talks to like to a real one. It holds objects in memory and does what an API server
does with the calls the operator makes, and nothing more:

  - GET of a collection (namespaced or cluster-wide) lists the stored objects of that
    resource, filtered by an equality labelSelector (a=b,c=d), as a <Kind>List whose
    items carry no apiVersion/kind (as the API server writes lists of built-in kinds;
    items of a custom resource's list do carry them);
  - POST stores the object with uid, resourceVersion, generation and
    creationTimestamp, answers 201 with it, or 409 AlreadyExists;
  - PATCH applies a JSON merge patch (the operator's strategic-merge patches touch maps
    only, where both kinds agree); on .../status it changes only the status;
  - DELETE removes the object (200), or answers 404 NotFound.

Recorded exchanges (tests/k8s/recorded/operator/*.json, hand-written in the shape of a
v1.29 API server's answers) come first: `answer(...)` makes a request (method, path,
query) get a recorded response instead (a 403, a 404 for a resource nobody serves);
`seed(...)` loads a recorded list answer's items into the store (the cluster as it is
before the test). Every request is kept in `requests`.
"""

import copy
import json
import threading
import uuid
from pathlib import Path

from json_http import serve_json

RECORDED = Path(__file__).resolve().parent / "recorded" / "operator"
KINDS = {"services": "Service", "pods": "Pod", "statefulsets": "StatefulSet", "deployments": "Deployment",
         "networkpolicies": "NetworkPolicy", "poddisruptionbudgets": "PodDisruptionBudget", "issuers": "Issuer",
         "certificates": "Certificate", "paddlelikejobs": "PaddleLikeJob"}
CUSTOM_GROUPS = {"paddle-like.dev", "cert-manager.io"}


def recording(name):
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))["exchanges"]


def parse_path(path):
    """(apiVersion, namespace or None, plural, name or None, subresource or None)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        api_version, rest = parts[1], parts[2:]
    else:
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    return (api_version, namespace, rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)


def merge_patch(target, patch):
    """RFC 7386: maps merge, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                  "reason": reason, "code": code}


def _selected(obj, selector):
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def unknown_fields(ours, theirs, path=""):
    """Fields of a recorded body that the client's typed model does not know (it drops
    them); `theirs` is the body decoded and serialised again. Timestamps may come back
    in another spelling and nulls dropped: neither counts."""
    out = []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key, value in ours.items():
            if value is None:
                continue
            if key not in theirs:
                out.append(f"{path}.{key}")
            else:
                out += unknown_fields(value, theirs[key], f"{path}.{key}")
    elif isinstance(ours, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            out += unknown_fields(a, b, f"{path}[{i}]")
    return out


class FakeApiServer:
    """The objects of a cluster behind the Kubernetes REST API. Thread-safe: the server
    answers on its own threads, tests read and change the store under the same lock."""

    def __init__(self):
        self.objects = {}      # (apiVersion, namespace, plural, name) -> object
        self.requests = []
        self._answers = {}     # (method, path, query) -> recorded response
        self._version = 1000
        self.lock = threading.RLock()
        self._server = serve_json(self._answer)
        self.url = self._server.url

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------ what tests do

    def answer(self, *names):
        """Recorded responses for the requests of these recordings, from now on."""
        with self.lock:
            for name in names:
                for ex in recording(name):
                    r = ex["request"]
                    self._answers[(r["method"], r["path"], tuple(sorted(r["query"].items())))] = ex["response"]

    def forget_answers(self):
        with self.lock:
            self._answers.clear()

    def seed(self, *names):
        """Stores the items of the recorded list answers (the cluster before the test)."""
        with self.lock:
            for name in names:
                for ex in recording(name):
                    api_version, _, plural, _, _ = parse_path(ex["request"]["path"])
                    for item in ex["response"]["body"]["items"]:
                        meta = item["metadata"]
                        self.objects[(api_version, meta["namespace"], plural, meta["name"])] = copy.deepcopy(item)

    def get(self, api_version, namespace, plural, name):
        with self.lock:
            return copy.deepcopy(self.objects.get((api_version, namespace, plural, name)))

    def put(self, api_version, plural, obj):
        """Changes the cluster behind the operator's back (a user, a controller)."""
        with self.lock:
            meta = obj["metadata"]
            self.objects[(api_version, meta["namespace"], plural, meta["name"])] = copy.deepcopy(obj)

    def remove(self, api_version, namespace, plural, name):
        with self.lock:
            self.objects.pop((api_version, namespace, plural, name), None)

    def clear(self, plural):
        with self.lock:
            for key in [k for k in self.objects if k[2] == plural]:
                del self.objects[key]

    def names(self, plural, namespace=None):
        with self.lock:
            return sorted(name for (_, ns, p, name) in self.objects if p == plural and namespace in (None, ns))

    def take(self, method=None):
        """The requests since the last take (of `method` only, if given)."""
        with self.lock:
            taken, self.requests = self.requests, []
        return [r for r in taken if method is None or r["method"] == method]

    # ------------------------------------------------------------ what the API server does

    def _answer(self, request):
        with self.lock:
            self.requests.append(request)
            recorded = self._answers.get((request["method"], request["path"], tuple(sorted(request["query"].items()))))
            if recorded is not None:
                return recorded["status"], copy.deepcopy(recorded["body"])
            api_version, namespace, plural, name, sub = parse_path(request["path"])
            if plural not in KINDS:
                return _status(404, "NotFound", f"the server could not find the requested resource ({plural})")
            key = (api_version, namespace, plural, name)
            method = request["method"]
            if method == "GET" and name is None:
                return 200, self._list(api_version, namespace, plural, request["query"].get("labelSelector"))
            if method == "POST" and name is None:
                return self._create(api_version, namespace, plural, request["body"])
            if key not in self.objects:
                return _status(404, "NotFound", f'{plural} "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(self.objects[key])
            if method == "PATCH":
                patch = request["body"]
                if sub == "status":
                    patch = {"status": patch.get("status")}
                self.objects[key] = merge_patch(self.objects[key], patch)
                self._bump(self.objects[key])
                return 200, copy.deepcopy(self.objects[key])
            if method == "DELETE":
                del self.objects[key]
                return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                             "details": {"name": name, "kind": plural}}
            return _status(405, "MethodNotAllowed", f"{method} is not handled by tests/k8s/fake_apiserver.py")

    def _bump(self, obj):
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    def _list(self, api_version, namespace, plural, selector):
        custom = api_version.split("/")[0] in CUSTOM_GROUPS
        items = []
        for (v, ns, p, _), obj in sorted(self.objects.items()):
            if v == api_version and p == plural and namespace in (None, ns) and _selected(obj, selector):
                item = copy.deepcopy(obj)
                if not custom:
                    item.pop("apiVersion", None)
                    item.pop("kind", None)
                items.append(item)
        self._version += 1
        return {"kind": KINDS[plural] + "List", "apiVersion": api_version,
                "metadata": {"resourceVersion": str(self._version)}, "items": items}

    def _create(self, api_version, namespace, plural, body):
        name = body["metadata"]["name"]
        key = (api_version, namespace, plural, name)
        if key in self.objects:
            return _status(409, "AlreadyExists", f'{plural} "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()), generation=1,
                               creationTimestamp="2024-06-03T08:00:00Z")
        self._bump(obj)
        self.objects[key] = obj
        return 201, copy.deepcopy(obj)


class FakeMasters:
    """The jobs' masters' status pages (master/status_page.cc's /status.json), served on
    127.0.0.1 from recorded exchanges (recorded/operator/masters_*.json) at
    /<namespace>/<job>/status.json; `url(namespace, name)` is the operator's master_url.
    A page not loaded answers 503, as a master that is not serving yet would fail."""

    def __init__(self):
        self.pages = {}
        self.lock = threading.Lock()
        self._server = serve_json(self._page)
        self.base = self._server.url

    def _page(self, request):
        with self.lock:
            page = self.pages.get(request["path"]) if request["method"] == "GET" else None
        return (200, page) if page is not None else (503, {"error": "not serving"})

    def url(self, namespace, name):
        return f"{self.base}/{namespace}/{name}/status.json"

    def load(self, *names):
        with self.lock:
            for name in names:
                for ex in recording(name):
                    self.pages[ex["request"]["path"]] = copy.deepcopy(ex["response"]["body"])

    def stop(self, namespace, name):
        with self.lock:
            self.pages.pop(f"/{namespace}/{name}/status.json", None)

    def close(self):
        self._server.shutdown()
        self._server.server_close()
