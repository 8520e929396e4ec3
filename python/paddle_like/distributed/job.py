"""Your own training loop as one trainer of a job: the master's tasks are the loop's
data source, and ParameterServerModel (ps_model.py) routes the model's parameters
through the pservers.

    import paddle_like as pl
    job = pl.distributed.init()                 # under pl-launch ... --data indices:60000
    model = pl.distributed.ParameterServerModel(MyNet(), optimizer="adam", lr=1e-3)
    with job:
        for task in job.tasks():                # leased from the master
            for idx in task.batches(64):        # sample indices of YOUR dataset
                x, y = dataset[idx]
                loss = my_loss(model(x), y)     # pulls fresh parameters, then forward
                loss.backward()
                pl.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                model.step()                    # pushes the gradients
    if job.result["job_done"]:
        model.pull()                            # the job's final parameters
        ...

A job cut with ``--data indices:N`` (``indices:N:K`` for K samples per chunk) leases
tasks of sample indices 0..N-1 (task.indices(), task.batches()); a job over record
files leases their records (task.load(kind)).

Accounting is the built-in trainer's, exactly once: a task whose loop body ran to its
end is reported trained with all its samples. SIGTERM or SIGINT (init() catches them)
ends task.batches() before its next batch; that task goes back to the master at once
with the count of samples already pushed, tasks() ends, job.result["stopped"] is True,
and the script may exit 0. SIGUSR1 (what pl-launch sends first when it shrinks a job)
lets the task in hand run to its end and be reported; tasks() then ends before the
next lease with job.result["left"] True: nothing is trained twice. Leaving the loop early (break) gives the task back the same
way; an exception out of the loop inside ``with job:`` fails the task (a task that
fails max_failures times is dropped, so a bug does not loop forever).

Thread-safety: one Job per process, used from the thread that created it.
"""

import numpy as np

from .. import _C, log
from .environment import configure_transport, master_address, sync_updates, trainer_name

__all__ = ["init", "current", "Job", "LeasedTask"]

_current = None


def init(master=None, name=None, give_up_after_s=300.0, tls_dir=None, log_events=True):
    """Joins the job as a trainer: sets up the transport (mutual TLS from PL_TLS_DIR),
    registers with the master (PL_MASTER_ADDR; a heartbeat thread renews the lease) and
    catches SIGTERM/SIGINT for a clean stop and SIGUSR1 to leave after the task in
    hand. Returns the Job (also current())."""
    global _current
    if _current is not None and not _current.finished:
        raise RuntimeError("init(): this process already joined a job (call job.finish() first)")
    _current = Job(master=master, name=name, give_up_after_s=give_up_after_s, tls_dir=tls_dir,
                   log_events=log_events)
    return _current


def current():
    """The Job init() returned; RuntimeError before init()."""
    if _current is None or _current.finished:
        raise RuntimeError("no job: call paddle_like.distributed.init() first (under pl-launch, "
                           "or with master='host:port')")
    return _current


class LeasedTask:
    """One task the master leased to this trainer: sample indices of the script's dataset
    (a job cut with --data indices:N) or records (task.load(kind))."""

    def __init__(self, job, task):
        self._job, self._task = job, task
        self.samples_pushed = 0        # counted by ParameterServerModel.step()
        self.stopped = False           # batches() ended early for a stop signal

    @property
    def id(self):
        return self._task.id

    @property
    def pass_(self):
        return self._task.pass_

    @property
    def num_samples(self):
        return self._task.num_records

    def indices(self):
        """The task's sample indices (int64, ascending)."""
        return self._task.indices()

    def load(self, kind):
        """The task's records decoded ("image" or "clicks"), for a job over record files."""
        return self._task.load(kind)

    def batches(self, batch_size, shuffle=True, seed=0, dataset=None, collate=None, drop_last=False):
        """Yields the task's sample indices in batches (an int64 array each), shuffled per
        (seed, task, pass) so every trainer and every retry of a task sees one order.
        With `dataset`, yields dataset[indices] when the dataset takes an index array
        (NumPy arrays, tuples of them, a Dataset with array __getitem__), else
        collate([dataset[i] for i in indices]) (default: stacks each field).
        Ends before the next batch once a stop signal arrived; the task then goes back
        to the master with the samples pushed so far."""
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size}")
        batch_size = int(batch_size)
        order = self.indices()
        size = _dataset_len(dataset)
        if size is not None and len(order) and order[-1] >= size:
            raise ValueError(f"task {self.id} holds sample indices up to {order[-1]}, but the dataset has "
                             f"{size} samples: the job was cut (--data indices:N) for another dataset")
        if shuffle:
            order = order[np.random.default_rng([int(seed), self.id, self.pass_]).permutation(len(order))]
        for start in range(0, len(order), batch_size):
            if _C.stop_requested():
                self.stopped = True
                return
            idx = order[start:start + batch_size]
            if drop_last and len(idx) < batch_size:
                return
            yield idx if dataset is None else _gather(dataset, idx, collate)

    def __repr__(self):
        return f"LeasedTask(id={self.id}, pass={self.pass_}, samples={self.num_samples})"


