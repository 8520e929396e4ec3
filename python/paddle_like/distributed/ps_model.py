"""ParameterServerModel: a model whose parameters live on the job's pservers, for a
loop of your own (job.py), kept as close to torch's DistributedDataParallel as the
parameter-server model allows:

    model = pl.distributed.ParameterServerModel(net, optimizer="adam", lr=1e-3)
    out = model(x)          # pulls the parameters (and the embedding rows x touches), forward
    loss = my_loss(out, y)  # any loss made of Tensor ops
    loss.backward()
    pl.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # gradients are yours until step()
    model.step()            # pushes the gradients (then zeroes them); the pservers apply

The optimizer runs on the pservers (their shard of its state is checkpointed with the
shard), so `optimizer` names it instead of wrapping a local one; a learning-rate
schedule goes with it (optimizer=pl.optim.lr_scheduler.CosineAnnealingLR(spec, ...)),
and the pservers set each update's rate from the shard's step.
Synchronous jobs (pl-launch --sync) average each step's pushes across trainers.

Everything else — parameters(), state_dict(), train(), eval(), attributes of the net —
is the wrapped module's (model.module).

Thread-safety: one thread at a time, like the module.
"""

from .. import _C, log
from .environment import as_optimizer_spec
from .job import current

__all__ = ["ParameterServerModel"]


def _default_sparse_inputs(module):
    tables = [name for name, p in module.named_parameters() if isinstance(p, _C.SparseParameter)]

    def sparse_inputs(*inputs):
        import numpy as np
        x = inputs[0] if inputs else None
        x = x.numpy() if isinstance(x, _C.Tensor) else x
        if not tables or not isinstance(x, np.ndarray) or x.dtype != np.int64:
            return {}
        ids = np.unique(x)
        return {name: ids for name in tables}
    return sparse_inputs


class ParameterServerModel:
    """Routes `module`'s parameters through the job's pservers. See the module docstring.

    module: an nn.Module with parameters.
    optimizer, lr: what the pservers run: "adam"/"sgd"/"momentum"/"adagrad" with lr,
      a paddle_like.optim.spec(...), an Optimizer (its spec) or an lr_scheduler over
      either (the spec with its schedule).
    job: the Job (default: the one init() made).
    sparse_inputs(*inputs) -> {table: int64 ids}: the embedding rows a batch needs
      (default: every table gets the distinct ids of the first input when it is int64).
    seed: the pservers initialise the parameters from it; equal across trainers.
    wire_dtype, dense_link_lanes: as pl.distributed.train().
    """

    def __init__(self, module, optimizer="adam", lr=None, job=None, sparse_inputs=None, seed=1,
                 wire_dtype="float32", dense_link_lanes=-1):
        if getattr(module, "_cpp", None) is None:
            raise ValueError(f"{type(module).__name__} has no parameters to train")
        if wire_dtype not in ("float32", "bfloat16", "fp32", "bf16"):
            raise ValueError(f"wire_dtype: {wire_dtype!r} is not float32 or bfloat16")
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "job", job or current())
        object.__setattr__(self, "spec", as_optimizer_spec(optimizer, lr))
        object.__setattr__(self, "sparse_inputs", sparse_inputs or _default_sparse_inputs(module))
        client = self.job.client
        params = _C.ParameterClient(module._cpp, client, self.job.num_pservers, self.spec, int(seed),
                                    self.job.sync, self.job.give_up_after_s, wire_dtype=wire_dtype,
                                    dense_link_lanes=int(dense_link_lanes))
        params.set_trainer_id(client.trainer_id)
        params.connect()
        object.__setattr__(self, "_params", params)
        object.__setattr__(self, "_fresh", False)   # pulled since the last push
        object.__setattr__(self, "_last_batch", 0)
        object.__setattr__(self, "steps", 0)
        # The master gives a new trainer id when this trainer registers again.
        self.job._before_lease.append(lambda: params.set_trainer_id(client.trainer_id))
        log.info(f"connected to {self.job.num_pservers} pservers; optimizer {self.spec!r}"
                 f"{', sync' if self.job.sync else ''}")
        for i, transport in enumerate(params.transports()):
            log.info(f"pserver {i}: dense traffic over {transport}")

    def __call__(self, *inputs, **kwargs):
        """Pulls the current parameters (once per step), then runs the module."""
        if not self._fresh:
            self.pull(*inputs)
        if inputs and hasattr(inputs[0], "__len__"):
            object.__setattr__(self, "_last_batch", len(inputs[0]))
        return self.module(*inputs, **kwargs)

    def pull(self, *inputs):
        """Brings the pservers' parameters into the module: the dense ones and the
        embedding rows `inputs` touch (none given: dense only)."""
        self._params.pull(self.sparse_inputs(*inputs) if inputs else {})
        object.__setattr__(self, "_fresh", True)

    def step(self, num_samples=None):
        """Pushes the gradients of the last backward() (after whatever the script did to
        them) and zeroes them; num_samples defaults to the last forward's batch size.
        Counted for the task being trained, so a task given back on a stop says how
        many of its samples are already in the parameters."""
        n = self._last_batch if num_samples is None else int(num_samples)
        if n < 1:
            raise ValueError(f"step(): num_samples must be >= 1, got {n} (pass the batch's size)")
        self._params.push(n)
        object.__setattr__(self, "_fresh", False)
        object.__setattr__(self, "steps", self.steps + 1)
        self.job._count_pushed(n)

    def zero_grad(self, set_to_none=None):
        self.module.zero_grad()

    def staleness(self):
        """Updates other trainers made between this trainer's last pull and its push."""
        return self._params.last_staleness()

    def counters(self):
        """Traffic so far: pulls, pushes, bytes each way, retries."""
        return self._params.counters()

    def __getattr__(self, name):
        return getattr(self.module, name)

    def __setattr__(self, name, value):
        setattr(self.module, name, value)

    def __repr__(self):
        return f"ParameterServerModel({self.module!r}, optimizer={self.spec!r})"
