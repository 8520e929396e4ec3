"""Functional forms of the ops (differentiable where they return Tensors)."""

from .. import _C


def relu(x):
    return _C.relu(x)


def sigmoid(x):
    return _C.sigmoid(x)


def tanh(x):
    return _C.tanh(x)


def cat(tensors, dim=0):
    return _C.cat(list(tensors), dim)


def cross_entropy(logits, target):
    """logits float32 (B, K), target int64 (B): mean softmax cross-entropy."""
    return _C.cross_entropy(logits, target)


def binary_cross_entropy_with_logits(logits, target):
    """logits float32 (B) or (B, 1), target float32 (B): mean sigmoid cross-entropy."""
    return _C.binary_cross_entropy_with_logits(logits, target)


def softmax(logits):
    """Row-wise softmax of (B, K) values (not differentiable: for predictions)."""
    return _C.softmax(logits)


def flatten(x):
    """(N, ...) -> (N, -1), differentiable."""
    n = x.shape[0]
    return x.reshape(n, -1)
