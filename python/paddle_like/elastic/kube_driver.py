"""The Kubernetes driver of the elastic policy: sizes elastic trainer Deployments to the
capacity the cluster leaves them.

    python3 -m paddle_like.elastic.kube_driver --all-namespaces --http_port 9105
    python3 -m paddle_like.elastic.kube_driver --namespace my-job --once --dry_run   # what it would do

Every ``--period_s`` it
  1. lists, through the official Kubernetes client, the Deployments labelled
     ``paddle-like.dev/elastic=true`` (the elastic jobs), the nodes and the pods that are
     neither Succeeded nor Failed;
  2. measures the capacity in slots (below) and gives it, the jobs' bounds and their
     ready trainers to ``ElasticPolicy`` -- the C++ decision procedure pl-autoscale and
     pl-sim-elastic use, so every rule (admission, minimums, fair share, reclaim,
     hysteresis, cooldown) is the same here;
  3. makes each job's target true by patching its Deployment's scale subresource.

A job's bounds are annotations of its Deployment: ``paddle-like.dev/min-trainers`` and
``paddle-like.dev/max-trainers`` (required) and ``paddle-like.dev/priority`` (default
0; higher is served first). A missing or bad value is one error line naming the
Deployment and the annotation; that job is skipped (or keeps its last valid bounds if
it had some) and the others go on. Jobs are named ``namespace/deployment``.

Slots. One slot is the largest trainer request among the elastic jobs, resource by
resource (cpu, memory, and any other resource a trainer requests, e.g. nvidia.com/gpu),
plus one pod: a slot then fits a trainer of any job, at the price of under-counting for
jobs with smaller trainers. A trainer's request is its Pod template's, as the scheduler
counts it: the sum of its containers' requests (a limit stands in for a missing
request), or the largest init container's if larger, plus the Pod overhead.
For every node that is Ready, not cordoned, and whose NoSchedule/NoExecute taints the
trainers of at least one elastic job tolerate:
    free = allocatable - requests of the pods bound to it, the elastic trainers excepted
    slots(node) = floor(min over the slot's resources of free / slot)
The trainers are left out of the requests because the capacity the policy sizes is the
one they share: capacity = sum of slots(node), less the slots that unschedulable
pending pods of a higher priority than the trainers need (ceil of their request in
slots, at least 1). That last term is the reclaim of capacity that higher-priority work
needs: the policy takes those slots back from the lowest-priority jobs in the same
decision, and the Deployments stop recreating the trainers that work preempts.
Node affinity and selectors are not modelled: a trainer the scheduler cannot place on
the free room stays Pending, and counts as not running; a higher-priority pod that no
room would place (a node selector nothing matches) holds its slots back while it waits.

How the driver acts:
  - Scaling goes through replicas, so a trainer scaled away is stopped by Kubernetes with
    SIGTERM and its Pod's terminationGracePeriodSeconds (it returns its task), never
    SIGKILL at once; which Pods go is the ReplicaSet's choice (not-ready ones first).
  - On its first successful tick it adopts every job's current replicas, so a restarted
    driver changes nothing by itself. A Deployment that appears later is admitted by the
    policy like any new job: its replicas follow its target (0 while it waits).
  - It is level-triggered: whenever a Deployment's replicas differ from its job's target
    they are patched, so a failed patch is retried at the next tick and a manual
    ``kubectl scale`` is undone (and logged).
  - If any list call fails, the tick decides nothing: a missing node list must never
    read as zero capacity and reclaim every trainer.
  - Capacity below the sum of the admitted minimums is reported (log, status page,
    metrics), never acted on below a minimum: the policy never kills a job's last trainers.

Observability: one log line per decision change, plus the plan's summary whenever
something changed; the status page ``/`` (and ``/status.json``), ``/metrics``
(Prometheus text), ``/healthz``; TensorBoard scalars per tick with ``--tensorboard_dir``
(capacity, assigned, and each job's target and running trainers).

Reading the jobs and measuring the slots: kube_capacity.py; this module asks the API,
decides and acts, and serves what it did.

Thread-safety: ``KubeDriver.tick`` runs on one thread (the control loop); the HTTP
server's threads only read a snapshot the loop replaces under a lock.
"""

