"""Optimizers, named like torch.optim, running the C++ update rules
(paddle_like/optim/update_rules.h) — the same code the parameter servers apply.

    opt = paddle_like.optim.Adam(model.parameters(), lr=1e-3)   # or Adam(model, ...)
    loss.backward()
    opt.step()

Differences from torch.optim:
  * An optimizer covers a whole model: pass model.parameters() (or a list of it, or the
    model); a subset of a model's parameters is not supported.
  * step() applies the gradients and then clears them (zero_grad() before backward()
    is accepted but not needed). Embedding rows are updated lazily: only the rows in
    the batch, each with its own step count.
  * SGD with momentum > 0 is the Momentum rule (v = mu v + g; p -= lr v).
"""

import operator

from .. import _C
from ..nn.module import Module, ParameterList, _owner_of_param

__all__ = ["Optimizer", "SGD", "Momentum", "Adagrad", "Adam", "spec", "lr_scheduler"]


def spec(kind, lr, **kwargs):
    """An optimizer description (for paddle_like.distributed, where the update runs on
    the parameter servers): kind a registered optimizer (_C.optimizer_names(): "sgd",
    "momentum", "adagrad", "adam", ...); kwargs weight_decay and the kind's
    hyper-parameters by name (momentum, beta1, beta2, eps, initial_accumulator, ...;
    those of other kinds are ignored). ValueError when a value is out of range."""
    return _C.OptimizerSpec(kind, float(lr), **kwargs)


def _module_of(params):
    if isinstance(params, Module):
        return params
    if isinstance(params, ParameterList):
        return params.module
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    if isinstance(params[0], dict):
        raise TypeError("parameter groups are not supported; pass model.parameters()")
    owner = _owner_of_param.get(getattr(params[0], "_node_id", None))
    if owner is None:
        raise TypeError("optimizer: pass model.parameters() or the model itself (got parameters "
                        "that belong to no known model)")
    mine = {p._node_id for p in owner.parameters()}
    given = {getattr(p, "_node_id", None) for p in params}
    if given != mine:
        raise ValueError(f"optimizer: the parameters given are not all of {type(owner).__name__}'s "
                         f"({len(given & mine)} of {len(mine)}); optimizing a subset is not supported")
    return owner


# The built-ins' state slots, named as torch names them, in the order of their
# definitions (paddle_like/optim/optimizer_registry.h); any other optimizer's slots keep
# their registered names.
_TORCH_SLOTS = {"sgd": (), "momentum": ("momentum_buffer",), "adagrad": ("sum",),
                "adam": ("exp_avg", "exp_avg_sq")}


def _slots(kind):
    if kind in _TORCH_SLOTS:
        return _TORCH_SLOTS[kind]
    return tuple(_C.optimizer_slots(kind))


def _require(entry, keys, what):
    """KeyError naming the keys `entry` lacks; ValueError naming those it should not have."""
    if not isinstance(entry, dict):
        raise TypeError(f"{what}: expected a dict, got {type(entry).__name__}")
    missing = [k for k in keys if k not in entry]
    if missing:
        raise KeyError(f"{what} lacks {', '.join(map(repr, missing))}")
    extra = [k for k in entry if k not in keys]
    if extra:
        raise ValueError(f"{what} has unknown entries {', '.join(map(repr, extra))} "
                         f"(expected {', '.join(map(repr, keys))})")


