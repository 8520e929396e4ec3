"""Shared part of the peer benchmarks (peer_mlp.py, peer_cnn.py): the same training
step as pl-bench-core's, in JAX on CPU, timed the same way.

Protocol, identical to pl-bench-core's "train" section: Fashion-MNIST training images
scaled to [0, 1], batch 64, Adam (lr 1e-3, betas 0.9/0.999, eps 1e-8), a fixed number
of steps over a shuffled subset, each step gathering its batch on the host; the best
samples/s of several repetitions, after one warm-up pass (jit compilation excluded).
Threads: the process is pinned to the first `--threads` CPUs before JAX is imported,
and with 1 thread XLA's multi-threaded Eigen is switched off.

With --ours REPORT (pl-bench-core's output), prints our samples/s / the peer's.
"""
import argparse
import gzip
import os
import re
import struct
import sys
import time

FASHION = "/usr/share/datasets/fashion-mnist"


def parse_args(default_steps):
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=default_steps)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--data", default=FASHION, help="directory of the IDX files")
    p.add_argument("--ours", default="", help="pl-bench-core report to compare with")
    args = p.parse_args()
    # Before JAX starts its thread pools.
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.threads]))
    if args.threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return args


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    import numpy as np
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_train(data_dir, n):
    import numpy as np
    images = load_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))[:n]
    labels = load_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))[:n]
    return (images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28), labels.astype(np.int32)


def adam_init(params):
    import jax
    import jax.numpy as jnp
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return (zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.zeros((), jnp.float32))


def adam_update(params, grads, state, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    import jax
    import jax.numpy as jnp
    m, v, t = state
    t = t + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    c1 = 1 - b1 ** t
    c2 = 1 - b2 ** t
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, m, v)
    return params, (m, v, t)


def cross_entropy(logits, labels):
    import jax
    import jax.numpy as jnp
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def run(name, init_params, loss_fn, default_steps, uses_rng=False):
    """Times `steps` Adam steps of loss_fn(params, x, y[, key]) and prints the result."""
    args = parse_args(default_steps)
    import jax
    import numpy as np

    batch = 64
    x_all, y_all = load_train(args.data, args.steps * batch)

    def step(params, state, x, y, key):
        if uses_rng:
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y, key)
        else:
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params, state = adam_update(params, grads, state)
        return params, state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    rng = np.random.default_rng(1)

    def one_pass(params, state, key):
        order = rng.permutation(len(x_all))
        loss = None
        for s in range(args.steps):
            idx = order[s * batch:(s + 1) * batch]
            key, sub = jax.random.split(key)
            params, state, loss = step(params, state, x_all[idx], y_all[idx], sub)
        loss.block_until_ready()
        return params, state, key

    params = init_params(jax.random.PRNGKey(0))
    state = adam_init(params)
    key = jax.random.PRNGKey(1)
    params, state, key = one_pass(params, state, key)  # warm-up: compilation
    best = 0.0
    for _ in range(args.reps):
        start = time.perf_counter()
        params, state, key = one_pass(params, state, key)
        best = max(best, args.steps * batch / (time.perf_counter() - start))
    print(f"  jax {jax.__version__} {name} train samples/s t={args.threads} ({args.steps} steps) "
          f"{best:10.4g} samples/s")
    if args.ours:
        ours = None
        with open(args.ours) as f:
            for line in f:
                m = re.search(rf"^\s*{name} train samples/s t={args.threads} \(\d+ steps\)\s+([0-9.e+]+) samples/s",
                              line)
                if m:
                    ours = float(m.group(1))
        if ours is None:
            print(f"  (no '{name} train samples/s t={args.threads}' line in {args.ours} to compare with)")
        else:
            print(f"  {name + ' ours vs jax t=' + str(args.threads):<44} {ours:10.4g} samples/s ref {best:10.4g} "
                  f"samples/s (jax, same net/batch/Adam)  ratio {ours / best:.3f}")
    sys.stdout.flush()
