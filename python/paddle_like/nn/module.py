"""Module: the base class of every layer and model, as in torch.nn.

Every Module mirrors a C++ pl::Module (``module._cpp``): a built-in layer holds its
C++ layer, and a Module defined in Python holds a C++ container to which each
sub-module is attached, under its attribute name, when it is assigned::

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 128)     # parameters "fc1.w", "fc1.b"
            self.fc2 = nn.Linear(128, 10)      # parameters "fc2.w", "fc2.b"

        def forward(self, x):
            return self.fc2(nn.functional.relu(self.fc1(x)))

So the parameters are the C++ ones, under the same stable dotted names the C++
optimizers, the parameter servers and the safetensors files use. Parameter names must
stay stable: a sub-module attribute cannot be re-assigned or deleted once set, and a
module can be the child of only one parent.

Thread-safety: a model is used by one thread at a time (the C++ work releases the GIL,
so other Python threads run meanwhile, but must not use the same model).
"""

import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from .. import _C

# Which module a parameter belongs to, so optimizers accept list(model.parameters()).
_owner_of_param = weakref.WeakValueDictionary()


class ParameterList(list):
    """The list model.parameters() returns: Tensors (dense parameters) and
    SparseParameters (embedding tables), remembering the model they belong to."""

    def __init__(self, items, module):
        super().__init__(items)
        self.module = module


# What load_state_dict returns, as torch's _IncompatibleKeys: lists of names.
IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

# Passed as _cpp by modules with no C++ side and no parameters (the losses).
NO_CPP = object()


