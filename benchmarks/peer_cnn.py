"""Peer benchmark: the cnn (TensorFlow tutorial network: conv5x5x32 same, ReLU,
maxpool2, conv5x5x64 same, ReLU, maxpool2, fc1024, ReLU, dropout 0.4, fc10; Adam,
batch 64, NCHW as ours) in JAX on CPU.

    build/venv/bin/python benchmarks/peer_cnn.py --threads 1 [--ours core-report.txt]

See peer_common.py for the protocol; it matches pl-bench-core's "train" section.
"""
import math

import peer_common


def init_params(key):
    import jax
    import jax.numpy as jnp
    k = jax.random.split(key, 4)

    def he(key, shape, fan_in):
        a = math.sqrt(6.0 / fan_in)
        return jax.random.uniform(key, shape, jnp.float32, -a, a)

    return {
        "conv1": (he(k[0], (32, 1, 5, 5), 25), jnp.zeros((32,))),
        "conv2": (he(k[1], (64, 32, 5, 5), 800), jnp.zeros((64,))),
        "fc1": (he(k[2], (3136, 1024), 3136), jnp.zeros((1024,))),
        "fc2": (he(k[3], (1024, 10), 1024), jnp.zeros((10,))),
    }


def loss_fn(params, x, y, key):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def conv(h, wb):
        w, b = wb
        h = lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return h + b[None, :, None, None]

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    h = pool(jax.nn.relu(conv(x, params["conv1"])))
    h = pool(jax.nn.relu(conv(h, params["conv2"])))
    h = h.reshape(h.shape[0], -1)
    h = jax.nn.relu(h @ params["fc1"][0] + params["fc1"][1])
    keep = jax.random.bernoulli(key, 0.6, h.shape)
    h = jnp.where(keep, h / 0.6, 0.0)
    h = h @ params["fc2"][0] + params["fc2"][1]
    return peer_common.cross_entropy(h, y)


if __name__ == "__main__":
    peer_common.run("cnn", init_params, loss_fn, default_steps=40, uses_rng=True)
