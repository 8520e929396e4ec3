"""Activation and shape layers beyond ReLU/Sigmoid/Tanh, as torch.nn: GELU, Softmax,
LogSoftmax, Identity, and AvgPool2d (a mean over windows, built from the C++ mean
along dimensions)."""

from .. import _C
from .layers import _Layer, _pair
from .module import Module, NO_CPP

__all__ = ["GELU", "Softmax", "LogSoftmax", "Identity", "AvgPool2d"]


class GELU(_Layer):
    """x * Phi(x), the exact (erf) form torch uses by default."""

    def __init__(self, approximate="none"):
        if approximate != "none":
            raise ValueError(f"GELU: only approximate='none' (the erf form) is supported, got {approximate!r}")
        super().__init__(_C.GELU())


class Softmax(Module):
    def __init__(self, dim=-1):
        super().__init__(NO_CPP)
        self.dim = int(dim)

    def forward(self, x):
        return _C.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, x):
        return _C.log_softmax(x, self.dim)


class Identity(Module):
    """Returns its input (a placeholder layer, e.g. a removed head)."""

    def __init__(self, *args, **kwargs):
        super().__init__(NO_CPP)

    def forward(self, x):
        return x


def avg_pool2d(x, kernel_size, stride=None):
    """Mean over non-overlapping kernel x kernel windows of (N, C, H, W) (stride = kernel);
    H and W must be multiples of the kernel. Differentiable."""
    k, kw = _pair(kernel_size, "kernel_size")
    s = k if stride is None else _pair(stride, "stride")[0]
    if k != kw or s != k:
        raise ValueError(f"avg_pool2d: only square, non-overlapping windows (stride = kernel), got "
                         f"kernel {kernel_size}, stride {stride}")
    if x.ndim != 4:
        raise ValueError(f"avg_pool2d: expected (N, C, H, W), got shape {tuple(x.shape)}")
    n, c, h, w = x.shape
    if h % k or w % k:
        raise ValueError(f"avg_pool2d: H={h} and W={w} must be multiples of the kernel {k}")
    return _C.mean_dim(x.reshape(n, c, h // k, k, w // k, k), [3, 5], False)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None):
        super().__init__(NO_CPP)
        _pair(kernel_size, "kernel_size")  # a bad kernel fails here; sizes are checked per input
        self.kernel_size, self.stride = kernel_size, stride

    def forward(self, x):
        return avg_pool2d(x, self.kernel_size, self.stride)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"
