"""The torch-style Tensor surface beyond the C++ class's own methods: creation
functions (zeros, ones, full, arange, randn, rand, *_like), reductions along a
dimension and argmax, element-wise math (exp, log, pow/**, sqrt, abs, clamp),
transposes and unsqueeze/squeeze. The math runs in C++ (differentiable where torch's
is); this module only gives it torch's names and is installed on paddle_like.Tensor at
import.
"""

import numpy as np

from . import _C
from ._random import next_seed

__all__ = ["zeros", "ones", "full", "arange", "randn", "rand", "zeros_like", "ones_like", "argmax", "exp",
           "log", "sqrt", "abs", "clamp", "transpose"]

Tensor = _C.Tensor


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size)


def zeros(*size, requires_grad=False):
    return Tensor(np.zeros(_shape(size), np.float32), requires_grad=requires_grad)


def ones(*size, requires_grad=False):
    return Tensor(np.ones(_shape(size), np.float32), requires_grad=requires_grad)


def full(size, fill_value, requires_grad=False):
    return Tensor(np.full(_shape((size,)), fill_value, np.float32), requires_grad=requires_grad)


def arange(start, end=None, step=1):
    """int64 when every bound is an integer (as torch), else float32."""
    values = np.arange(start, end, step) if end is not None else np.arange(start)
    integral = all(isinstance(v, (int, np.integer)) for v in (start, end if end is not None else 0, step))
    return Tensor(values.astype(np.int64 if integral else np.float32))


def randn(*size, requires_grad=False, generator=None):
    rng = generator if generator is not None else np.random.default_rng(next_seed())
    return Tensor(rng.standard_normal(_shape(size)).astype(np.float32), requires_grad=requires_grad)


def rand(*size, requires_grad=False, generator=None):
    rng = generator if generator is not None else np.random.default_rng(next_seed())
    return Tensor(rng.random(_shape(size)).astype(np.float32), requires_grad=requires_grad)


def zeros_like(t):
    return zeros(*t.shape)


def ones_like(t):
    return ones(*t.shape)


def argmax(t, dim=None, keepdim=False):
    return _C.argmax(t, dim, keepdim)


def exp(t):
    return _C.exp(t)


def log(t):
    return _C.log(t)


def sqrt(t):
    return _C.sqrt(t)


def abs(t):  # noqa: A001 - torch's name
    return _C.abs(t)


def clamp(t, min=None, max=None):  # noqa: A002 - torch's names
    if min is None and max is None:
        raise ValueError("clamp: give min, max or both")
    return _C.clamp(t, min, max)


def transpose(t, dim0, dim1):
    return _C.transpose(t, dim0, dim1)


def _max(self, dim=None, keepdim=False):
    """No dim: the largest value (a scalar Tensor); with dim: (values, indices)."""
    if dim is None:
        values, _ = _C.max_dim(self.reshape(-1), 0, False)
        return values
    return _C.max_dim(self, dim, keepdim)


def _unsqueeze(self, dim):
    shape = list(self.shape)
    dim = dim + len(shape) + 1 if dim < 0 else dim
    if not 0 <= dim <= len(shape):
        raise IndexError(f"unsqueeze: dim {dim} out of range for {len(shape)} dimensions")
    return self.reshape(*shape[:dim], 1, *shape[dim:])


def _squeeze(self, dim=None):
    shape = list(self.shape)
    if dim is None:
        return self.reshape(*[s for s in shape if s != 1])
    dim = dim + len(shape) if dim < 0 else dim
    if not 0 <= dim < len(shape):
        raise IndexError(f"squeeze: dim {dim} out of range for {len(shape)} dimensions")
    return self.reshape(*(shape[:dim] + shape[dim + 1:])) if shape[dim] == 1 else self


def _t(self):
    if self.ndim > 2:
        raise ValueError(f"t(): expects a tensor of at most 2 dimensions, got {self.ndim}")
    return self if self.ndim < 2 else _C.transpose(self, 0, 1)


def _requires_grad_(self, requires_grad=True):
    self.requires_grad = requires_grad
    return self


def _pow(self, exponent):
    if isinstance(exponent, Tensor):
        raise TypeError("pow: the exponent must be a number (a Tensor exponent is not supported)")
    return _C.pow(self, float(exponent))


def _install():
    methods = {
        "max": _max, "argmax": argmax, "exp": exp, "log": log, "sqrt": sqrt, "abs": abs, "clamp": clamp,
        "pow": _pow, "__pow__": _pow, "transpose": transpose, "t": _t, "unsqueeze": _unsqueeze,
        "squeeze": _squeeze, "requires_grad_": _requires_grad_,
        "float": lambda self: self if self.dtype == "float32" else Tensor(self.numpy().astype(np.float32)),
        "long": lambda self: self if self.dtype == "int64" else Tensor(self.numpy().astype(np.int64)),
    }
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(_t)


_install()
