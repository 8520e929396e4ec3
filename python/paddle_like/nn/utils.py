"""Gradient clipping, as torch.nn.utils: in place on the parameters' .grad, so it works
on a local model before opt.step() and on a ParameterServerModel before step() (which
pushes the clipped gradients)."""

import math

import numpy as np

from .. import _C

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    grads = []
    for p in parameters:
        if not isinstance(p, _C.Tensor):
            raise TypeError(f"clipping takes dense Tensors; got {type(p).__name__} "
                            f"(embedding tables' sparse rows are not clipped)")
        if p.grad is not None:
            grads.append(np.asarray(p.grad))
    return grads


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their total norm (all of them as one vector) is at
    most max_norm; returns the norm before clipping (a float). norm_type: a p >= 1 or
    inf. Dense Tensors only: pass [p for p in model.parameters() if isinstance(p,
    pl.Tensor)] for a model with embedding tables."""
    max_norm, norm_type = float(max_norm), float(norm_type)
    if max_norm < 0:
        raise ValueError(f"max_norm must be >= 0, got {max_norm}")
    if not (norm_type >= 1 or math.isinf(norm_type)):
        raise ValueError(f"norm_type must be >= 1 or inf, got {norm_type}")
    grads = _grads(parameters)
    if not grads:
        return 0.0
    if math.isinf(norm_type):
        total = max(float(np.abs(g).max()) for g in grads)
    else:
        total = float(sum(float(np.sum(np.abs(g, dtype=np.float64) ** norm_type)) for g in grads)
                      ** (1.0 / norm_type))
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(f"the total norm of the gradients is {total}: not clipping")
        return total
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for g in grads:
            g *= np.float32(scale)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    if clip_value < 0:
        raise ValueError(f"clip_value must be >= 0, got {clip_value}")
    for g in _grads(parameters):
        np.clip(g, -clip_value, clip_value, out=g)
