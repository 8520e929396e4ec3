"""Saving and loading in the safetensors format (https://huggingface.co/docs/safetensors),
so the files open in other tools (the `safetensors` package, or a JSON header plus raw
little-endian data). See paddle_like/io/safetensors.h for the layout.

    paddle_like.save(model, "model.safetensors")      # every parameter by dotted name
    paddle_like.load(model, "model.safetensors")      # checked in full before any change
    arrays = paddle_like.load("model.safetensors")    # {name: ndarray}
"""

import os

from . import _C
from .nn.module import Module

__all__ = ["save", "load", "save_tensors", "load_tensors"]


def save(obj, path):
    """Writes a model's parameters (dense ones by name; an embedding table as "<name>"
    rows plus "<name>.ids"), or a {name: array/Tensor} dict, atomically."""
    path = os.fspath(path)
    if isinstance(obj, Module):
        if obj._cpp is None:
            raise ValueError(f"save: {type(obj).__name__} has no parameters")
        _C.save_module(obj._cpp, path)
    elif isinstance(obj, dict):
        save_tensors(obj, path)
    else:
        raise TypeError(f"save: expected an nn.Module or a dict of arrays, got {type(obj).__name__}")


def load(model_or_path, path=None):
    """load(model, path) fills the model's parameters from the file: FileNotFoundError
    when the file is missing, KeyError when a parameter is missing from it, ValueError
    for a wrong shape or dtype, OSError for a corrupt file; on any error the model is
    left as it was. load(path) returns {name: ndarray}."""
    if path is None:
        return load_tensors(model_or_path)
    if not isinstance(model_or_path, Module):
        raise TypeError(f"load: expected an nn.Module, got {type(model_or_path).__name__}")
    if model_or_path._cpp is None:
        raise ValueError(f"load: {type(model_or_path).__name__} has no parameters")
    model_or_path._cpp.named_parameters()  # embedding tables learn their full names
    _C.load_module(model_or_path._cpp, os.fspath(path))


def save_tensors(tensors, path, metadata=None):
    """Writes {name: float32/int64 array or Tensor} (in dict order) with string metadata."""
    items = [(str(k), v) for k, v in tensors.items()]
    _C.save_tensors(os.fspath(path), items, dict(metadata or {}))


def load_tensors(path, with_metadata=False):
    """{name: ndarray} in file order (views of one buffer; no copy); with_metadata=True
    returns (tensors, metadata)."""
    tensors, metadata = _C.load_tensors(os.fspath(path))
    return (tensors, metadata) if with_metadata else tensors