import argparse
import collections
import dataclasses
import html
import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
import urllib3

from paddle_like import log
from paddle_like._periodic import run_ticks
from paddle_like.elastic.kube_capacity import (ELASTIC_LABEL, MAX_ANNOTATION, MIN_ANNOTATION,
                                                PRIORITY_ANNOTATION, Capacity, Job, measure_capacity,
                                                pod_request, read_job)

__all__ = ["KubeDriver", "Job", "Capacity", "read_job", "measure_capacity", "pod_request", "main"]

# What `kubectl describe node` asks for: pods that still hold their requests.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
PAGE_SIZE = 500  # list in chunks, like kubectl: a large cluster's PodList is big
REQUEST_TIMEOUT = (5, 60)  # (connect, read) seconds: a hung API server must not hang the loop


# ---------------------------------------------------------------- the driver

def _escape_label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class KubeDriver:
    """Runs ElasticPolicy over a cluster. `api_client`: a kubernetes.client.ApiClient;
    `policy`: a paddle_like.elastic.ElasticPolicy (owned by the driver from now on);
    `namespace`: None for every namespace; `clock`: monotonic milliseconds (tests fake
    it); `writer`: a paddle_like.tensorboard.SummaryWriter or None; `dry_run`: decide and
    log, never patch."""

    def __init__(self, api_client, policy, namespace=None, clock=None, writer=None, dry_run=False):
        self._core = k8s_client.CoreV1Api(api_client)
        self._apps = k8s_client.AppsV1Api(api_client)
        self._policy = policy
        self._namespace = namespace
        self._clock = clock or (lambda: int(time.monotonic() * 1000))
        self._writer = writer
        self._dry_run = dry_run
        self._dry_said = {}          # job key -> (replicas, target) last reported by a dry run
        self._adopted = False        # the first successful tick adopts the running replicas
        self._bounds = {}            # job key -> (min, max, priority) in the policy
        self._joined = set()         # jobs added by this tick after the first (not adopted)
        self._problems = {}          # deployment key -> its current annotation error (logged once)
        self._last_capacity = None   # logged when it changes
        self._over_committed = False
        self._last_api_error = None
        self.ticks = 0
        self._last_attempt = None    # time.monotonic() of the last tick begun, for /healthz
        self._decisions = collections.Counter()  # (job, reason) -> changed decisions
        self._api_errors = 0
        self._scale_requests = collections.Counter()  # "ok" / "error"
        self._recent = collections.deque(maxlen=50)   # (wall time, line) of the last decision changes
        self._lock = threading.Lock()
        self._snapshot = {"ticks": 0, "ok": False, "capacity": None, "jobs": [], "recent": [], "problems": {},
                          "over_committed": False, "assigned": 0, "sum_minimums": 0}

    # ------------------------------------------------------------ the API

    def _list(self, call, *args, **kwargs):
        """Every item of a list call, page by page, as plain dicts: decoding a large
        PodList into the client's typed models costs seconds per tick."""
        items, token = [], None
        while True:
            if token:
                kwargs["_continue"] = token
            resp = call(*args, limit=PAGE_SIZE, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
            body = json.loads(resp.data)
            items.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items

    def _observe(self):
        selector = f"{ELASTIC_LABEL}=true"
        if self._namespace is None:
            deployments = self._list(self._apps.list_deployment_for_all_namespaces, label_selector=selector)
        else:
            deployments = self._list(self._apps.list_namespaced_deployment, self._namespace, label_selector=selector)
        nodes = self._list(self._core.list_node)
        pods = self._list(self._core.list_pod_for_all_namespaces, field_selector=ACTIVE_PODS)
        return deployments, nodes, pods

    def _scale(self, job, replicas):
        try:
            self._apps.patch_namespaced_deployment_scale(job.name, job.namespace, {"spec": {"replicas": replicas}},
                                                         _request_timeout=REQUEST_TIMEOUT)
            self._scale_requests["ok"] += 1
            return True
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            self._scale_requests["error"] += 1
            log.error(f"{job.key}: scaling to {replicas} trainers failed ({_api_error_text(e)}); retried next tick")
            return False

    # ------------------------------------------------------------ one tick

    def tick(self):
        """Observe, decide, act. Returns the Plan, or None when the cluster could not be
        read (nothing decided)."""
        self._last_attempt = time.monotonic()
        try:
            deployments, nodes, pods = self._observe()
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            self._api_errors += 1
            text = _api_error_text(e)
            if text != self._last_api_error:  # once per distinct failure, not every period
                log.error(f"cannot read the cluster ({text}); deciding nothing until it can")
                self._last_api_error = text
            self._publish(None, {}, None, ok=False)
            return None
        if self._last_api_error is not None:
            log.info("the cluster can be read again")
            self._last_api_error = None

        jobs = self._reconcile(deployments)
        capacity = measure_capacity(nodes, pods, jobs.values())
        self._policy.set_capacity(capacity.slots)
        for job in jobs.values():
            self._policy.report_running(job.key, job.ready)
        plan = self._policy.decide(self._clock())
        self.ticks += 1

        if capacity.describe() != self._last_capacity:
            log.info(capacity.describe())
            self._last_capacity = capacity.describe()
        self._report(plan, jobs)
        self._act(plan, jobs)
        self._publish(plan, jobs, capacity, ok=True)
        self._write_scalars(plan)
        return plan

    def _problem(self, key, text):
        if self._problems.get(key) != text:
            log.error(f"deployment {key}: {text}; " +
                      ("keeping its last valid bounds" if key in self._bounds else "not managed until fixed"))
            self._problems[key] = text

    def _reconcile(self, deployments):
        """Brings the policy's jobs in line with the elastic Deployments; returns the
        managed jobs by key."""
        jobs = {}
        self._joined = set()
        for dep in deployments:
            key = f"{dep['metadata']['namespace']}/{dep['metadata']['name']}"
            job, why = read_job(dep)
            if job is None:
                self._problem(key, why)
                if key not in self._bounds:
                    continue
                # Keep driving it within its last valid bounds rather than drop its trainers.
                lo, hi, prio = self._bounds[key]
                job, _ = read_job({**dep, "metadata": {**dep["metadata"], "annotations": {
                    MIN_ANNOTATION: str(lo), MAX_ANNOTATION: str(hi), PRIORITY_ANNOTATION: str(prio)}}})
            elif self._problems.pop(key, None) is not None:
                log.info(f"deployment {key}: annotations valid again")
            try:
                if key not in self._bounds:
                    self._policy.add_job(key, job.min_trainers, job.max_trainers, job.priority)
                    if not self._adopted:
                        self._policy.adopt(key, job.replicas)
                        log.info(f"{key}: adopted with {job.replicas} trainers (min {job.min_trainers}, "
                                 f"max {job.max_trainers}, priority {job.priority})")
                    else:
                        self._joined.add(key)
                        log.info(f"{key}: new elastic job (min {job.min_trainers}, max {job.max_trainers}, "
                                 f"priority {job.priority})")
                elif self._bounds[key] != job.bounds:
                    self._policy.update_job(key, job.min_trainers, job.max_trainers, job.priority)
                    log.info(f"{key}: bounds now min {job.min_trainers}, max {job.max_trainers}, "
                             f"priority {job.priority}")
            except (ValueError, KeyError, RuntimeError) as e:  # the policy's own checks, named by field
                self._problem(key, str(e))
                if key in self._bounds:  # the policy kept its old bounds: go on driving it with them
                    lo, hi, prio = self._bounds[key]
                    jobs[key] = dataclasses.replace(job, min_trainers=lo, max_trainers=hi, priority=prio)
                continue
            self._bounds[key] = job.bounds
            jobs[key] = job
        for key in [k for k in self._bounds if k not in jobs]:
            self._policy.remove_job(key)
            del self._bounds[key]
            self._problems.pop(key, None)
            log.info(f"{key}: no longer an elastic job (deleted or unlabelled); its slots are free")
        listed = {f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in deployments}
        for key in [k for k in self._problems if k not in listed]:  # a bad Deployment deleted
            del self._problems[key]
        self._adopted = True
        return jobs

    def _report(self, plan, jobs):
        changed = [d for d in plan.jobs if d.changed]
        for d in changed:
            job = jobs.get(d.name)
            bounds = f", min {job.min_trainers}, max {job.max_trainers}" if job else ""
            line = (f"{d.name}: {d.previous} -> {d.target} trainers ({d.reason}; share {d.share}, "
                    f"running {d.running}{bounds})")
            log.info(line)
            self._recent.append((time.time(), line))
            self._decisions[(d.name, d.reason)] += 1
        if changed:
            log.info(f"plan: {plan.summary()}")
        if plan.over_committed != self._over_committed:
            self._over_committed = plan.over_committed
            if plan.over_committed:
                line = (f"over-committed: capacity {plan.capacity} slots is below the admitted minimums "
                        f"({plan.sum_minimums}); no job is cut below its minimum")
                log.warning(line)
            else:
                line = f"no longer over-committed: capacity {plan.capacity}, minimums {plan.sum_minimums}"
                log.info(line)
            self._recent.append((time.time(), line))

    def _act(self, plan, jobs):
        for d in plan.jobs:
            job = jobs.get(d.name)
            if job is None or job.replicas == d.target:
                continue
            if self._dry_run:  # the Deployment keeps its replicas: say so once, not every tick
                if self._dry_said.get(d.name) != (job.replicas, d.target):
                    log.info(f"{d.name}: dry run: would scale from {job.replicas} to {d.target} trainers")
                    self._dry_said[d.name] = (job.replicas, d.target)
                continue
            if d.name in self._joined and not d.changed:
                log.info(f"{d.name}: waits for admission ({d.reason}); scaling its {job.replicas} replicas "
                         f"to {d.target}")
            elif not d.changed:
                log.warning(f"{d.name}: replicas {job.replicas} were set outside the autoscaler; "
                            f"restoring its target {d.target}")
            if self._scale(job, d.target):
                job.replicas = d.target

    # ------------------------------------------------------------ observability

    def _publish(self, plan, jobs, capacity, ok):
        with self._lock:
            snap = dict(self._snapshot)
            snap.update(ticks=self.ticks, ok=ok, api_errors=self._api_errors, problems=dict(self._problems),
                        decisions={f"{j}\t{r}": n for (j, r), n in self._decisions.items()},
                        scale_requests=dict(self._scale_requests),
                        recent=[(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)), line)
                                for t, line in self._recent])
            if plan is not None:
                snap.update(
                    capacity=plan.capacity, capacity_text=capacity.describe(), assigned=plan.assigned,
                    sum_minimums=plan.sum_minimums, over_committed=plan.over_committed,
                    trainer_pods=capacity.trainer_pods, reclaimed=capacity.reclaimed,
                    jobs=[{"job": d.name, "min": jobs[d.name].min_trainers if d.name in jobs else None,
                           "max": jobs[d.name].max_trainers if d.name in jobs else None,
                           "priority": jobs[d.name].priority if d.name in jobs else None,
                           "replicas": jobs[d.name].replicas if d.name in jobs else None,
                           "target": d.target, "share": d.share, "running": d.running, "admitted": d.admitted,
                           "reason": d.reason} for d in plan.jobs])
            self._snapshot = snap

    def snapshot(self):
        with self._lock:
            return self._snapshot

    def _write_scalars(self, plan):
        if self._writer is None:
            return
        values = {"autoscale/capacity_slots": plan.capacity, "autoscale/assigned_trainers": plan.assigned}
        for d in plan.jobs:
            values[f"target/{d.name}"] = d.target
            values[f"running/{d.name}"] = max(d.running, 0)
        self._writer.add_scalars(values, self.ticks)

    def metrics_text(self):
        s = self.snapshot()
        out = []

        def metric(name, kind, help_text, samples):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                label_text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels)
                out.append(f"{name}{{{label_text}}} {value}" if labels else f"{name} {value}")

        metric("pl_autoscale_capacity_slots", "gauge", "Slots training may use (free room plus the trainers' own).",
               [((), s["capacity"] if s["capacity"] is not None else 0)])
        metric("pl_autoscale_assigned_trainers", "gauge", "Sum of the jobs' targets.", [((), s["assigned"])])
        metric("pl_autoscale_sum_minimums", "gauge", "Sum of the admitted jobs' minimums.",
               [((), s["sum_minimums"])])
        metric("pl_autoscale_over_committed", "gauge", "1 while the capacity is below the admitted minimums.",
               [((), int(s["over_committed"]))])
        metric("pl_autoscale_target_trainers", "gauge", "Trainers the policy gives each job.",
               [((("job", j["job"]),), j["target"]) for j in s["jobs"]])
        metric("pl_autoscale_running_trainers", "gauge", "Ready trainers of each job.",
               [((("job", j["job"]),), max(j["running"], 0)) for j in s["jobs"]])
        metric("pl_autoscale_decisions_total", "counter", "Decisions that changed a job's target, by reason.",
               [((("job", k.split("\t")[0]), ("reason", k.split("\t")[1])), n)
                for k, n in sorted(s.get("decisions", {}).items())])
        metric("pl_autoscale_scale_requests_total", "counter", "PATCHes of a Deployment's scale, by result.",
               [((("result", r),), s.get("scale_requests", {}).get(r, 0)) for r in ("ok", "error")])
        metric("pl_autoscale_invalid_jobs", "gauge", "Elastic Deployments with bad annotations.",
               [((), len(s["problems"]))])
        metric("pl_autoscale_api_errors_total", "counter", "Ticks that could not read the cluster.",
               [((), s.get("api_errors", 0))])
        metric("pl_autoscale_ticks_total", "counter", "Decisions made.", [((), s["ticks"])])
        return "\n".join(out) + "\n"

    def status_html(self):
        s = self.snapshot()
        e = html.escape
        rows = "".join(
            "<tr>" + "".join(f"<td>{e(str(j[k]))}</td>" for k in
                             ("job", "min", "max", "priority", "target", "share", "running", "replicas", "reason"))
            + "</tr>" for j in s["jobs"])
        problems = "".join(f"<li>{e(k)}: {e(v)}</li>" for k, v in sorted(s["problems"].items()))
        recent = "".join(f"<li>{e(t)} {e(line)}</li>" for t, line in reversed(s["recent"]))
        state = "over-committed: no job is cut below its minimum" if s["over_committed"] else "ok"
        if not s["ok"]:
            state = "cannot read the cluster (see the log); deciding nothing"
        return (
            "<!doctype html><html><head><meta charset=utf-8><title>pl-autoscale (Kubernetes)</title>"
            "<meta http-equiv=refresh content=5></head><body>"
            f"<h1>Elastic trainers</h1><p>{e(s.get('capacity_text', 'no decision yet'))}</p>"
            f"<p>capacity {s['capacity']}, assigned {s['assigned']}, admitted minimums {s['sum_minimums']}: "
            f"{e(state)}; {s['ticks']} decisions</p>"
            "<table border=1 cellpadding=3><tr><th>job</th><th>min</th><th>max</th><th>priority</th>"
            "<th>target</th><th>share</th><th>running</th><th>replicas</th><th>reason</th></tr>"
            f"{rows}</table><h2>Not managed (bad annotations)</h2><ul>{problems or '<li>none</li>'}</ul>"
            f"<h2>Last decisions</h2><ul>{recent or '<li>none yet</li>'}</ul></body></html>\n")

    def healthy(self, stale_after_s):
        """False once no tick has begun for `stale_after_s` (a control loop stuck beyond
        its request timeouts): /healthz then fails and the kubelet restarts the Pod. An
        unreadable cluster is not unhealthy: a restart would not help it."""
        last = self._last_attempt
        return stale_after_s is None or last is None or time.monotonic() - last <= stale_after_s

    def serve(self, host, port, stale_after_s=None):
        """Starts the status server on a daemon thread; returns the server (its
        server_address has the port when `port` is 0)."""
        driver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, "text/plain; version=0.0.4; charset=utf-8", driver.metrics_text())
                elif path == "/healthz":
                    if driver.healthy(stale_after_s):
                        self._send(200, "text/plain; charset=utf-8", "ok\n")
                    else:
                        self._send(503, "text/plain; charset=utf-8", f"no decision begun for {stale_after_s:g} s\n")
                elif path == "/status.json":
                    self._send(200, "application/json", json.dumps(driver.snapshot(), default=str) + "\n")
                elif path == "/":
                    self._send(200, "text/html; charset=utf-8", driver.status_html())
                else:
                    self._send(404, "text/plain; charset=utf-8", "not found\n")

            def _send(self, code, content_type, text):
                body = text.encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes every few seconds: not worth a log line
                pass

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="autoscale-http", daemon=True).start()
        return server


