"""The built-in layers: each wraps one C++ layer of paddle_like/nn (shapes as there).

Parameters are initialised at construction from the global seed
(paddle_like.manual_seed); Module.init_parameters(seed) redraws them by name.
Dense parameter names: "w" and "b" (e.g. "fc1.w" inside a model); an Embedding's
table is "table".
"""

from .. import _C
from .._random import next_seed
from . import init
from .module import Module


def _pair(value, what):
    if isinstance(value, int):
        return value, value
    try:
        a, b = value
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an int or a pair of ints, got {value!r}") from None
    return int(a), int(b)


class _Layer(Module):
    """A module backed by one C++ layer; forward releases the GIL."""

    def __init__(self, cpp):
        super().__init__(cpp)
        if cpp.named_parameters():
            cpp.init_parameters(next_seed())

    def forward(self, x):
        return self._cpp.forward(x)

    def _param(self, name):
        return self._cpp.find_parameter(name)


class Linear(_Layer):
    """y = x W + b.  x: (B, in_features)  W "w": (in_features, out_features)  b "b": (out_features).

    Note W is stored (in, out), the transpose of torch.nn.Linear's weight."""

    def __init__(self, in_features, out_features, bias=True):
        self.in_features, self.out_features = int(in_features), int(out_features)
        if self.in_features <= 0 or self.out_features <= 0:
            raise ValueError(f"Linear({in_features}, {out_features}): sizes must be positive")
        super().__init__(_C.Linear(self.in_features, self.out_features, bool(bias)))
        init._register_in_out(self._param("w"), self)  # (in, out): nn.init's fans follow

    @property
    def weight(self):
        return self._param("w")

    @property
    def bias(self):
        names = [n for n, _ in self._cpp.named_parameters()]
        return self._param("b") if "b" in names else None

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Conv2d(_Layer):
    """2-D convolution over NCHW: x (N, C, H, W) -> (N, out_channels, Ho, Wo).

    kernel_size, stride: an int or a square pair; padding: an int, a symmetric pair or
    "same" (stride 1, odd square kernel). Parameters "w" (out, in, kh, kw) and "b"."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True):
        kh, kw = _pair(kernel_size, "kernel_size")
        sh, sw = _pair(stride, "stride")
        if sh != sw:
            raise ValueError(f"Conv2d: stride {stride} must be the same in both dimensions")
        if padding == "same":
            if sh != 1 or kh != kw or kh % 2 == 0:
                raise ValueError("Conv2d: padding='same' needs stride 1 and an odd square kernel")
            pad = kh // 2
        elif padding == "valid":
            pad = 0
        else:
            ph, pw = _pair(padding, "padding")
            if ph != pw:
                raise ValueError(f"Conv2d: padding {padding} must be the same in both dimensions")
            pad = ph
        self._desc = (f"{in_channels}, {out_channels}, kernel_size=({kh}, {kw}), stride={sh}, "
                      f"padding={pad}")
        super().__init__(_C.Conv2D(int(in_channels), int(out_channels), kh, kw, sh, pad, bool(bias)))

    @property
    def weight(self):
        return self._param("w")

    @property
    def bias(self):
        names = [n for n, _ in self._cpp.named_parameters()]
        return self._param("b") if "b" in names else None

    def extra_repr(self):
        return self._desc


class MaxPool2d(_Layer):
    """Max over kernel x kernel windows: (N, C, H, W) -> (N, C, Ho, Wo); stride
    defaults to the kernel size; no padding."""

    def __init__(self, kernel_size, stride=None):
        kh, kw = _pair(kernel_size, "kernel_size")
        if kh != kw:
            raise ValueError(f"MaxPool2d: kernel {kernel_size} must be square")
        s = kh if stride is None else _pair(stride, "stride")[0]
        self._desc = f"kernel_size={kh}, stride={s}"
        super().__init__(_C.MaxPool2D(kh, s))

    def extra_repr(self):
        return self._desc


class ReLU(_Layer):
    def __init__(self):
        super().__init__(_C.ReLU())


class Sigmoid(_Layer):
    def __init__(self):
        super().__init__(_C.Sigmoid())


class Tanh(_Layer):
    def __init__(self):
        super().__init__(_C.Tanh())


class Dropout(_Layer):
    """Inverted dropout with probability p in training mode, identity in eval mode.
    Masks are reproducible: drawn from (seed, call count); seed defaults to the
    global seed stream."""

    def __init__(self, p=0.5, seed=None):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = float(p)
        super().__init__(_C.Dropout(self.p, next_seed() if seed is None else int(seed)))

    def extra_repr(self):
        return f"p={self.p}"


class Flatten(_Layer):
    """(N, d1, d2, ...) -> (N, d1*d2*...), a view (no copy)."""

    def __init__(self, start_dim=1, end_dim=-1):
        if start_dim != 1 or end_dim != -1:
            raise ValueError("Flatten: only start_dim=1, end_dim=-1 is supported")
        super().__init__(_C.Flatten())


class Reshape(_Layer):
    """(N, ...) -> (N, *shape): the per-example shape (one entry may be -1), a view."""

    def __init__(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        self.shape = tuple(int(s) for s in shape)
        super().__init__(_C.Reshape(list(self.shape)))

    def extra_repr(self):
        return ", ".join(map(str, self.shape))


class Unflatten(Reshape):
    """torch.nn.Unflatten for dim 1: (N, prod(sizes)) -> (N, *sizes)."""

    def __init__(self, dim, unflattened_size):
        if dim != 1:
            raise ValueError("Unflatten: only dim=1 is supported")
        super().__init__(tuple(unflattened_size))


class Embedding(_Layer):
    """Looks up rows of a sparse table: ids int64 (B, F) or (B) -> (B, F, dim) or (B, dim).

    num_embeddings bounds the ids (0: any non-negative id, e.g. hashed features whose
    rows live on parameter servers). Rows are created on first use from N(0, init_std),
    deterministically per (seed, table name, id); the gradient is sparse (touched rows
    only), and the optimizers update only those rows (lazily).

    admit_after=N (trained on parameter servers): an id gets its own row there only at its
    Nth pushed update; until then it reads zeros and its gradients change nothing, which
    keeps ids seen once or twice out of the pservers' memory (0: a row at once).

    evict_after_s=S (on parameter servers): a row neither pulled nor pushed for S seconds
    is evicted; used again, it starts over from the initializer (0: kept until the
    pserver's memory cap, ``--sparse_memory_mb``, needs its room).

    optimizer=paddle_like.optim.spec(kind, lr, ...): the table's own update rule, on the
    parameter servers and in one process (default: the job's, or the optimizer's); e.g.
    Adagrad for the rows while Adam trains the dense layers."""

    def __init__(self, num_embeddings, embedding_dim, init_std=0.01, admit_after=0, evict_after_s=0, optimizer=None):
        if num_embeddings < 0 or embedding_dim <= 0:
            raise ValueError(f"Embedding({num_embeddings}, {embedding_dim}): num_embeddings must be "
                             f">= 0 and embedding_dim > 0")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if optimizer is not None and not isinstance(optimizer, _C.OptimizerSpec):
            raise TypeError("Embedding: optimizer must be a paddle_like.optim.spec(...)")
        super().__init__(_C.Embedding(self.num_embeddings, self.embedding_dim, float(init_std), int(admit_after),
                                      int(evict_after_s), optimizer))
        self.admit_after = int(admit_after)
        self.evict_after_s = int(evict_after_s)
        self.optimizer = optimizer

    @property
    def weight(self):
        return self._param("table")

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"
