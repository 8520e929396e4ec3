"""A PaddleLikeJob's status, decided from what the operator observed: whether its objects
exist, its master's status page (/status.json, master/status_page.cc) and its Pods.

Conditions (``kubectl wait --for=condition=Succeeded paddlelikejob/NAME``):

    Created    True once every child object exists (False: which one could not be made, why)
    Running    True while the master serves its status page and the job is not over
    Succeeded  True: the master reported the job done (every pass trained) with at most
               spec.runPolicy.maxFailedTasks tasks set aside as failed, and the trainers
               finished their final evaluation
    Failed     True: more failed tasks than that (TasksFailed), a container of the job
               restarted more than spec.runPolicy.backoffLimit times after failing
               (BackoffLimitExceeded), or a spec the operator cannot run (InvalidSpec;
               fixing the spec clears it)

``status.phase`` sums them up (Pending, Running, Succeeded, Failed) and
``status.progress`` copies the master's task counts. Succeeded and Failed are final
(InvalidSpec aside): the operator then stops the trainers and touches the job no more.

When the master reports the job done, each trainer evaluates the final parameters and
exits 0 (then its Deployment restarts it, and it exits again at once). The job is over
once every trainer that was running has exited 0 at least once, or
spec.runPolicy.evaluationTimeoutSeconds after the master said done.

Pure: no API calls. Times are RFC 3339 strings from the caller's clock.
"""

import calendar
import copy
import time

__all__ = ["decide", "is_final", "crash_looping", "trainers_evaluating", "progress", "CONDITION_TYPES"]

CONDITION_TYPES = ("Created", "Running", "Succeeded", "Failed")


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _seconds(text):
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


def _condition(status, type_):
    for c in status.get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def is_final(status):
    """Whether the job is over (Succeeded, or Failed for a reason other than its spec)."""
    status = status or {}
    done = _condition(status, "Succeeded")
    failed = _condition(status, "Failed")
    return bool(done and done.get("status") == "True") or bool(
        failed and failed.get("status") == "True" and failed.get("reason") != "InvalidSpec")


def _set(status, type_, true, reason, message, now):
    """Sets one condition; its lastTransitionTime moves only when its status does."""
    conditions = status.setdefault("conditions", [])
    value = "True" if true else "False"
    old = _condition(status, type_)
    new = {"type": type_, "status": value, "reason": reason, "message": message,
           "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == value else now}
    if old is None:
        conditions.append(new)
    else:
        conditions[conditions.index(old)] = new
    conditions.sort(key=lambda c: CONDITION_TYPES.index(c["type"]) if c["type"] in CONDITION_TYPES else 99)


def _drop(status, type_):
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != type_]


def progress(master):
    """status.progress from the master's /status.json (its "job" object)."""
    job = master.get("job") or {}
    return {"pass": job.get("pass", 0), "passes": job.get("num_passes", 0), "tasksTodo": job.get("todo", 0),
            "tasksPending": job.get("pending", 0), "tasksDone": job.get("done", 0),
            "tasksFailed": job.get("failed", 0), "samplesDone": job.get("samples_done", 0),
            "liveTrainers": job.get("live_trainers", 0)}


def _summary(p):
    return (f"pass {p['pass']} of {p['passes']}, tasks todo/pending/done/failed {p['tasksTodo']}/"
            f"{p['tasksPending']}/{p['tasksDone']}/{p['tasksFailed']}, {p['liveTrainers']} live trainers")


def _containers(pod):
    return (pod.get("status") or {}).get("containerStatuses") or []


def _exit(state):
    return ((state or {}).get("terminated") or {}).get("exitCode")


def crash_looping(pods, backoff_limit):
    """The first container of the job's Pods that failed and was restarted more than
    `backoff_limit` times, as one line; None when there is none."""
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        for c in _containers(pod):
            code = _exit(c.get("lastState"))
            if c.get("restartCount", 0) > backoff_limit and code not in (None, 0):
                reason = ((c.get("lastState") or {}).get("terminated") or {}).get("reason", "")
                return (f"Pod {pod['metadata']['name']} container {c['name']} restarted {c['restartCount']} times "
                        f"(spec.runPolicy.backoffLimit {backoff_limit}), last exit code {code}"
                        + (f" ({reason})" if reason else ""))
    return None


