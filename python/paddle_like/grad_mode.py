"""Turning the autograd graph off, as in torch: no_grad, enable_grad, inference_mode,
set_grad_enabled and is_grad_enabled.

    with paddle_like.no_grad():          # evaluation: no graph, activations freed early
        logits = model(images)

    @paddle_like.no_grad()               # or @paddle_like.no_grad
    def evaluate(model, images):
        return model(images)

While grad recording is off, ops (layers, losses, Tensor arithmetic) return Tensors
that do not require a gradient and keep no reference to their inputs; calling
backward() on one raises RuntimeError. Leaf Tensors keep their own requires_grad.

The switch is per thread (the C++ one in paddle_like/core/grad_mode.h): entering a
context on one thread does not affect another, and each thread starts with recording
on. Every context restores the previous state on exit, also when the block raises.
"""

import functools
import inspect

from . import _C

__all__ = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled"]


def is_grad_enabled():
    """Whether ops on this thread record the autograd graph."""
    return _C.is_grad_enabled()


class _GradMode:
    """A context manager and decorator that sets grad recording to `self._mode` (None:
    leave it as it is) for its block, restoring the previous state on exit."""

    _mode = None

    def __init__(self):
        self._previous = []  # a stack, so one instance may be entered re-entrantly

    def __enter__(self):
        self._previous.append(_C.is_grad_enabled() if self._mode is None
                              else _C.set_grad_enabled(self._mode))
        return self

    def __exit__(self, exc_type, exc, tb):
        _C.set_grad_enabled(self._previous.pop())
        return False

    def clone(self):
        return type(self)()

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}() decorates a function, got {type(fn).__name__}")
        if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) \
                or inspect.isasyncgenfunction(fn):
            raise TypeError(f"{type(self).__name__}: decorating generator or async function "
                            f"{fn.__qualname__} is not supported; use `with` inside it")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class _NoParamGradMode(_GradMode):
    """Also usable as a bare decorator: @no_grad as well as @no_grad()."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamGradMode):
    """Ops in the block record no graph (evaluation, inference, updates by hand)."""

    _mode = False


class enable_grad(_NoParamGradMode):
    """Ops in the block record the graph, even inside no_grad."""

    _mode = True


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): sets recording to `mode` at once (so it also works as a
    plain call) and, used as a context manager, restores the previous state on exit."""

    def __init__(self, mode):
        super().__init__()
        self._mode = bool(mode)
        self._previous.append(_C.set_grad_enabled(self._mode))

    def __enter__(self):
        return self  # already set by __init__

    def __call__(self, fn):
        # As a decorator, the mode applies to the calls only: undo what __init__ set.
        _C.set_grad_enabled(self._previous.pop())
        return super().__call__(fn)

    def clone(self):
        return set_grad_enabled(self._mode)


class inference_mode(_GradMode):
    """inference_mode(mode=True): as no_grad while `mode` is true (paddle_like has no
    separate inference-only tensors, so the two behave alike); inference_mode(False)
    leaves recording as it is. Also usable as a bare decorator."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        super().__init__()
        self._mode = False if mode else None

    def clone(self):
        return inference_mode(self._mode is False)