def _as_int(value, what):
    try:
        return operator.index(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        raise TypeError(f"optimizer state_dict: {what} must be an integer, got {value!r}") from None


class _ParamGroup(dict):
    """param_groups[0], whose "lr" writes through to the optimizer (for LR schedules)."""

    def __init__(self, opt):
        super().__init__(lr=opt.lr)
        self._opt = opt

    def __setitem__(self, key, value):
        if key == "lr":
            self._opt._impl.lr = float(value)
        super().__setitem__(key, value)


class Optimizer:
    """Base class; construct SGD, Momentum, Adagrad or Adam."""

    def __init__(self, params, spec_):
        self.module = _module_of(params)
        if self.module._cpp is None:
            raise ValueError(f"{type(self.module).__name__} has no parameters to optimize")
        self.spec = spec_
        self._impl = _C.Optimizer(self.module._cpp, spec_)
        self.param_groups = [_ParamGroup(self)]

    def step(self, closure=None):
        """Applies the accumulated gradients, then clears them (releases the GIL)."""
        loss = closure() if closure is not None else None
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none=None):
        self._impl.zero_grad()

    @property
    def lr(self):
        return self._impl.lr

    @lr.setter
    def lr(self, value):
        self._impl.lr = float(value)
        dict.__setitem__(self.param_groups[0], "lr", float(value))

    @property
    def steps(self):
        return self._impl.steps

    def state_dict(self):
        """Everything a resumed run needs, as torch's layout but keyed by parameter name:

            {"state": {name: {"step": int, <slots>: float32 array of the parameter's shape},
                       table name: {"ids": int64 (R,), "step": int64 (R,), <slots>: float32 (R, dim)}},
             "param_groups": [{"kind", "lr", "momentum", "betas", "eps",
                               "initial_accumulator_value", "weight_decay"}],
             "steps": int}

        Slots: Adam "exp_avg", "exp_avg_sq"; Adagrad "sum"; Momentum "momentum_buffer";
        SGD none. Only parameters (and embedding rows) updated at least once have
        state. The arrays are copies."""
        spec_, steps, dense, rows = self._impl._export_state()
        slots = _slots(spec_.kind)
        state = {}
        for name, step, values in dense:
            state[name] = {"step": step, **dict(zip(slots, values))}
        for name, ids, row_steps, values in rows:
            state[name] = {"ids": ids, "step": row_steps, **dict(zip(slots, values))}
        group = {"kind": spec_.kind, "lr": spec_.lr, "momentum": spec_.momentum,
                 "betas": (spec_.beta1, spec_.beta2), "eps": spec_.eps,
                 "initial_accumulator_value": spec_.initial_accumulator,
                 "weight_decay": spec_.weight_decay}
        return {"state": state, "param_groups": [group], "steps": steps}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned (also into a fresh optimizer of the same
        kind over a model with the same parameter names): step counts, slots and the
        hyperparameters of param_groups, as torch does. Checked in full before anything
        changes: KeyError for a missing entry or a name that is not a parameter of the
        model, ValueError for another optimizer kind, an unknown entry, a bad value or
        a wrong shape (naming the parameter and both shapes), TypeError for a wrong dtype."""
        for key in ("state", "param_groups", "steps"):
            if key not in state_dict:
                raise KeyError(f"optimizer state_dict has no {key!r}")
        groups = state_dict["param_groups"]
        if len(groups) != 1:
            raise ValueError(f"optimizer state_dict: expected 1 param group, got {len(groups)} "
                             f"(parameter groups are not supported)")
        group = groups[0]
        fields = ("kind", "lr", "momentum", "betas", "eps", "initial_accumulator_value", "weight_decay")
        _require(group, fields, "param_groups[0]")
        kind = str(group["kind"])
        if kind != self.spec.kind:
            raise ValueError(f"optimizer state_dict is of a {kind} optimizer, this one is "
                             f"{self.spec.kind}")
        b1, b2 = group["betas"]
        spec_ = spec(kind, group["lr"], momentum=float(group["momentum"]), beta1=float(b1),
                     beta2=float(b2), eps=float(group["eps"]),
                     initial_accumulator=float(group["initial_accumulator_value"]),
                     weight_decay=float(group["weight_decay"]))
        slots = _slots(kind)
        dense, rows = [], []
        for name, entry in state_dict["state"].items():
            sparse = "ids" in entry
            _require(entry, ("ids", "step") + slots if sparse else ("step",) + slots,
                     f"optimizer state of {name!r}")
            values = [entry[s] for s in slots]
            if sparse:
                rows.append((name, entry["ids"], entry["step"], values))
            else:
                dense.append((name, _as_int(entry["step"], f"{name!r} step"), values))
        self._impl._import_state(spec_, _as_int(state_dict["steps"], "steps"), dense, rows)
        self.spec = spec_
        dict.__setitem__(self.param_groups[0], "lr", spec_.lr)

    def __repr__(self):
        return f"{type(self).__name__}({self.spec!r})"


class SGD(Optimizer):
    """p -= lr * (g + weight_decay p); with momentum > 0, the Momentum rule."""

    def __init__(self, params, lr=0.01, momentum=0.0, weight_decay=0.0):
        kind = "momentum" if momentum > 0 else "sgd"
        super().__init__(params, spec(kind, lr, momentum=float(momentum or 0.9),
                                      weight_decay=float(weight_decay)))


class Momentum(Optimizer):
    """v = momentum v + g';  p -= lr v."""

    def __init__(self, params, lr=0.01, momentum=0.9, weight_decay=0.0):
        super().__init__(params, spec("momentum", lr, momentum=float(momentum),
                                      weight_decay=float(weight_decay)))


class Adagrad(Optimizer):
    """a += g'^2;  p -= lr g' / (sqrt(a) + eps), a starting at initial_accumulator_value."""

    def __init__(self, params, lr=0.01, initial_accumulator_value=0.1, eps=1e-8, weight_decay=0.0):
        super().__init__(params, spec("adagrad", lr, initial_accumulator=float(initial_accumulator_value),
                                      eps=float(eps), weight_decay=float(weight_decay)))


class Adam(Optimizer):
    """Adam with bias correction; weight_decay is L2 added to the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        b1, b2 = betas
        super().__init__(params, spec("adam", lr, beta1=float(b1), beta2=float(b2), eps=float(eps),
                                      weight_decay=float(weight_decay)))


from . import lr_scheduler  # noqa: E402  (it uses the classes above)