def trainers_evaluating(pods):
    """Names of the trainer Pods still running their final evaluation: a container
    running that has not exited 0 yet. Pods that never started are not waited for."""
    out = []
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get("app.kubernetes.io/component") != "trainer":
            continue
        for c in _containers(pod):
            running = "running" in (c.get("state") or {})
            if running and _exit(c.get("lastState")) != 0:
                out.append(pod["metadata"]["name"])
    return sorted(out)


def decide(job, spec, spec_error, create_error, master, master_error, pods, now):
    """The status the job should have: a new dict (the job's status is not changed).

    job: the PaddleLikeJob as listed; spec: its JobSpec (None when spec_error says why
    not); create_error: None when every child exists, else what failed; master: the
    master's /status.json as a dict, or None with master_error saying why; pods: the
    job's Pods; now: seconds since the epoch."""
    status = copy.deepcopy(job.get("status") or {})
    stamp = rfc3339(now)
    status["observedGeneration"] = int((job.get("metadata") or {}).get("generation") or 0)
    if spec_error is not None:
        _set(status, "Failed", True, "InvalidSpec", spec_error, stamp)
        status["phase"] = "Failed"
        return status
    failed = _condition(status, "Failed")
    if failed and failed.get("reason") == "InvalidSpec":  # fixed since
        _drop(status, "Failed")
    status["masterAddress"] = spec.master_address
    if create_error is not None:
        _set(status, "Created", False, "CreateFailed", create_error, stamp)
    else:
        _set(status, "Created", True, "ChildrenCreated", "the master, pservers and trainers exist", stamp)
        status.setdefault("startTime", stamp)

    outcome = None  # (condition, reason, message) once the job is over
    crash = crash_looping(pods, spec["runPolicy.backoffLimit"])
    if crash is not None:
        outcome = ("Failed", "BackoffLimitExceeded", crash)
    if master is not None:
        status["progress"] = progress(master)
    if outcome is None and master is not None and (master.get("job") or {}).get("job_done"):
        status.setdefault("trainingEndTime", stamp)
        waiting = trainers_evaluating(pods)
        waited = now - _seconds(status["trainingEndTime"])
        timeout = spec["runPolicy.evaluationTimeoutSeconds"]
        p = status["progress"]
        if waiting and waited < timeout:
            _set(status, "Running", True, "Evaluating",
                 f"the master reports the job done; {len(waiting)} trainers evaluate the final parameters "
                 f"({', '.join(waiting[:3])}{', ...' if len(waiting) > 3 else ''}; up to {timeout} s)", stamp)
            status["phase"] = "Running"
            return status
        tail = f" ({len(waiting)} trainers still evaluating after {timeout} s are stopped)" if waiting else ""
        ids = (master.get("job") or {}).get("failed_task_ids") or []
        if p["tasksFailed"] > spec["runPolicy.maxFailedTasks"]:
            outcome = ("Failed", "TasksFailed",
                       f"{p['tasksFailed']} tasks failed {spec['master.maxFailures']} times and were set aside "
                       f"(ids {', '.join(map(str, ids[:10]))}{', ...' if len(ids) > 10 else ''}); "
                       f"spec.runPolicy.maxFailedTasks is {spec['runPolicy.maxFailedTasks']}" + tail)
        else:
            outcome = ("Succeeded", "JobDone", f"{p['passes']} passes done: {p['tasksDone']} tasks, "
                                               f"{p['samplesDone']} samples, {p['tasksFailed']} failed" + tail)
    if outcome is not None:
        kind, reason, message = outcome
        _set(status, kind, True, reason, message, stamp)
        _set(status, "Running", False, reason, "the job is over", stamp)
        status["phase"] = kind
        status["completionTime"] = stamp
        return status
    if master is not None:
        _set(status, "Running", True, "MasterServing", _summary(status["progress"]), stamp)
        status["phase"] = "Running"
    else:
        _set(status, "Running", False, "MasterNotServing", master_error or "not asked yet", stamp)
        status["phase"] = "Pending"
    return status
