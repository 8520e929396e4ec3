"""Normalisation layers, as torch.nn: LayerNorm, BatchNorm1d and BatchNorm2d (C++
layers: paddle_like/nn/normalization.h).

In a distributed job, weight and bias are parameters like any other (on the pservers,
updated by every trainer's gradients). BatchNorm's batch statistics are those of each
trainer's own batch (as DistributedDataParallel without SyncBatchNorm), and its running
mean and variance are buffers: each trainer keeps its own, they never go to the
pservers, and they are saved with the model (state_dict, pl.save) from the trainer
that saves it.
"""

from .. import _C
from .layers import _Layer

__all__ = ["LayerNorm", "BatchNorm1d", "BatchNorm2d"]


class LayerNorm(_Layer):
    """Normalises over the last len(normalized_shape) dimensions (biased variance), then
    scales by "weight" (ones) and shifts by "bias" (zeros) when elementwise_affine."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        shape = [int(normalized_shape)] if isinstance(normalized_shape, int) else [int(s) for s in normalized_shape]
        self.normalized_shape, self.eps = tuple(shape), float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        super().__init__(_C.LayerNorm(shape, self.eps, self.elementwise_affine))

    @property
    def weight(self):
        return self._param("weight") if self.elementwise_affine else None

    @property
    def bias(self):
        return self._param("bias") if self.elementwise_affine else None

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps:g}, elementwise_affine={self.elementwise_affine}"


class _BatchNorm(_Layer):
    _ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        if momentum is None:
            raise ValueError(f"{type(self).__name__}: momentum=None (a cumulative average) is not supported")
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        super().__init__(_C.BatchNorm(self.num_features, self.eps, self.momentum, self.affine,
                                      self.track_running_stats))

    def forward(self, x):
        if x.ndim not in self._ranks:
            raise ValueError(f"{type(self).__name__}: expected a {' or '.join(f'{r}-D' for r in self._ranks)} "
                             f"input, got shape {tuple(x.shape)}")
        return self._cpp.forward(x)

    @property
    def weight(self):
        return self._param("weight") if self.affine else None

    @property
    def bias(self):
        return self._param("bias") if self.affine else None

    @property
    def running_mean(self):
        return self._cpp.running_mean

    @property
    def running_var(self):
        return self._cpp.running_var

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps:g}, momentum={self.momentum:g}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over (N, C) or (N, C, L): per channel, the batch's mean and (biased) variance in
    training (running statistics updated with the unbiased one), the running ones in
    eval mode."""
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over (N, C, H, W), per channel; see BatchNorm1d."""
    _ranks = (4,)
