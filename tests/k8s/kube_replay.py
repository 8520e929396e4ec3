"""The replayed API server and the driver under test, shared by test_kube_driver.py (the
driver's decisions) and test_kube_driver_cli.py (what it shows, its command line and
manifests): see test_kube_driver.py for what the recordings are and are not."""

import copy
import json
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
try:
    import paddle_like  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "build" / "python"))
    import paddle_like  # noqa: F401

from kubernetes import client as k8s_client

from paddle_like import elastic
from paddle_like.elastic import kube_driver

from json_http import serve_json

RECORDED = Path(__file__).resolve().parent / "recorded"
SETTLE_MS, COOLDOWN_MS = 10_000, 30_000
A, B = "team-a/pl-trainer", "team-b/ctr-trainer"
SCALE_A = "/apis/apps/v1/namespaces/team-a/deployments/pl-trainer/scale"
SCALE_B = "/apis/apps/v1/namespaces/team-b/deployments/ctr-trainer/scale"


# ---------------------------------------------------------------- the replayed API server

def recording(name):
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))["exchanges"]


class ReplayApiServer:
    """Answers from recorded exchanges, keyed by (method, path, query). `load` replaces
    the exchanges of the same requests, so a test changes the cluster between ticks by
    loading another recording. Every request is kept in `requests`."""

    def __init__(self):
        self._routes = {}
        self.requests = []
        self._lock = threading.Lock()
        self._server = serve_json(self._answer)
        self.port = self._server.server_address[1]
        self.url = self._server.url

    @staticmethod
    def _key(method, path, query):
        return method, path, tuple(sorted(query.items()))

    def load(self, *names):
        with self._lock:
            for name in names:
                for ex in recording(name):
                    r = ex["request"]
                    self._routes[self._key(r["method"], r["path"], r["query"])] = copy.deepcopy(ex["response"])

    def _answer(self, request):
        with self._lock:
            self.requests.append(request)
            response = self._routes.get(self._key(request["method"], request["path"], request["query"]))
            if response is None:
                return 404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": f"not in the recording: {request['method']} {request['path']} "
                                        f"{request['query']}", "reason": "NotFound", "code": 404}
            body = copy.deepcopy(response["body"])
            if request["method"] == "PATCH" and response["status"] == 200:
                replicas = request["body"]["spec"]["replicas"]
                body["spec"]["replicas"] = replicas
                self._edit_deployment(body["metadata"]["namespace"], body["metadata"]["name"], replicas)
            return response["status"], body

    def _lists(self, kind):
        return [r["body"] for (method, _, _), r in self._routes.items()
                if method == "GET" and r["body"].get("kind") == kind]

    def _edit_deployment(self, namespace, name, replicas):
        """What the API server does on a scale PATCH: the Deployment's spec follows."""
        for body in self._lists("DeploymentList"):
            for d in body["items"]:
                if (d["metadata"]["namespace"], d["metadata"]["name"]) == (namespace, name):
                    d["spec"]["replicas"] = replicas

    def set_replicas(self, namespace, name, replicas):
        """Someone else scales a Deployment (kubectl scale)."""
        with self._lock:
            self._edit_deployment(namespace, name, replicas)

    def edit_items(self, kind, fn):
        """Replaces the items of every served list of `kind` by fn(items)."""
        with self._lock:
            for body in self._lists(kind):
                body["items"] = fn(body["items"])

    def take(self, method=None):
        """The requests since the last take (of `method` only, if given)."""
        with self._lock:
            taken, self.requests = self.requests, []
        return [r for r in taken if method is None or r["method"] == method]

    def close(self):
        self._server.shutdown()
        self._server.server_close()


class FakeClock:
    def __init__(self):
        self.ms = 1_000_000

    def __call__(self):
        return self.ms

    def advance(self, ms):
        self.ms += ms


@pytest.fixture
def api():
    server = ReplayApiServer()
    server.load("deployments.json", "nodes.json", "pods.json", "scale.json")
    yield server
    server.close()


def make_driver(api, namespace=None, writer=None, clock=None):
    configuration = k8s_client.Configuration(host=api.url)
    policy = elastic.ElasticPolicy(cooldown_ms=COOLDOWN_MS, settle_ms=SETTLE_MS)
    clock = clock or FakeClock()
    return kube_driver.KubeDriver(k8s_client.ApiClient(configuration), policy, namespace=namespace,
                                  clock=clock, writer=writer), clock


def patches(requests):
    return {r["path"]: r["body"]["spec"]["replicas"] for r in requests if r["method"] == "PATCH"}


def targets(plan):
    return {d.name: d.target for d in plan.jobs}


def grown(api, capsys=None):
    """A driver past its first two ticks: adopted at 2 + 2, then grown to 6 + 4."""
    driver, clock = make_driver(api)
    driver.tick()
    clock.advance(SETTLE_MS)
    plan = driver.tick()
    assert targets(plan) == {A: 6, B: 4}
    api.take()
    if capsys is not None:
        capsys.readouterr()
    return driver, clock
