"""Parameter initialisation in place, named like torch.nn.init: each fills a float32
Tensor (a parameter's live memory) and returns it.

Fans follow the parameter's layout: a paddle_like Linear weight is stored (in, out),
the transpose of torch's, so its fan_in is its first dimension (a Linear's weight is
recognised by the layer that owns it); any other 2-D tensor is taken as torch's
(out, in), and a convolution weight (out, in, kh, kw) as torch's. Random draws use
paddle_like's seed (pl.manual_seed) unless a NumPy Generator is passed.
"""

import math
import weakref

import numpy as np

from .. import _C
from .._random import next_seed

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_"]

# Node ids of Linear weights, stored (in, out): registered by nn.Linear.
_in_out_weights = weakref.WeakValueDictionary()


def _register_in_out(tensor, owner):
    _in_out_weights[tensor._node_id] = owner


def _array(tensor, what):
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"{what}: expected a Tensor (a dense parameter), got {type(tensor).__name__}")
    a = np.asarray(tensor)
    if a.dtype != np.float32:
        raise TypeError(f"{what}: expected a float32 Tensor, got {a.dtype}")
    return a


def _rng(generator):
    return generator if generator is not None else np.random.default_rng(next_seed())


def _fans(tensor, a):
    if a.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor of 2 or more dimensions, got shape {a.shape}")
    receptive = int(np.prod(a.shape[2:])) if a.ndim > 2 else 1
    if a.ndim == 2 and tensor._node_id in _in_out_weights:
        return a.shape[0], a.shape[1]
    return a.shape[1] * receptive, a.shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    """torch's gains: linear/conv/sigmoid 1, tanh 5/3, relu sqrt(2), leaky_relu
    sqrt(2 / (1 + slope^2)) (slope param, default 0.01), selu 3/4."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    arr = _array(tensor, "uniform_")
    arr[...] = _rng(generator).uniform(a, b, arr.shape)
    return tensor


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    arr = _array(tensor, "normal_")
    arr[...] = _rng(generator).normal(mean, std, arr.shape)
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal values redrawn until they fall in [a, b]."""
    arr = _array(tensor, "trunc_normal_")
    rng = _rng(generator)
    out = rng.normal(mean, std, arr.shape)
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = rng.normal(mean, std, int(bad.sum()))
        bad = (out < a) | (out > b)
    arr[...] = out
    return tensor


def constant_(tensor, val):
    _array(tensor, "constant_")[...] = val
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    arr = _array(tensor, "xavier_uniform_")
    fan_in, fan_out = _fans(tensor, arr)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    arr = _array(tensor, "xavier_normal_")
    fan_in, fan_out = _fans(tensor, arr)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(tensor, arr, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(tensor, arr)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    arr = _array(tensor, "kaiming_uniform_")
    bound = math.sqrt(3.0) * _kaiming_std(tensor, arr, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    arr = _array(tensor, "kaiming_normal_")
    return normal_(tensor, 0.0, _kaiming_std(tensor, arr, a, mode, nonlinearity), generator)
