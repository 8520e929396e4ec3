"""The parameter servers as a key-value store, for a model that is not a
``paddle_like.nn.Module`` (NumPy code, another framework's tensors): the shape of
ps-lite's KVWorker. Declare named keys once; ``push`` gradients, ``pull`` values or
``push_pull`` both; each call returns a handle at once and ``wait(handle)`` blocks
(without the GIL) until that call is done. Calls run in the order they were made.

    kv = pl.kv.KVWorker([("w", (784, 10)), ("emb", 16, 100000, ("normal", 0.01))],
                        optimizer="sgd", lr=0.1, num_pservers=2)
    kv.connect()
    values = kv.wait(kv.pull(["w", ("emb", ids)]))    # {"w": array, "emb": (ids, rows)}
    kv.wait(kv.push({"w": grad_w, "emb": (ids, grad_rows)}, num_samples=64))

A key is ``(name, shape)`` (dense: travels whole) or ``(name, dim, num_rows)`` (sparse:
rows travel by id; num_rows 0 allows any non-negative id), optionally followed by an
initializer ``(kind, scale)`` with kind zeros, constant, uniform or normal, and, for a
sparse key, its table's policy on the pservers: ``{"admit_after": N}`` gives an id its
own row only at its Nth pushed update (until then it reads zeros and its gradients
change nothing), which keeps ids seen once or twice out of memory, and
``{"evict_after_s": S}`` evicts a row neither pulled nor pushed for S seconds, and
``{"optimizer": paddle_like.optim.spec("adagrad", 0.05)}`` gives the table its own update
rule (the job's otherwise). Names are
the pservers' parameter names: a ``Module`` trained through ``paddle_like.distributed``
shares keys of the same names (declared alike). Pushes and pulls retry across pserver
restarts and failovers like the trainers' (C++: paddle_like/client/kv_worker.h).
``wire_dtype="bfloat16"`` sends dense keys over gRPC or dense links in half the bytes (with error
feedback on gradients), as ``pl-trainer --wire_dtype`` does; ``dense_link_lanes`` sets the
connections of the dense links to pservers on other hosts (-1: default, 0: gRPC only).
"""

import os

from . import _C
from .optim import Optimizer, spec as make_spec

__all__ = ["KVWorker"]


class KVWorker:
    def __init__(self, keys, optimizer="sgd", lr=None, num_pservers=1, master=None, seed=1, sync=None,
                 give_up_after_s=300.0, shared_memory=True, wire_dtype="float32", dense_link_lanes=-1):
        master = master or os.environ.get("PL_MASTER_ADDR", "")
        if not master:
            raise RuntimeError("no master address: pass master='host:port' or run under pl-launch "
                               "(which sets PL_MASTER_ADDR)")
        if isinstance(optimizer, Optimizer):
            spec = optimizer.spec
        elif isinstance(optimizer, _C.OptimizerSpec):
            spec = optimizer
        else:
            spec = make_spec(optimizer, 0.01 if lr is None else lr)
        sync = (os.environ.get("PL_SYNC") == "1") if sync is None else bool(sync)
        from .distributed import configure_transport
        configure_transport()  # PL_TLS_DIR, as pl-launch sets it for trainers
        self._kv = _C.KVWorker(master, int(num_pservers), [tuple(k) for k in keys], spec, int(seed), sync,
                               float(give_up_after_s), bool(shared_memory), str(wire_dtype), int(dense_link_lanes))

    def connect(self):
        """Finds the pservers through the master and creates the keys there (the first
        worker or trainer creates them from the seed; later ones find them)."""
        self._kv.connect()

    def push(self, gradients, num_samples=1):
        """Queues {name: array} (dense) / {name: (ids, rows)} (sparse) gradients; keys
        left out neither travel nor change. Returns a handle."""
        return self._kv.push(gradients, int(num_samples))

    def pull(self, keys):
        """Queues a pull of ["w", ("emb", ids), ...]. Returns a handle."""
        return self._kv.pull(list(keys))

    def push_pull(self, gradients, num_samples=1):
        """Queues a push, then a pull of the pushed keys (the pushed rows) that includes
        it. Returns a handle."""
        return self._kv.push_pull(gradients, int(num_samples))

    def wait(self, handle):
        """Blocks until the call is done and returns its result: None for a push,
        {name: array} / {name: (ids, rows)} for a pull. Raises its error."""
        return self._kv.wait(handle)

    def counters(self):
        return self._kv.counters()
