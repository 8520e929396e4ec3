"""torch.nn.utils's everyday helpers: gradient clipping (in place on the parameters'
.grad, so it works on a local model before opt.step() and on a ParameterServerModel
before step(), which pushes the clipped gradients), and loading a torch state_dict
into the same model written with paddle_like (names and layouts mapped)."""

import math

import numpy as np

from .. import _C

__all__ = ["clip_grad_norm_", "clip_grad_value_", "load_torch_state_dict"]


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    grads = []
    for p in parameters:
        if not isinstance(p, _C.Tensor):
            raise TypeError(f"clipping takes dense Tensors; got {type(p).__name__} "
                            f"(embedding tables' sparse rows are not clipped)")
        if p.grad is not None:
            grads.append(np.asarray(p.grad))
    return grads


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their total norm (all of them as one vector) is at
    most max_norm; returns the norm before clipping (a float). norm_type: a p >= 1 or
    inf. Dense Tensors only: pass [p for p in model.parameters() if isinstance(p,
    pl.Tensor)] for a model with embedding tables."""
    max_norm, norm_type = float(max_norm), float(norm_type)
    if max_norm < 0:
        raise ValueError(f"max_norm must be >= 0, got {max_norm}")
    if not (norm_type >= 1 or math.isinf(norm_type)):
        raise ValueError(f"norm_type must be >= 1 or inf, got {norm_type}")
    grads = _grads(parameters)
    if not grads:
        return 0.0
    if math.isinf(norm_type):
        total = max(float(np.abs(g).max()) for g in grads)
    else:
        total = float(sum(float(np.sum(np.abs(g, dtype=np.float64) ** norm_type)) for g in grads)
                      ** (1.0 / norm_type))
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(f"the total norm of the gradients is {total}: not clipping")
        return total
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for g in grads:
            g *= np.float32(scale)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    if clip_value < 0:
        raise ValueError(f"clip_value must be >= 0, got {clip_value}")
    for g in _grads(parameters):
        np.clip(g, -clip_value, clip_value, out=g)


# Keys torch keeps that have no counterpart here (BatchNorm's batch counter).
_TORCH_ONLY_SUFFIXES = (".num_batches_tracked",)


def _as_numpy(value):
    if hasattr(value, "detach"):  # a torch.Tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def load_torch_state_dict(model, state_dict, strict=True):
    """Loads a torch model's state_dict (torch.Tensors or arrays) into `model`, the same
    architecture written with paddle_like (same attribute names): "fc.weight"/"fc.bias"
    go to "fc.w"/"fc.b", a Linear's (out, in) weight is transposed to this Linear's
    (in, out), Conv2d weights keep their layout, an Embedding's dense "weight" fills
    the table's rows 0..N-1, LayerNorm/BatchNorm keep their names (num_batches_tracked
    is ignored). Returns (missing_keys, unexpected_keys) as load_state_dict does;
    strict=True raises KeyError listing them. Values are converted to float32."""
    from .layers import Embedding, Linear

    kinds = {}  # our key -> (torch key, transform)
    for prefix, module in model.named_modules():
        dot = f"{prefix}." if prefix else ""
        if isinstance(module, Linear):
            kinds[f"{dot}w"] = (f"{dot}weight", lambda a: a.T)
            kinds[f"{dot}b"] = (f"{dot}bias", None)
        elif isinstance(module, Embedding):
            kinds[f"{dot}table"] = (f"{dot}weight", "rows")
    ours = model.state_dict()
    mapped, used = {}, set()
    for key in ours:
        if key.endswith(".ids") and key[:-4] in kinds and kinds[key[:-4]][1] == "rows":
            continue
        torch_key, transform = kinds.get(key, (key, None))
        if key.endswith(".w") and key not in kinds:
            torch_key = key[:-2] + ".weight"
        elif key.endswith(".b") and key not in kinds:
            torch_key = key[:-2] + ".bias"
        if torch_key not in state_dict:
            continue
        used.add(torch_key)
        value = _as_numpy(state_dict[torch_key]).astype(np.float32)
        if transform == "rows":
            mapped[key] = value
            mapped[key + ".ids"] = np.arange(len(value), dtype=np.int64)
        else:
            mapped[key] = np.ascontiguousarray(transform(value) if transform else value)
    unexpected = [k for k in state_dict if k not in used and not k.endswith(_TORCH_ONLY_SUFFIXES)]
    missing = [k for k in ours if k not in mapped]
    if strict and (missing or unexpected):
        raise KeyError(f"load_torch_state_dict into {type(model).__name__}: "
                       + "; ".join(p for p in (
                           "missing keys " + ", ".join(map(repr, missing)) if missing else "",
                           "unexpected torch keys " + ", ".join(map(repr, unexpected)) if unexpected else "")
                           if p))
    model.load_state_dict(mapped, strict=False)
    from .module import IncompatibleKeys
    return IncompatibleKeys(missing, unexpected)
