"""The PaddleLikeJob operator: turns each PaddleLikeJob into its master, pservers and
trainers, follows it to its end and stops its trainers then.

    python3 -m paddle_like.k8s.operator --all-namespaces --http_port 9106
    python3 -m paddle_like.k8s.operator --namespace team-a --once      # one pass, then exit

Every ``--period_s`` it
  1. lists, through the official Kubernetes client, the PaddleLikeJobs and the objects it
     made before (labelled app.kubernetes.io/managed-by=pl-operator): one list per kind,
     whatever the number of jobs;
  2. for every job that is not over: checks its spec (job_spec.py), creates the child
     objects that are missing (job_objects.py; never changes one that exists, but for
     the trainers' autoscaler bounds), reads the master's status page
     (http://J-master.NAMESPACE.svc:8080/status.json) and decides the job's status
     (job_status.py), which it writes to the status subresource when it changed;
  3. once a job is over (Succeeded or Failed): deletes its trainers' Deployment, so no
     trainer restarts after the job, and with spec.runPolicy.cleanPodPolicy All (the
     default) the master's and pservers' StatefulSets too. Their claims stay: the job's
     state and the pservers' last checkpoints.

It is level-triggered and keeps no state that matters: a restarted operator finds
everything in the cluster. A failed call is logged and retried at the next pass; when
a list fails, the pass decides nothing (a missing list must not read as "nothing exists"
and create everything again). One replica at a time (k8s/cluster/deployment.yaml).

Every call goes through one generic path (``_call``) for the eight kinds it handles, so
what it asks of the API server is a short list: tests/k8s/test_operator.py compares it
with k8s/cluster/clusterrole.yaml.

Thread-safety: ``JobOperator.tick`` runs on one thread; the masters' pages are read by a
small pool during a tick; the HTTP server's threads only read: the jobs' phases (a dict
the loop replaces under a lock) and the counters (integers, each read whole).
"""

import argparse
import collections
import concurrent.futures
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
import urllib3

# The log module's functions by name: the package's `log` attribute may be a tensor op.
from paddle_like.log import error as log_error, info as log_info, set_process_name
from paddle_like._periodic import run_ticks
from paddle_like.k8s import job_objects, job_status
from paddle_like.k8s.job_spec import (GROUP, JOB_LABEL, KIND, MANAGED_BY, OPERATOR_NAME, PLURAL, VERSION, SpecError,
                                      parse)
from paddle_like.k8s.job_tls import CERT_MANAGER_KINDS

__all__ = ["JobOperator", "main", "master_status_url"]

PAGE_SIZE = 500
REQUEST_TIMEOUT = (5, 60)  # (connect, read) seconds: a hung API server must not hang the loop
MANAGED = f"{MANAGED_BY}={OPERATOR_NAME}"
PLURALS = {"Service": "services", "StatefulSet": "statefulsets", "Deployment": "deployments",
           "NetworkPolicy": "networkpolicies", "PodDisruptionBudget": "poddisruptionbudgets", "Issuer": "issuers",
           "Certificate": "certificates", "Pod": "pods", KIND: PLURAL}
JOB_API = f"{GROUP}/{VERSION}"
# What a finished job keeps with cleanPodPolicy Trainers, and loses with All.
SERVER_KINDS = ("StatefulSet", "Service", "PodDisruptionBudget")
# A list's items carry no apiVersion: each kind's, from the kinds the operator makes.
API_VERSION = {kind: api_version for api_version, kind in job_objects.CHILD_KINDS}


def master_status_url(namespace, name):
    """The master's status page through its headless Service, from anywhere in the cluster."""
    return f"http://{name}-master.{namespace}.svc:{job_objects.HTTP_PORT}/status.json"


def _path(api_version, kind, namespace=None, name=None, subresource=None):
    path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{PLURALS[kind]}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


