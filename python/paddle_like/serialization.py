"""Saving and loading in the safetensors format (https://huggingface.co/docs/safetensors),
so the files open in other tools (the `safetensors` package, or a JSON header plus raw
little-endian data). See paddle_like/io/safetensors.h for the layout.

    paddle_like.save(model, "model.safetensors")      # every parameter by dotted name
    paddle_like.load(model, "model.safetensors")      # checked in full before any change
    arrays = paddle_like.load("model.safetensors")    # {name: ndarray}

A checkpoint of several things, as torch users write it, is a nested dict:

    paddle_like.save({"model": model, "optimizer": opt.state_dict(), "epoch": 3}, "ckpt.pl")
    ckpt = paddle_like.load("ckpt.pl")       # {"model": {name: ndarray}, "optimizer": {...}, "epoch": 3}
    model.load_state_dict(ckpt["model"])

Modules, optimizers and schedulers in it are saved as their state_dict(); arrays and
Tensors become the file's tensors; numbers, strings, None, lists and tuples are kept
in its metadata ("pl.tree", JSON), so the file is still plain safetensors.
"""

import json
import os
from collections.abc import Mapping

import numpy as np

from . import _C
from .nn.module import Module

_TREE_KEY = "pl.tree"

__all__ = ["save", "load", "save_tensors", "load_tensors"]


def save(obj, path):
    """Writes a model's parameters (dense ones by name; an embedding table as "<name>"
    rows plus "<name>.ids"), a {name: array/Tensor} dict, or a nested dict of those,
    modules, optimizers, schedulers and plain values (see the module docstring),
    atomically."""
    path = os.fspath(path)
    if isinstance(obj, Module):
        if obj._cpp is None:
            raise ValueError(f"save: {type(obj).__name__} has no parameters")
        _C.save_module(obj._cpp, path)
    elif isinstance(obj, Mapping):
        if all(isinstance(v, (np.ndarray, _C.Tensor)) for v in obj.values()):
            save_tensors(obj, path)
            return
        tensors = {}
        tree = _encode(obj, "", tensors)
        save_tensors(tensors, path, {_TREE_KEY: json.dumps(tree)})
    else:
        raise TypeError(f"save: expected an nn.Module or a dict, got {type(obj).__name__}")


def _encode(obj, where, tensors):
    """The JSON tree of `obj`; its arrays go to `tensors` under numbered names."""
    if hasattr(obj, "state_dict") and callable(obj.state_dict) and not isinstance(obj, Mapping):
        obj = obj.state_dict()  # a module, an optimizer, a scheduler
    if isinstance(obj, (_C.Tensor, np.ndarray)):
        arr = np.asarray(obj)
        if arr.dtype not in (np.float32, np.int64):
            if arr.dtype.kind in "iub" and arr.dtype.itemsize <= 4:
                arr = arr.astype(np.int64)  # widening only: nothing is lost
            else:
                raise TypeError(f"save: {where or 'value'} is an array of {arr.dtype}: only float32 and "
                                f"integer arrays are stored (convert explicitly, e.g. arr.astype(np.float32))")
        name = f"t{len(tensors)}"
        tensors[name] = np.ascontiguousarray(arr)
        return {"$tensor": name}
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"save: key {k!r} in {where or 'the dict'} is not a string")
            out[k] = _encode(v, f"{where}.{k}" if where else k, tensors)
        return {"$dict": out}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, f"{where}[{i}]", tensors) for i, v in enumerate(obj)]
        return {"$tuple": items} if isinstance(obj, tuple) else items
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"save: {where or 'value'} is a {type(obj).__name__}: expected arrays, Tensors, "
                    f"modules, optimizers, dicts, lists, numbers, strings or None")


def _decode(node, tensors):
    if isinstance(node, dict):
        if "$tensor" in node:
            return tensors[node["$tensor"]]
        if "$tuple" in node:
            return tuple(_decode(v, tensors) for v in node["$tuple"])
        return {k: _decode(v, tensors) for k, v in node["$dict"].items()}
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    return node


def load(model_or_path, path=None):
    """load(model, path) fills the model's parameters from the file: FileNotFoundError
    when the file is missing, KeyError when a parameter is missing from it, ValueError
    for a wrong shape or dtype, OSError for a corrupt file; on any error the model is
    left as it was. load(path) returns {name: ndarray}."""
    if path is None:
        tensors, metadata = load_tensors(model_or_path, with_metadata=True)
        if _TREE_KEY in metadata:
            return _decode(json.loads(metadata[_TREE_KEY]), tensors)
        return tensors
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