def _dataset_len(dataset):
    if isinstance(dataset, tuple) and dataset and all(isinstance(a, np.ndarray) for a in dataset):
        return min(len(a) for a in dataset)
    return len(dataset) if dataset is not None and hasattr(dataset, "__len__") else None


def _gather(dataset, idx, collate):
    if collate is None:
        if isinstance(dataset, np.ndarray):
            return dataset[idx]
        if isinstance(dataset, tuple) and all(isinstance(a, np.ndarray) for a in dataset):
            return tuple(a[idx] for a in dataset)
        try:
            return dataset[idx]
        except (TypeError, IndexError, KeyError):
            pass  # a map-style dataset of single items
        collate = default_collate
    return collate([dataset[int(i)] for i in idx])


def default_collate(items):
    """Stacks a list of samples: arrays/numbers into one array, tuples and dicts field
    by field."""
    first = items[0]
    if isinstance(first, tuple):
        return tuple(default_collate([it[k] for it in items]) for k in range(len(first)))
    if isinstance(first, dict):
        return {k: default_collate([it[k] for it in items]) for k in first}
    return np.stack([np.asarray(it) for it in items])


class Job:
    """This process as a trainer of a job; made by init(). See the module docstring."""

    def __init__(self, master=None, name=None, give_up_after_s=300.0, tls_dir=None, log_events=True):
        self.name = trainer_name(name)
        self.address = master_address(master)
        self.sync = sync_updates()
        self.give_up_after_s = float(give_up_after_s)
        self.finished = False
        self.result = {"tasks_done": 0, "job_done": False, "stopped": False, "left": False, "waited_s": 0.0}
        self._log_fn = self._log if log_events else None
        self._before_lease = []        # ParameterServerModel: the trainer id may change
        self._task = None              # the LeasedTask being trained
        self._tasks = None             # the open tasks() generator
        self._exit_error = None
        self._log(f"transport: {configure_transport(tls_dir)}")
        _C.clear_stop()
        _C.install_stop_handlers()
        try:
            self.client = _C.MasterClient(self.address, self.name, self.give_up_after_s)
            reg = self.client.register()
        except BaseException:
            _C.restore_stop_handlers()
            raise
        self.trainer_id = reg["trainer_id"]
        self.num_pservers = reg["num_pservers"]
        self._log(f"registered as trainer {reg['trainer_id']} with the master at {self.address} "
                  f"({self.num_pservers} pservers, lease {reg['lease_ms']} ms)")

    def _log(self, msg):
        log.set_process_name(self.name)
        log.info(msg)

    @property
    def current_task(self):
        return self._task

    @property
    def stop_requested(self):
        return _C.stop_requested()

    def tasks(self):
        """Leases tasks until the job is done or a stop signal arrives; yields each as a
        LeasedTask and reports it when the loop body is done with it."""
        if self.finished:
            raise RuntimeError("the job was finished (job.finish()); init() again to rejoin")
        if self._tasks is not None:
            raise RuntimeError("tasks() is already being iterated in this process")
        self._tasks = self._lease_loop()
        return self._tasks

    def _lease_loop(self):
        try:
            while True:
                for hook in self._before_lease:
                    hook()
                task = self.client.lease(self._log_fn)
                if task is None:
                    break
                self._task = LeasedTask(self, task)
                try:
                    yield self._task
                except GeneratorExit:
                    self._give_back_open_task()
                    raise
                leased, self._task = self._task, None
                if leased.stopped:
                    self.client.report("interrupted", leased.samples_pushed)
                else:
                    self.client.report("trained", leased.num_samples)
        finally:
            self._task = None
            self._tasks = None
            self.result = self.client.lease_result()

    def _give_back_open_task(self):
        leased, self._task = self._task, None
        if leased is None:
            return
        if self._exit_error is not None and not _C.stop_requested():
            try:
                self.client.report("error", self._exit_error)
            except RuntimeError as e:  # the report names the task; the script's own error follows
                self._log(f"failed {e}")
        else:
            self.client.report("interrupted", leased.samples_pushed)

    def _count_pushed(self, num_samples):
        if self._task is not None:
            self._task.samples_pushed += int(num_samples)

    def finish(self):
        """Gives back a task still held, leaves the master and restores the signal
        handlers. Idempotent."""
        global _current
        if self.finished:
            return
        try:
            if self._tasks is not None:
                self._tasks.close()
        finally:
            self.finished = True
            try:
                self.client.leave()
            except RuntimeError as e:
                self._log(f"leaving the master failed: {e}")
            _C.restore_stop_handlers()
            if _current is self:
                _current = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
            self._exit_error = f"{type(exc).__name__}: {exc}"
        self.finish()
        return False
