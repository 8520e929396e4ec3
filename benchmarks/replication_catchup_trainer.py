"""The trainer of bench_replication.py's catch-up measurement, started by pl-launch.

It holds one dense Linear(N, N) (N = BENCH_CATCHUP_DIM; 7168: 205 MB of parameters) on
a single replicated pserver with SGD (no optimizer state, so the shard is the
parameters; learning rate 1e-9), and keeps training on it -- a pull and a push of the whole layer per
step -- until pl-launch stops it. The benchmark kills the shard's primary meanwhile;
the restarted process then copies the 205 MB shard while these steps go on.

Not a training job: the master's tasks are never taken (the benchmark ends the job).
"""
import os
import sys
import time

import numpy as np

import paddle_like as pl
from paddle_like import _C


def main():
    _C.install_stop_handlers()  # pl-launch's SIGTERM ends the loop
    dim = int(os.environ.get("BENCH_CATCHUP_DIM", "7168"))
    master_addr = os.environ["PL_MASTER_ADDR"]
    pl.manual_seed(1)
    model = pl.nn.Linear(dim, dim)
    # Defines every gradient once; each push then sends (and zeroes) them.
    model(np.ones((1, dim), np.float32)).sum().backward()
    master = _C.MasterClient(master_addr, "catchup-trainer", 120.0)
    reg = master.register()
    params = _C.ParameterClient(model._cpp, master, reg["num_pservers"], pl.optim.spec("sgd", lr=1e-9), 1, False, 120.0)
    params.set_trainer_id(master.trainer_id)
    params.connect()
    print(f"catch-up trainer: {dim * (dim + 1) * 4 / 1e6:.0f} MB of parameters on the shard", flush=True)
    steps, last = 0, time.monotonic()
    while not _C.stop_requested():
        params.pull({})
        params.push(1)
        steps += 1
        if time.monotonic() - last >= 2:
            print(f"catch-up trainer: {steps} steps", flush=True)
            last = time.monotonic()
    return 0


if __name__ == "__main__":
    sys.exit(main())
