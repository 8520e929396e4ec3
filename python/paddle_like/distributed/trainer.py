"""pl.distributed.train(): the built-in loop of one trainer of a distributed job (master +
parameter servers), for a model and loss and records of an image or click layout (a
loop of your own: paddle_like.distributed.job and .ps_model). From a script that runs unchanged under ``pl-launch`` / ``python -m paddle_like.launch``
(locally) or on Kubernetes: it reads the launcher's environment contract

    PL_MASTER_ADDR   host:port of the master (required)
    PL_TRAINER_RANK  this trainer's rank (for its name in logs)
    PL_SYNC          "1": synchronous updates (the pservers average each step)
    PL_LOGDIR        TensorBoard event files go to PL_LOGDIR/<trainer name>/ (optional)
    PL_TLS_DIR       this trainer's certificate directory for mutual TLS (pl-launch sets it)

and then, like the C++ trainer (trainer/dist_trainer.h): registers with the master
(a heartbeat thread renews its lease), leases tasks (groups of record chunks), decodes
each task's records with the C++ reader, and per batch pulls the parameters (dense
ones and the embedding rows the batch touches), runs forward/backward in this process
and pushes the gradients; the optimizer runs on the pservers. SIGTERM or SIGINT gives
the current task back to the master (no lease timeout) and returns with
``stopped=True``, so the script can exit 0. At JOB_DONE the final parameters are
pulled and evaluated on `test` when given.

    import paddle_like as pl
    model = ...                                       # any nn.Module
    result = pl.distributed.train(model, pl.nn.CrossEntropyLoss(),
                                  optimizer=pl.optim.spec("adam", lr=1e-3),
                                  test="data/test.plrec")

All network waits and the data decoding release the GIL.
"""

import os
import sys
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import _C, log
from ..data import load_records
from ..optim import Optimizer
from ..tensorboard import SummaryWriter
from ..utils import ProgressBar
from .environment import (configure_transport, as_optimizer_spec as _as_spec, master_address, sync_updates,
                          trainer_name)

__all__ = ["DistResult", "DistributedTrainer", "train"]


@dataclass
class DistResult:
    tasks_done: int = 0
    steps: int = 0
    samples: int = 0
    stopped: bool = False           # left because of SIGTERM/SIGINT (task returned)
    job_done: bool = False
    final_metric: Optional[float] = None   # test accuracy / AUC, when `test` was given
    seconds: float = 0.0


def default_sparse_inputs(model):
    tables = [name for name, p in model.named_parameters() if isinstance(p, _C.SparseParameter)]

    def sparse_inputs(inputs):
        # Each table may see any id of the batch (the usual single-table CTR layout).
        if not tables or inputs.dtype != np.int64:
            return {}
        ids = np.unique(inputs)
        return {name: ids for name in tables}
    return sparse_inputs


