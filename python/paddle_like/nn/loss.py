"""Loss modules (mean over the batch, scalar result), as in torch.nn."""

from .. import _C
from .module import Module, NO_CPP


class _Loss(Module):
    def __init__(self, reduction="mean"):
        if reduction != "mean":
            raise ValueError(f"{type(self).__name__}: only reduction='mean' is supported, got {reduction!r}")
        super().__init__(NO_CPP)


class CrossEntropyLoss(_Loss):
    """Softmax cross-entropy. logits float32 (B, K), target int64 class indices (B)."""

    def forward(self, logits, target):
        return _C.cross_entropy(logits, target)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid binary cross-entropy. logits float32 (B) or (B, 1), target float32 (B) in [0, 1]."""

    def forward(self, logits, target):
        return _C.binary_cross_entropy_with_logits(logits, target)
