"""Loss modules, as in torch.nn (scalar results with the default reduction="mean")."""

from .. import _C
from .module import Module, NO_CPP


class _Loss(Module):
    _reductions = ("mean",)

    def __init__(self, reduction="mean"):
        if reduction not in self._reductions:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {', '.join(self._reductions)}, "
                             f"got {reduction!r}")
        self.reduction = reduction
        super().__init__(NO_CPP)


class CrossEntropyLoss(_Loss):
    """Softmax cross-entropy. logits float32 (B, K), target int64 class indices (B)."""

    def forward(self, logits, target):
        return _C.cross_entropy(logits, target)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid binary cross-entropy. logits float32 (B) or (B, 1), target float32 (B) in [0, 1]."""

    def forward(self, logits, target):
        return _C.binary_cross_entropy_with_logits(logits, target)


class MSELoss(_Loss):
    """(input - target)^2, averaged (mean), summed (sum) or per element (none)."""
    _reductions = ("mean", "sum", "none")

    def forward(self, input, target):
        return _C.mse_loss(input, target, self.reduction)


class L1Loss(MSELoss):
    """|input - target|, reduced as MSELoss."""

    def forward(self, input, target):
        return _C.l1_loss(input, target, self.reduction)


class NLLLoss(_Loss):
    """-log_probs[i, target[i]] (log_probs (B, C) from log_softmax), reduced; targets
    equal to ignore_index count for nothing."""
    _reductions = ("mean", "sum", "none")

    def __init__(self, reduction="mean", ignore_index=-100):
        super().__init__(reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, log_probs, target):
        return _C.nll_loss(log_probs, target, self.reduction, self.ignore_index)
