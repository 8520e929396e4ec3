"""Layers and models, named like torch.nn. See :class:`Module`."""

from .module import Module, Sequential, ModuleList, ParameterList
from .layers import (Linear, Conv2d, MaxPool2d, ReLU, Sigmoid, Tanh, Dropout, Flatten,
                     Unflatten, Reshape, Embedding)
from .activation import GELU, Softmax, LogSoftmax, Identity, AvgPool2d
from .normalization import LayerNorm, BatchNorm1d, BatchNorm2d
from .loss import CrossEntropyLoss, BCEWithLogitsLoss, MSELoss, L1Loss, NLLLoss
from . import functional
from . import init
from . import utils

__all__ = [
    "Module", "Sequential", "ModuleList", "ParameterList",
    "Linear", "Conv2d", "MaxPool2d", "ReLU", "Sigmoid", "Tanh", "Dropout", "Flatten",
    "Unflatten", "Reshape", "Embedding", "GELU", "Softmax", "LogSoftmax", "Identity", "AvgPool2d",
    "LayerNorm", "BatchNorm1d", "BatchNorm2d",
    "CrossEntropyLoss", "BCEWithLogitsLoss", "MSELoss", "L1Loss", "NLLLoss", "functional", "init", "utils",
]