def _api_error_text(e):
    if isinstance(e, ApiException):
        message = ""
        try:
            message = json.loads(e.body).get("message", "") if e.body else ""
        except (ValueError, AttributeError):
            pass
        return f"HTTP {e.status} {e.reason}" + (f": {message}" if message else "")
    return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- command line

def api_client_from(kubeconfig):
    """An ApiClient from `kubeconfig`, or else the Pod's service account, or else
    ~/.kube/config (what kubectl would use)."""
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
    p = argparse.ArgumentParser(prog="python3 -m paddle_like.elastic.kube_driver",
                                description="Sizes elastic trainer Deployments (label "
                                            f"{ELASTIC_LABEL}=true) to the cluster's free capacity.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--namespace", help="manage the elastic Deployments of this namespace")
    where.add_argument("--all-namespaces", "--all_namespaces", dest="all_namespaces", action="store_true",
                       help="manage the elastic Deployments of every namespace")
    p.add_argument("--period_s", type=float, default=2.0, help="seconds between decisions (default 2)")
    p.add_argument("--cooldown_s", type=float, default=30.0,
                   help="after a job's target changes it neither grows nor rebalances for this long (default 30)")
    p.add_argument("--settle_s", type=float, default=10.0,
                   help="a job grows or rebalances only after being off its share this long (default 10)")
    p.add_argument("--http_host", default="0.0.0.0", help="status server address (default 0.0.0.0)")
    p.add_argument("--http_port", type=int, default=9105,
                   help="status page, /metrics and /healthz (default 9105; 0: any free port; -1: none)")
    p.add_argument("--tensorboard_dir", help="write capacity and trainers per decision as TensorBoard scalars here")
    p.add_argument("--once", action="store_true", help="decide and act once, then exit (1 if the cluster "
                                                        "could not be read)")
    p.add_argument("--dry_run", action="store_true", help="decide and log, never scale")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: the Pod's service account, else ~/.kube/config)")
    return p


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    for flag in ("period_s", "cooldown_s", "settle_s"):
        value = getattr(args, flag)
        if not math.isfinite(value) or value < 0 or (flag == "period_s" and value == 0):
            parser.error(f"--{flag}={value}: must be {'above' if flag == 'period_s' else 'at least'} 0")
    if args.http_port < -1 or args.http_port > 65535:
        parser.error(f"--http_port={args.http_port}: must be -1 (none), 0 (any) or a port")
    log.set_process_name("pl-autoscale-k8s")

    from paddle_like import elastic  # the C++ policy (this module lives in its package)
    policy = elastic.ElasticPolicy(cooldown_ms=int(args.cooldown_s * 1000), settle_ms=int(args.settle_s * 1000))
    try:
        api_client = api_client_from(args.kubeconfig)
    except (k8s_config.ConfigException, OSError) as e:
        log.error(f"no Kubernetes configuration: {e} (give --kubeconfig, or run in a Pod with a service account)")
        return 2
    writer = None
    if args.tensorboard_dir:
        from paddle_like.tensorboard import SummaryWriter
        writer = SummaryWriter(args.tensorboard_dir)
    driver = KubeDriver(api_client, policy, namespace=None if args.all_namespaces else args.namespace,
                        writer=writer, dry_run=args.dry_run)
    server = None
    if args.http_port >= 0:
        # Generous: one tick may wait out a few request timeouts (REQUEST_TIMEOUT) on a slow API server.
        server = driver.serve(args.http_host, args.http_port, stale_after_s=max(300.0, 10 * args.period_s))
        log.info(f"status page on http://{args.http_host}:{server.server_address[1]}/ (/metrics, /healthz)")
    log.info(f"managing elastic Deployments in {'every namespace' if args.all_namespaces else args.namespace} "
             f"every {args.period_s:g} s (cooldown {args.cooldown_s:g} s, settle {args.settle_s:g} s"
             f"{', dry run' if args.dry_run else ''})")

    rc = run_ticks(driver.tick, args.period_s, once=args.once)
    if server is not None:
        server.shutdown()
    if writer is not None:
        writer.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