def api_error_text(e):
    if isinstance(e, ApiException):
        message = ""
        try:
            message = json.loads(e.body).get("message", "") if e.body else ""
        except (ValueError, AttributeError):
            pass
        return f"HTTP {e.status} {e.reason}" + (f": {message}" if message else "")
    return f"{type(e).__name__}: {e}"


class JobOperator:
    """Runs PaddleLikeJobs. `api_client`: a kubernetes.client.ApiClient; `namespace`:
    None for every namespace; `operator_namespace`: where the operator runs (the jobs'
    NetworkPolicies let its Pods read the status pages); `master_url(namespace, name)`:
    the URL of a job's master status page (tests point it at a replay); `clock`: seconds
    since the epoch (tests fake it)."""

    API_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)

    def __init__(self, api_client, namespace=None, operator_namespace="paddle-like-system", master_url=None,
                 clock=None, http_timeout_s=3.0):
        self._api = api_client
        self._namespace = namespace
        self._operator_namespace = operator_namespace
        self._master_url = master_url or master_status_url
        self._clock = clock or time.time
        self._http_timeout_s = http_timeout_s
        # Straight to the master: an http_proxy in the environment is for the outside world.
        self._http = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._said = {}              # job key -> the last (phase, reasons) logged
        self._last_api_error = None
        self._lock = threading.Lock()
        self.counters = collections.Counter()  # ticks, api_errors, created, deleted, status_updates
        self.phases = {}             # job key -> phase, for /metrics
        self._last_attempt = None

    # ------------------------------------------------------------ the API

    def _call(self, method, path, query=None, body=None, content_type="application/json"):
        resp = self._api.call_api(path, method, query_params=list((query or {}).items()),
                                  header_params={"Accept": "application/json", "Content-Type": content_type},
                                  body=body, auth_settings=["BearerToken"], _return_http_data_only=True,
                                  _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        return json.loads(resp.data) if resp.data else {}

    def _list(self, api_version, kind, selector=None):
        items, token = [], None
        while True:
            query = {"limit": PAGE_SIZE}
            if selector:
                query["labelSelector"] = selector
            if token:
                query["continue"] = token
            body = self._call("GET", _path(api_version, kind, self._namespace), query)
            items.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items

    def _observe(self):
        """(jobs, {(namespace, kind, name): child}, {job key: [pods]}, cert-manager served?)."""
        jobs = self._list(JOB_API, KIND)
        children = {}
        cert_manager = True
        wants_cert_manager = any(((j.get("spec") or {}).get("tls") or {}).get("certificates", "CertManager")
                                 == "CertManager" for j in jobs)
        for api_version, kind in job_objects.CHILD_KINDS:
            if kind in CERT_MANAGER_KINDS:
                if not wants_cert_manager or not cert_manager:
                    continue
                try:
                    items = self._list(api_version, kind, MANAGED)
                except ApiException as e:
                    if e.status != 404:
                        raise
                    cert_manager = False  # its CRDs are not installed: only the jobs that need it wait
                    continue
            else:
                items = self._list(api_version, kind, MANAGED)
            for o in items:
                children[(o["metadata"]["namespace"], kind, o["metadata"]["name"])] = o
        pods = collections.defaultdict(list)
        for p in self._list("v1", "Pod", MANAGED):
            job = (p["metadata"].get("labels") or {}).get(JOB_LABEL)
            pods[f"{p['metadata']['namespace']}/{job}"].append(p)
        return jobs, children, pods, cert_manager

    # ------------------------------------------------------------ one pass

    def tick(self):
        """Observe, act, write the jobs' status. Returns {job key: phase}, or None when
        the cluster could not be read (nothing done)."""
        self._last_attempt = time.monotonic()
        try:
            jobs, children, pods, cert_manager = self._observe()
        except self.API_ERRORS as e:
            self.counters["api_errors"] += 1
            text = api_error_text(e)
            if text != self._last_api_error:
                log_error(f"cannot read the cluster ({text}); doing nothing until it can")
                self._last_api_error = text
            return None
        if self._last_api_error is not None:
            log_info("the cluster can be read again")
            self._last_api_error = None

        specs = {}
        for job in jobs:
            try:
                specs[_key(job)] = (parse(job), None)
            except SpecError as e:
                specs[_key(job)] = (None, str(e))
        live = [j for j in jobs if not job_status.is_final(j.get("status")) and specs[_key(j)][0] is not None]
        pages = self._read_masters([j for j in live if (j["metadata"]["namespace"], "StatefulSet",
                                                         f"{j['metadata']['name']}-master") in children])
        phases = {}
        for job in jobs:
            key = _key(job)
            spec, error = specs[key]
            if job_status.is_final(job.get("status")):
                self._clean(job, children)
                phases[key] = job["status"].get("phase", "")
                continue
            create_error = None
            if spec is not None:
                create_error = self._create_missing(spec, children, cert_manager)
                self._sync_trainer_bounds(spec, children)
            master, master_error = pages.get(key, (None, "its master is not created yet"))
            status = job_status.decide(job, spec, error, create_error, master, master_error, pods.get(key, []),
                                       self._clock())
            self._write_status(job, status)
            phases[key] = status.get("phase", "")
            if job_status.is_final(status):
                self._clean(dict(job, status=status), children)
        self.counters["ticks"] += 1
        with self._lock:
            self.phases = phases
        return phases

    def _read_masters(self, jobs):
        """{job key: (status.json as a dict, None) or (None, why)} for every job, read in parallel."""
        def read(job):
            url = self._master_url(job["metadata"]["namespace"], job["metadata"]["name"])
            try:
                with self._http.open(url, timeout=self._http_timeout_s) as resp:
                    return _key(job), (json.loads(resp.read()), None)
            except (urllib.error.URLError, OSError, ValueError) as e:
                return _key(job), (None, f"status page {url}: {getattr(e, 'reason', e)}")
        if not jobs:
            return {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
            return dict(pool.map(read, jobs))

    def _create_missing(self, spec, children, cert_manager):
        """Creates the job's children that do not exist; None, or the first failure."""
        first_error = None
        for obj in job_objects.render(spec, self._operator_namespace):
            kind, name = obj["kind"], obj["metadata"]["name"]
            have = children.get((spec.namespace, kind, name))
            if have is not None:
                owner = (have["metadata"].get("labels") or {}).get(JOB_LABEL)
                if owner != spec.name and first_error is None:
                    first_error = f"{kind} {name} exists and belongs to job {owner!r}, not to this one"
                continue
            if kind in CERT_MANAGER_KINDS and not cert_manager:
                first_error = first_error or (
                    "cert-manager is not installed (the API server serves no cert-manager.io/v1 Certificate): "
                    "install it, or set spec.tls.certificates: Provided and create the Secrets "
                    f"{spec.name}-tls-<role> yourself (k8s/README.md)")
                continue
            try:
                self._call("POST", _path(obj["apiVersion"], kind, spec.namespace), body=obj)
            except ApiException as e:
                if e.status == 409:  # made since the list: fine
                    continue
                self.counters["api_errors"] += 1
                text = f"creating {kind} {name}: {api_error_text(e)}"
                log_error(f"{spec.namespace}/{spec.name}: {text}; retried next pass")
                first_error = first_error or text
                continue
            except self.API_ERRORS as e:
                self.counters["api_errors"] += 1
                first_error = first_error or f"creating {kind} {name}: {api_error_text(e)}"
                continue
            self.counters["created"] += 1
            children[(spec.namespace, kind, name)] = obj
            log_info(f"{spec.namespace}/{spec.name}: created {kind} {name}")
        return first_error

    def _sync_trainer_bounds(self, spec, children):
        """Keeps the trainers' autoscaler label and bounds in step with the job's fields,
        the one change of a running job that the operator carries over."""
        dep = children.get((spec.namespace, "Deployment", job_objects.trainer_name(spec)))
        if dep is None:
            return
        meta = dep["metadata"]
        want = job_objects.trainer_annotations(spec)
        elastic = "true" if spec["trainer.elastic"] else None
        have = {k: (meta.get("annotations") or {}).get(k) for k in want}
        if have == want and (meta.get("labels") or {}).get(job_objects.ELASTIC_LABEL) == elastic:
            return
        patch = {"metadata": {"annotations": want, "labels": {job_objects.ELASTIC_LABEL: elastic}}}
        try:
            self._call("PATCH", _path("apps/v1", "Deployment", spec.namespace, meta["name"]), body=patch,
                       content_type="application/strategic-merge-patch+json")
            log_info(f"{spec.namespace}/{spec.name}: trainers now min {want[job_objects.MIN_ANNOTATION]}, max "
                     f"{want[job_objects.MAX_ANNOTATION]}, priority {want[job_objects.PRIORITY_ANNOTATION]}"
                     f"{', elastic' if elastic else ', not elastic'}")
        except self.API_ERRORS as e:
            self.counters["api_errors"] += 1
            log_error(f"{spec.namespace}/{spec.name}: updating the trainers' bounds: {api_error_text(e)}; "
                      "retried next pass")

    def _write_status(self, job, status):
        key = _key(job)
        said = (status.get("phase"), tuple((c["type"], c["status"], c["reason"]) for c in status["conditions"]))
        if self._said.get(key) != said:
            line = "; ".join(f"{c['type']} {c['status']} ({c['reason']}: {c['message']})"
                             for c in status["conditions"])
            (log_error if status.get("phase") == "Failed" else log_info)(f"{key}: {status.get('phase')}: {line}")
            self._said[key] = said
        if status == job.get("status"):
            return
        meta = job["metadata"]
        try:
            self._call("PATCH", _path(JOB_API, KIND, meta["namespace"], meta["name"], "status"),
                       body={"status": status}, content_type="application/merge-patch+json")
            self.counters["status_updates"] += 1
        except self.API_ERRORS as e:
            self.counters["api_errors"] += 1
            log_error(f"{key}: writing its status: {api_error_text(e)}; retried next pass")

    def _clean(self, job, children):
        """A finished job: deletes its trainers (and with cleanPodPolicy All its master and
        pservers), whichever of them still exist."""
        meta = job["metadata"]
        policy = (((job.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy")) or "All"
        doomed = []
        for (namespace, kind, name), child in children.items():
            labels = child["metadata"].get("labels") or {}
            if namespace != meta["namespace"] or labels.get(JOB_LABEL) != meta["name"]:
                continue
            trainers = kind == "Deployment" and labels.get("app.kubernetes.io/component") == "trainer"
            if trainers or (policy == "All" and kind in SERVER_KINDS):
                doomed.append((not trainers, kind, name))  # the trainers first: they stop the job's work
        for _, kind, name in sorted(doomed):
            namespace = meta["namespace"]
            try:
                self._call("DELETE", _path(API_VERSION[kind], kind, namespace, name),
                           {"propagationPolicy": "Background"})
            except ApiException as e:
                if e.status != 404:
                    self.counters["api_errors"] += 1
                    log_error(f"{_key(job)}: deleting {kind} {name}: {api_error_text(e)}; retried next pass")
                    continue
            except self.API_ERRORS as e:
                self.counters["api_errors"] += 1
                log_error(f"{_key(job)}: deleting {kind} {name}: {api_error_text(e)}; retried next pass")
                continue
            del children[(namespace, kind, name)]
            self.counters["deleted"] += 1
            log_info(f"{_key(job)}: the job is over ({job['status'].get('phase')}): deleted {kind} {name}")

    # ------------------------------------------------------------ observability

    def metrics_text(self):
        with self._lock:
            phases = collections.Counter(self.phases.values())
        counters = self.counters
        out = ["# HELP pl_operator_jobs PaddleLikeJobs by phase.", "# TYPE pl_operator_jobs gauge"]
        out += [f'pl_operator_jobs{{phase="{p}"}} {phases.get(p, 0)}'
                for p in ("Pending", "Running", "Succeeded", "Failed")]
        for name, help_text in (("ticks", "Passes over the jobs."), ("api_errors", "API calls that failed."),
                                ("created", "Child objects created."), ("deleted", "Child objects deleted."),
                                ("status_updates", "Status subresource writes.")):
            out += [f"# HELP pl_operator_{name}_total {help_text}", f"# TYPE pl_operator_{name}_total counter",
                    f"pl_operator_{name}_total {counters.get(name, 0)}"]
        return "\n".join(out) + "\n"

    def healthy(self, stale_after_s):
        last = self._last_attempt
        return last is None or time.monotonic() - last <= stale_after_s

    def serve(self, host, port, stale_after_s):
        """/metrics and /healthz (fails once no pass has begun for `stale_after_s`) on a daemon thread."""
        operator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    code, text = 200, operator.metrics_text()
                elif path == "/healthz":
                    ok = operator.healthy(stale_after_s)
                    code, text = (200, "ok\n") if ok else (503, f"no pass begun for {stale_after_s:g} s\n")
                else:
                    code, text = 404, "not found: try /metrics or /healthz\n"
                body = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="operator-http", daemon=True).start()
        return server


def _key(job):
    return f"{job['metadata'].get('namespace', '')}/{job['metadata']['name']}"


# ---------------------------------------------------------------- command line

def api_client_from(kubeconfig):
    """An ApiClient from `kubeconfig`, else the Pod's service account, else ~/.kube/config."""
    configuration = k8s_client.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(client_configuration=configuration)
    return k8s_client.ApiClient(configuration)


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m paddle_like.k8s.operator",
                                description=f"Runs the {KIND}s ({PLURAL}.{GROUP}) of a cluster.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--namespace", help="run the jobs of this namespace only")
    where.add_argument("--all-namespaces", "--all_namespaces", dest="all_namespaces", action="store_true",
                       help="run the jobs of every namespace")
    p.add_argument("--operator_namespace", default="paddle-like-system",
                   help="the namespace the operator runs in: the jobs' NetworkPolicies admit it to the status "
                        "pages (default paddle-like-system)")
    p.add_argument("--period_s", type=float, default=5.0, help="seconds between passes (default 5)")
    p.add_argument("--http_host", default="0.0.0.0", help="/metrics and /healthz address (default 0.0.0.0)")
    p.add_argument("--http_port", type=int, default=9106,
                   help="/metrics and /healthz (default 9106; 0: any free port; -1: none)")
    p.add_argument("--once", action="store_true", help="one pass, then exit (1 if the cluster could not be read)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: the Pod's service account, else ~/.kube/config)")
    return p


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.period_s > 0:
        parser.error(f"--period_s={args.period_s}: must be above 0")
    if args.http_port < -1 or args.http_port > 65535:
        parser.error(f"--http_port={args.http_port}: must be -1 (none), 0 (any) or a port")
    set_process_name(OPERATOR_NAME)
    try:
        api_client = api_client_from(args.kubeconfig)
    except (k8s_config.ConfigException, OSError) as e:
        log_error(f"no Kubernetes configuration: {e} (give --kubeconfig, or run in a Pod with a service account)")
        return 2
    operator = JobOperator(api_client, namespace=None if args.all_namespaces else args.namespace,
                           operator_namespace=args.operator_namespace)
    server = None
    if args.http_port >= 0:
        server = operator.serve(args.http_host, args.http_port, stale_after_s=max(300.0, 10 * args.period_s))
        log_info(f"/metrics and /healthz on http://{args.http_host}:{server.server_address[1]}/")
    log_info(f"running the {PLURAL} of {'every namespace' if args.all_namespaces else args.namespace} "
             f"every {args.period_s:g} s")
    rc = run_ticks(operator.tick, args.period_s, once=args.once)
    if server is not None:
        server.shutdown()
    return rc


if __name__ == "__main__":
    sys.exit(main())
