"""What every trainer of a job reads from its launcher (pl-launch, Kubernetes) and
shares between the built-in loop (trainer.py) and a script's own (job.py):

    PL_MASTER_ADDR   host:port of the master (required)
    PL_TRAINER_RANK  this trainer's rank (its name in logs: trainer-<rank>)
    PL_SYNC          "1": synchronous updates (the pservers average each step)
    PL_LOGDIR        TensorBoard event files go to PL_LOGDIR/<trainer name>/ (optional)
    PL_TLS_DIR       this trainer's certificate directory for mutual TLS
"""

import os

from .. import _C
from ..optim import Optimizer, spec as make_spec
from ..optim.lr_scheduler import LRScheduler

# The master's client, for scripts that speak to the master directly
# (python/examples/kv_softmax.py): register(), run_task_loop(train_task) or
# lease()/report(), leave().
MasterClient = _C.MasterClient


def is_available():
    """True when this process was started as a trainer of a job (PL_MASTER_ADDR set)."""
    return bool(os.environ.get("PL_MASTER_ADDR"))


def configure_transport(tls_dir=None):
    """Mutual TLS for this process's channels to the job (pl-launch gives each trainer
    its certificate directory in PL_TLS_DIR: tls.crt, tls.key, ca.crt); None reads
    PL_TLS_DIR, "" is insecure. Returns "mutual TLS (DIR)" or "insecure"."""
    if tls_dir is None:
        tls_dir = os.environ.get("PL_TLS_DIR", "")
    return _C.configure_transport(os.fspath(tls_dir))


def trainer_name(name=None):
    if name:
        return name
    rank = os.environ.get("PL_TRAINER_RANK")
    return f"trainer-{rank}" if rank is not None else "trainer"


def master_address(master=None):
    address = master or os.environ.get("PL_MASTER_ADDR", "")
    if not address:
        raise RuntimeError("no master address: pass master='host:port' or run under pl-launch "
                           "(which sets PL_MASTER_ADDR)")
    return address


def sync_updates(sync=None):
    return (os.environ.get("PL_SYNC") == "1") if sync is None else bool(sync)


def as_optimizer_spec(optimizer, lr=None):
    """The optimizer the pservers run: a name ("adam", "sgd", "momentum", "adagrad")
    with lr, a paddle_like.optim.spec(...), an Optimizer (its spec) or a
    paddle_like.optim.lr_scheduler scheduler (its optimizer's spec with the schedule)."""
    if optimizer is None:
        optimizer = "adam"
    if isinstance(optimizer, LRScheduler):
        return optimizer.spec
    if isinstance(optimizer, Optimizer):
        return optimizer.spec
    if isinstance(optimizer, _C.OptimizerSpec):
        return optimizer
    if isinstance(optimizer, str):
        return make_spec(optimizer, 1e-3 if lr is None else lr)
    raise TypeError(f"optimizer must be a name, paddle_like.optim.spec(...), an Optimizer or an lr_scheduler, "
                    f"got {type(optimizer).__name__}")
