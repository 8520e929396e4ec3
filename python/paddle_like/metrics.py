"""Evaluation metrics over whole prediction sets."""

import numpy as np

from . import _C

__all__ = ["accuracy", "auc", "count_correct"]


def count_correct(logits, labels):
    """Rows predicted right: argmax == label for (B, K) logits; (logit > 0) == (label > 0.5)
    for (B) or (B, 1) logits. ValueError when the shapes do not fit."""
    return _C.count_correct(logits, labels)


def accuracy(logits, labels):
    n = len(labels)
    return count_correct(logits, labels) / n if n else float("nan")


def auc(scores, labels):
    """Exact ROC AUC (ties count one half); NaN when only one class is present."""
    return _C.binary_auc(np.asarray(scores, dtype=np.float32).ravel(),
                         np.asarray(labels, dtype=np.float32).ravel())
