"""paddle_like: a parameter-server deep-learning framework in C++, with a PyTorch-style
Python API.

    import numpy as np
    import paddle_like as pl
    from paddle_like import nn

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = pl.optim.Adam(model.parameters(), lr=1e-3)
    loss = nn.CrossEntropyLoss()(model(images), labels)   # images float32, labels int64
    loss.backward()
    opt.step()                                            # applies, then clears the grads
    with pl.no_grad():                                    # evaluation: no graph recorded
        accuracy = pl.metrics.accuracy(model(test_images).numpy(), test_labels)
    pl.save(model, "model.safetensors")

Tensors share memory with NumPy where that is safe (see paddle_like.Tensor); C++
errors arrive as ValueError / KeyError / FileNotFoundError / OSError / RuntimeError
carrying the C++ message. The heavy work (layers, backward, optimizer steps, data
loading, parameter-server traffic) runs in C++ with the GIL released.
"""

from . import _cuda_path
_cuda_path.add_nvidia_wheel_dirs()  # before anything opens a CUDA library
from . import _C
from ._C import Tensor, matmul, set_num_threads, get_num_threads
from ._random import manual_seed, initial_seed
from .grad_mode import no_grad, enable_grad, inference_mode, set_grad_enabled, is_grad_enabled
from . import nn
from . import optim
from . import data
from . import metrics
from . import utils
from . import training
from . import distributed
from . import kv
from . import tensorboard
from . import cuda
from .serialization import save, load, save_tensors, load_tensors
# Not `log`: paddle_like.log is the logging module (Tensor.log() is the logarithm).
from .tensor_api import (zeros, ones, full, arange, randn, rand, zeros_like, ones_like, argmax, exp, sqrt,
                         abs, clamp, transpose)

__all__ = [
    "Tensor", "tensor", "from_numpy", "matmul", "cat", "manual_seed", "initial_seed",
    "set_num_threads", "get_num_threads",
    "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
    "nn", "optim", "data", "metrics", "utils", "training", "distributed", "cuda",
    "save", "load", "save_tensors", "load_tensors",
    "zeros", "ones", "full", "arange", "randn", "rand", "zeros_like", "ones_like", "argmax", "exp", "sqrt",
    "abs", "clamp", "transpose",
]

__version__ = "0.1.0"


def tensor(data, requires_grad=False):
    """A Tensor over `data` (an ndarray, a list or a number).

    A float32 or int64 ndarray that is C-contiguous, aligned and writeable is shared,
    not copied: the Tensor keeps the array alive, and writes through either are seen by
    the other. Any other layout (a strided slice, Fortran order, a read-only array) is
    copied. Other dtypes raise TypeError naming the dtype (convert explicitly with
    ``arr.astype(np.float32)``); lists and numbers become float32 (floats) or int64
    (integers).
    """
    return Tensor(data, requires_grad=requires_grad)


def from_numpy(array):
    """Same as :func:`tensor` for an ndarray (shares its memory where safe)."""
    return Tensor(array)


def cat(tensors, dim=0):
    """Joins float32 tensors along `dim` (differentiable)."""
    return _C.cat(list(tensors), dim)