class Module:
    """Base class: subclass it, assign sub-modules in ``__init__`` and write ``forward``."""

    _cpp = None

    def __init__(self, _cpp=None):
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_parent", None)
        object.__setattr__(self, "_training", True)
        if _cpp is None:
            _cpp = _C.Container(type(self).__name__)
        elif _cpp is NO_CPP:
            _cpp = None
        object.__setattr__(self, "_cpp", _cpp)

    # --- sub-modules -----------------------------------------------------------
    def __setattr__(self, name, value):
        if isinstance(value, Module):
            if "_modules" not in self.__dict__:
                raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning "
                                   f"sub-module '{name}'")
            self._register(name, value)
        elif "_modules" in self.__dict__ and name in self._modules:
            raise AttributeError(f"{type(self).__name__}.{name} is a registered sub-module; parameter "
                                 f"names must stay stable, so it cannot be replaced")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self.__dict__.get("_modules", {}):
            raise AttributeError(f"{type(self).__name__}.{name} is a registered sub-module and cannot "
                                 f"be deleted (parameter names must stay stable)")
        object.__delattr__(self, name)

    def add_module(self, name, module):
        """Registers `module` under `name` (what attribute assignment does)."""
        if not isinstance(module, Module):
            raise TypeError(f"add_module('{name}'): expected an nn.Module, got {type(module).__name__}")
        setattr(self, name, module)

    def _register(self, name, module):
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"sub-module name {name!r} must be a non-empty string without '.'")
        if name in self._modules:
            if self._modules[name] is module:
                return
            raise ValueError(f"{type(self).__name__}: sub-module '{name}' is already registered; "
                             f"parameter names must stay stable, so it cannot be replaced")
        if module is self:
            raise ValueError("a module cannot be its own sub-module")
        if module._parent is not None:
            raise ValueError(f"{type(module).__name__} is already registered in another module; sharing "
                             f"a module between parents is not supported (its parameters would have "
                             f"two names)")
        if module._cpp is not None:
            if not isinstance(self._cpp, _C.Container):
                raise TypeError(f"{type(self).__name__} is a built-in layer and cannot hold "
                                f"sub-module '{name}'")
            self._cpp.add_child(name, module._cpp)
        object.__setattr__(module, "_parent", weakref.ref(self))
        self._modules[name] = module
        module._set_training(self.training)

    def named_children(self):
        return list(self._modules.items())

    def children(self):
        return list(self._modules.values())

    def named_modules(self, prefix=""):
        out = [(prefix, self)]
        for name, m in self._modules.items():
            out.extend(m.named_modules(f"{prefix}.{name}" if prefix else name))
        return out

    def modules(self):
        return [m for _, m in self.named_modules()]

    # --- forward -------------------------------------------------------------------
    def apply(self, fn):
        """Calls fn on every sub-module (children first) and then on this one, as
        torch does (e.g. model.apply(init_weights)); returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # --- parameters ----------------------------------------------------------------
    def named_parameters(self):
        """[(dotted name, parameter)]: Tensors (dense) and SparseParameters (embedding
        tables), in registration order. A dense parameter's ``.numpy()`` is a live view
        (optimizer steps update it in place); ``.grad`` is its accumulated gradient."""
        if self._cpp is None:
            return []
        named = self._cpp.named_parameters()
        for _, p in named:
            _owner_of_param[p._node_id] = self
        return named

    def parameters(self):
        return ParameterList([p for _, p in self.named_parameters()], self)

    def get_parameter(self, name):
        """The parameter with this dotted name; KeyError naming the known ones otherwise."""
        if self._cpp is None:
            raise KeyError(f"{type(self).__name__} has no parameters")
        return self._cpp.find_parameter(name)

    def num_parameters(self):
        """Dense elements plus held embedding rows x dim."""
        return 0 if self._cpp is None else self._cpp.num_parameter_elements()

    def init_parameters(self, seed):
        """Redraws every parameter from (seed, its full dotted name), the rule the C++
        trainer and the parameter servers use; embedding tables drop their rows."""
        if self._cpp is not None:
            self._cpp.named_parameters()  # tables learn their full names first
            self._cpp.init_parameters(int(seed))
        return self

    def zero_grad(self, set_to_none=None):
        if self._cpp is not None:
            self._cpp.zero_grad()

    def named_buffers(self):
        """[(dotted name, Tensor)]: state that is not a parameter (BatchNorm's running
        statistics): saved with the model, never trained, never sent to the pservers.
        The Tensors share the module's memory."""
        return [] if self._cpp is None else self._cpp.named_buffers()

    def buffers(self):
        return [b for _, b in self.named_buffers()]

    def state_dict(self):
        """OrderedDict name -> NumPy copy, as in the safetensors files: dense parameters
        under their names; an embedding table as "<name>" (rows, dim) and "<name>.ids";
        then the buffers."""
        out = OrderedDict()
        for name, p in self.named_parameters():
            if isinstance(p, _C.SparseParameter):
                ids, values = p.rows()
                order = np.argsort(ids, kind="stable")
                out[name] = values[order]
                out[name + ".ids"] = ids[order]
            else:
                out[name] = p.numpy().copy()
        for name, b in self.named_buffers():
            out[name] = b.numpy().copy()
        return out

    def _state_dict_keys(self):
        """The names state_dict() uses: a dense parameter's name; for an embedding
        table its name (rows) and "<name>.ids"; each buffer's name."""
        keys = []
        for name, p in self.named_parameters():
            keys.append(name)
            if isinstance(p, _C.SparseParameter):
                keys.append(name + ".ids")
        keys.extend(name for name, _ in self.named_buffers())
        return keys

    def load_state_dict(self, state_dict, strict=True):
        """Copies parameters from `state_dict` (names and layout of state_dict(),
        embedding tables included: their held rows are replaced by the given ones), as
        torch does, and returns IncompatibleKeys(missing_keys, unexpected_keys).

        strict=True: a missing or unexpected key is a KeyError listing all of them.
        strict=False: those are only returned; missing parameters keep their values.
        Values must be float32 (ids int64) arrays, Tensors or lists (TypeError
        otherwise: no silent narrowing); a wrong shape is a ValueError naming the
        parameter and both shapes. Everything is checked before anything changes: on
        any error the module is left as it was."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected a dict of arrays, got {type(state_dict).__name__}")
        expected = self._state_dict_keys()
        known = set(expected)
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in known]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append("missing keys " + ", ".join(repr(k) for k in missing))
            if unexpected:
                parts.append("unexpected keys " + ", ".join(repr(str(k)) for k in unexpected))
            raise KeyError(f"load_state_dict into {type(self).__name__}: " + "; ".join(parts) +
                           " (strict=False loads the rest and returns them)")
        if self._cpp is not None:
            _C.load_state(self._cpp, {k: state_dict[k] for k in expected if k in state_dict},
                          keep_missing=not strict)
        return IncompatibleKeys(missing, unexpected)

    # --- modes ----------------------------------------------------------------------
    @property
    def training(self):
        return self._training

    def _set_training(self, mode):
        object.__setattr__(self, "_training", bool(mode))
        for m in self._modules.values():
            m._set_training(mode)

    def train(self, mode=True):
        """Training mode (dropout active) or evaluation mode, for this module and all below."""
        self._set_training(mode)
        if self._cpp is not None:
            self._cpp.train(bool(mode))
        return self

    def eval(self):
        return self.train(False)

    # --- display ----------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        if self._modules:
            for name, m in self._modules.items():
                child = repr(m).replace("\n", "\n  ")
                lines.append(f"  ({name}): {child}")
            return "\n".join(lines) + "\n)"
        return lines[0] + ")"


class Sequential(Module):
    """Runs its modules in order. Sub-modules are named "0", "1", ... (parameters
    "0.w", ...), or by the keys of an OrderedDict: Sequential(OrderedDict(fc1=...))."""

    def __init__(self, *modules):
        super().__init__(_C.Container("Sequential"))
        if len(modules) == 1 and isinstance(modules[0], (dict, OrderedDict)):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleList(Module):
    """A list of sub-modules named "0", "1", ... (no forward of its own)."""

    def __init__(self, modules=()):
        super().__init__(_C.Container("ModuleList"))
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())
