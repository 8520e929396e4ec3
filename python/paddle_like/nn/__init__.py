"""Layers and models, named like torch.nn. See :class:`Module`."""

from .module import Module, Sequential, ModuleList, ParameterList
from .layers import (Linear, Conv2d, MaxPool2d, ReLU, Sigmoid, Tanh, Dropout, Flatten,
                     Unflatten, Reshape, Embedding)
from .loss import CrossEntropyLoss, BCEWithLogitsLoss
from . import functional
from . import utils

__all__ = [
    "Module", "Sequential", "ModuleList", "ParameterList",
    "Linear", "Conv2d", "MaxPool2d", "ReLU", "Sigmoid", "Tanh", "Dropout", "Flatten",
    "Unflatten", "Reshape", "Embedding", "CrossEntropyLoss", "BCEWithLogitsLoss", "functional", "utils",
]