class DistributedTrainer:
    """One trainer of a job. See the module docstring; run() does the work.

    model: an nn.Module; loss_fn(outputs, labels) -> scalar Tensor.
    optimizer: "adam"/"sgd"/"momentum"/"adagrad" (with lr), paddle_like.optim.spec(...)
      or an Optimizer (its spec is used; the pservers apply it).
    kind: "image" (inputs float (B, C, H, W), labels int64) or "clicks" (inputs int64
      ids (B, F), labels float 0/1).
    sparse_inputs(inputs) -> {table name: ids}: the embedding rows a batch needs
      (default: every table gets the batch's distinct ids).
    metric: "accuracy" or "auc" for the final evaluation on `test` (a record file).
    seed: must match across the job's trainers (the pservers initialise from it).
    save: a .safetensors path: at the job's end, the final parameters pulled from the
      pservers are written there (paddle_like.save); checked writable at construction.
    logdir: TensorBoard event files under logdir/<name>/ (default $PL_LOGDIR, which
      pl-launch --logdir sets): per step loss, train/accuracy (image), train/samples_per_sec,
      time/compute_ms, time/exchange_ms; test/<metric> after the final evaluation, as
      pl-trainer writes them. Checked writable at construction.
    wire_dtype: "float32" or "bfloat16": how dense values cross gRPC and dense links (half the bytes;
      gradients keep what rounding dropped for the next push, so nothing is lost over
      time). Shared memory with a pserver on this host always carries float32.
    dense_link_lanes: a pserver on another host gets the dense blocks over a dense link of
      this many TCP connections each way beside gRPC (-1: 4 with TLS, 2 without; 0: gRPC
      only). With wire_dtype bfloat16 the link carries bfloat16 too.
    local_steps: take this many optimizer steps on this process's own copy of a dense
      model, then push the change they made (the pservers add it; sync: the trainers'
      changes are averaged) and continue from the merged values; 1 (the default) pushes
      every step's gradients for the pservers' optimizer. Async rounds overlap with the
      next round's steps. A model with sparse tables cannot (ValueError).
    """

    def __init__(self, model, loss_fn, optimizer=None, lr=None, batch_size=64, kind="image",
                 sparse_inputs=None, test=None, test_limit=None, metric=None, master=None, sync=None,
                 seed=1, give_up_after_s=300.0, log_every_s=2.0, progress=True, name=None, save=None,
                 logdir=None, wire_dtype="float32", dense_link_lanes=-1, local_steps=1):
        self.model, self.loss_fn = model, loss_fn
        if model._cpp is None:
            raise ValueError(f"{type(model).__name__} has no parameters to train")
        self.spec = _as_spec(optimizer, lr)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if kind not in ("image", "clicks"):
            raise ValueError(f"kind must be 'image' or 'clicks', got {kind!r}")
        self.batch_size, self.kind = int(batch_size), kind
        self.sparse_inputs = sparse_inputs or default_sparse_inputs(model)
        self.test, self.test_limit = test, test_limit
        self.metric = metric or ("accuracy" if kind == "image" else "auc")
        self.master = master_address(master)
        self.sync = sync_updates(sync)
        self.seed, self.give_up_after_s = int(seed), float(give_up_after_s)
        if wire_dtype not in ("float32", "bfloat16", "fp32", "bf16"):
            raise ValueError(f"wire_dtype: {wire_dtype!r} is not float32 or bfloat16")
        self.wire_dtype = wire_dtype
        if not -1 <= int(dense_link_lanes) <= 16:
            raise ValueError(f"dense_link_lanes must be -1 (default), 0 (gRPC) or 1..16, got {dense_link_lanes}")
        self.dense_link_lanes = int(dense_link_lanes)
        if int(local_steps) != local_steps or local_steps < 1:
            raise ValueError(f"local_steps must be an integer >= 1, got {local_steps}")
        self.local_steps = int(local_steps)
        self.log_every_s, self.progress = log_every_s, progress
        # A path that cannot be written fails now, not after the whole job.
        self.save = os.fspath(save) if save is not None else None
        if self.save is not None:
            parent = os.path.dirname(os.path.abspath(self.save))
            if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
                raise ValueError(f"save: cannot write in {parent} (not a writable directory)")
        self.name = trainer_name(name)
        logdir = logdir if logdir is not None else os.environ.get("PL_LOGDIR") or None
        # Opened now, so a directory that cannot be written fails before the job.
        self.summary = SummaryWriter(os.path.join(os.fspath(logdir), self.name)) if logdir else None

    def _log(self, msg):
        log.set_process_name(self.name)
        log.info(msg)

    def run(self):
        """Trains until the job is done or a stop signal arrives; returns a DistResult.
        Errors (a pserver gone longer than give_up_after_s, a bad batch) raise."""
        _C.clear_stop()
        _C.install_stop_handlers()
        try:
            return self._run()
        finally:
            _C.restore_stop_handlers()

    def _run(self):
        start = time.monotonic()
        result = DistResult()
        self._log(f"transport: {configure_transport()}")
        master = _C.MasterClient(self.master, self.name, self.give_up_after_s)
        reg = master.register()
        self._log(f"registered as trainer {reg['trainer_id']} with the master at {self.master} "
                  f"({reg['num_pservers']} pservers, lease {reg['lease_ms']} ms)")
        params = _C.ParameterClient(self.model._cpp, master, reg["num_pservers"], self.spec, self.seed,
                                    self.sync, self.give_up_after_s, wire_dtype=self.wire_dtype,
                                    dense_link_lanes=self.dense_link_lanes)
        params.set_trainer_id(master.trainer_id)
        params.connect()
        # Local steps: the optimizer runs here, on this copy; every local_steps-th step
        # pushes the change (paddle_like/client/local_steps.h).
        local_optimizer = None
        if self.local_steps > 1:
            params.enable_local_steps(self.local_steps)
            local_optimizer = Optimizer(self.model, self.spec)
            self._log(f"local steps: {self.local_steps} optimizer steps on this trainer between exchanges")
        self._log(f"connected to {reg['num_pservers']} pservers; optimizer {self.spec!r}"
                  f"{', sync' if self.sync else ''}")
        for i, transport in enumerate(params.transports()):
            self._log(f"pserver {i}: dense traffic over {transport}")
        self.model.train()
        # Points for the master's status page (a master without it: reporting stops).
        reporter = _C.ProgressReporter(self.master, self.name)
        bar = ProgressBar(None, desc=self.name, disable=not self.progress, unit="step",
                          stream=sys.stdout, log_every_s=self.log_every_s)
        window = {"loss": 0.0, "steps": 0}

        def train_task(task):
            """One leased task; the C++ task loop (paddle_like/client/task_loop.h) leases
            it and reports the outcome to the master."""
            try:
                data = task.load(self.kind)
            except (OSError, ValueError, RuntimeError) as e:
                return ("bad_task", str(e))
            inputs = data["features"] if self.kind == "image" else data["ids"]
            labels = data["labels"]
            rng = np.random.default_rng([self.seed, task.id, task.pass_])
            order = rng.permutation(len(labels))
            for b in range(0, len(order), self.batch_size):
                if _C.stop_requested():
                    if local_optimizer is not None:
                        params.local_finish()  # nothing trained is lost
                    return ("interrupted", int(min(b, len(order))))  # samples already pushed
                idx = order[b:b + self.batch_size]
                x, y = inputs[idx], labels[idx]
                t0 = time.perf_counter()
                if local_optimizer is None:
                    params.pull(self.sparse_inputs(x))
                else:
                    params.local_start()
                t1 = time.perf_counter()
                outputs = self.model(x)
                loss = self.loss_fn(outputs, y)
                loss.backward()
                t2 = time.perf_counter()
                if local_optimizer is None:
                    params.push(len(idx))
                else:
                    local_optimizer.step()
                    params.local_end_step(len(idx))
                t3 = time.perf_counter()
                result.steps += 1
                loss_value = loss.item()
                correct = _C.count_correct(outputs, y) if self.kind == "image" else -1
                staleness = params.last_staleness()
                reporter.on_step(result.steps, loss_value, correct, len(idx), t3 - t0, staleness)
                if self.summary is not None:
                    values = {"loss": loss_value, "train/samples_per_sec": len(idx) / max(t3 - t0, 1e-9),
                              "time/compute_ms": (t2 - t1) * 1e3, "time/exchange_ms": (t1 - t0 + t3 - t2) * 1e3,
                              "train/staleness": staleness}
                    if correct >= 0:
                        values["train/accuracy"] = correct / len(idx)
                    self.summary.add_scalars(values, result.steps)
                result.samples += len(idx)
                window["loss"] += loss_value
                window["steps"] += 1
                bar.update(1, task=task.id, loss=window["loss"] / window["steps"])
                if window["steps"] >= 50:
                    window["loss"], window["steps"] = 0.0, 0
            if local_optimizer is not None:
                params.local_finish()  # the task is done once all of it is pushed
            return ("trained", len(order))

        try:
            loop = master.run_task_loop(train_task,
                                        before_lease=lambda: params.set_trainer_id(master.trainer_id),
                                        log=self._log)
            result.tasks_done, result.job_done = loop["tasks_done"], loop["job_done"]
        finally:
            bar.close()
        result.stopped = _C.stop_requested()
        result.seconds = time.monotonic() - start
        counters = params.counters()
        self._log(f"{'stopping' if result.stopped else 'job done'} after {result.tasks_done} tasks, "
                  f"{result.steps} steps, {result.samples} samples "
                  f"({result.samples / max(result.seconds, 1e-9):.0f} samples/s); "
                  f"{counters['retries']} retries")
        if result.job_done and self.test:
            result.final_metric = self._evaluate(params)
            self._log(f"final test {self.metric}: {result.final_metric:.4f}")
            reporter.on_evaluation(result.steps, self.metric, result.final_metric)
            if self.summary is not None:
                self.summary.add_scalar(f"test/{self.metric}", result.final_metric, result.steps)
        elif result.job_done and self.save is not None:
            params.pull({})
        if result.job_done and self.save is not None:
            # The job's final parameters, as pulled from the pservers (safetensors).
            from ..serialization import save as save_file
            save_file(self.model, self.save)
            self._log(f"saved the job's final parameters to {self.save}")
        reporter.close()
        if self.summary is not None:
            self.summary.close()
        try:
            master.leave()
        except RuntimeError as e:
            self._log(f"leaving the master failed: {e}")
        return result

    def _evaluate(self, params):
        test = load_records(self.test, kind=self.kind, limit=self.test_limit)
        from ..training import predict
        params.pull(self.sparse_inputs(test.inputs))
        logits = predict(self.model, test.inputs)
        if self.metric == "accuracy":
            return _C.count_correct(logits, test.labels) / max(len(test), 1)
        return _C.binary_auc(_C.sigmoid_of(logits.reshape(-1)).numpy(), test.labels.astype(np.float32))


def train(model, loss_fn, **kwargs):
    """DistributedTrainer(model, loss_fn, **kwargs).run()."""
    return DistributedTrainer(model, loss_fn, **kwargs).run()
