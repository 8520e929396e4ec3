"""Functional forms of the ops, as torch.nn.functional (differentiable where they
return float Tensors). Weights take torch's layouts: linear's (out, in), conv2d's
(out, in, kh, kw), embedding's (num, dim)."""

from .. import _C
from .._random import next_seed
from .activation import avg_pool2d

__all__ = ["relu", "sigmoid", "tanh", "gelu", "softmax", "log_softmax", "cat", "cross_entropy",
           "binary_cross_entropy_with_logits", "mse_loss", "l1_loss", "nll_loss", "linear", "conv2d", "max_pool2d",
           "avg_pool2d", "embedding", "dropout", "layer_norm", "batch_norm", "flatten"]


def relu(x):
    return _C.relu(x)


def sigmoid(x):
    return _C.sigmoid(x)


def tanh(x):
    return _C.tanh(x)


def gelu(x, approximate="none"):
    if approximate != "none":
        raise ValueError(f"gelu: only approximate='none' (the erf form) is supported, got {approximate!r}")
    return _C.gelu(x)


def softmax(x, dim=-1):
    return _C.softmax(x, dim)


def log_softmax(x, dim=-1):
    return _C.log_softmax(x, dim)


def cat(tensors, dim=0):
    return _C.cat(list(tensors), dim)


def cross_entropy(logits, target):
    """logits float32 (B, K), target int64 (B): mean softmax cross-entropy."""
    return _C.cross_entropy(logits, target)


def binary_cross_entropy_with_logits(logits, target):
    """logits float32 (B) or (B, 1), target float32 (B): mean sigmoid cross-entropy."""
    return _C.binary_cross_entropy_with_logits(logits, target)


def mse_loss(input, target, reduction="mean"):
    return _C.mse_loss(input, target, reduction)


def l1_loss(input, target, reduction="mean"):
    return _C.l1_loss(input, target, reduction)


def nll_loss(log_probs, target, reduction="mean", ignore_index=-100):
    return _C.nll_loss(log_probs, target, reduction, ignore_index)


def linear(x, weight, bias=None):
    """x @ weight.T + bias, weight (out, in) as torch's."""
    return _C.linear(x, weight, bias)


def conv2d(x, weight, bias=None, stride=1, padding=0):
    """Square stride and symmetric padding (ints)."""
    return _C.conv2d(x, weight, bias, int(stride), int(padding))


def max_pool2d(x, kernel_size, stride=None):
    """Square kernel, no padding; stride defaults to the kernel."""
    return _C.max_pool2d(x, int(kernel_size), 0 if stride is None else int(stride))


def embedding(ids, weight):
    """Rows of a dense weight (num, dim) for int64 ids (any shape); gradient to weight."""
    return _C.embedding(ids, weight)


def dropout(x, p=0.5, training=True):
    """Inverted dropout; identity when not training. Masks come from paddle_like's seed."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    return _C.dropout(x, float(p), bool(training), next_seed())


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [int(normalized_shape)] if isinstance(normalized_shape, int) else [int(s) for s in normalized_shape]
    return _C.layer_norm(x, shape, weight, bias, float(eps))


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Running statistics (float32 Tensors or arrays) are updated in place in training."""
    return _C.batch_norm(x, running_mean, running_var, weight, bias, bool(training), float(momentum), float(eps))


def flatten(x):
    """(N, ...) -> (N, -1), differentiable."""
    n = x.shape[0]
    return x.reshape(n, -1)
