"""Peer benchmark: the mlp (784-512-256-10, ReLU, Adam, batch 64) in JAX on CPU.

    build/venv/bin/python benchmarks/peer_mlp.py --threads 1 [--ours core-report.txt]

See peer_common.py for the protocol; it matches pl-bench-core's "train" section.
"""
import math

import peer_common


def init_params(key):
    import jax
    import jax.numpy as jnp
    sizes = [(784, 512), (512, 256), (256, 10)]
    params = []
    for (fan_in, fan_out), k in zip(sizes, jax.random.split(key, len(sizes))):
        a = math.sqrt(6.0 / (fan_in + fan_out))  # Glorot uniform, as our Linear
        params.append((jax.random.uniform(k, (fan_in, fan_out), jnp.float32, -a, a), jnp.zeros((fan_out,))))
    return params


def loss_fn(params, x, y):
    import jax
    h = x.reshape(x.shape[0], -1)
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return peer_common.cross_entropy(h, y)


if __name__ == "__main__":
    peer_common.run("mlp", init_params, loss_fn, default_steps=400)
