"""The global seed new layers draw their initial parameters from (like torch.manual_seed).

Each built-in layer, when constructed, initialises its parameters from
(seed, construction count), so a script that calls manual_seed(s) first builds the
same model every run. ``Module.init_parameters(seed)`` instead redraws every parameter
from (seed, full parameter name) — the rule the C++ trainer and the parameter servers
use — so a Python model and a C++ one with the same names start identical.
"""

_state = {"seed": 0, "count": 0}


def manual_seed(seed):
    """Sets the seed of the layers constructed from now on; returns it."""
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    _state["seed"] = seed
    _state["count"] = 0
    return seed


def initial_seed():
    return _state["seed"]


def next_seed():
    """A fresh 63-bit seed for the next layer (splitmix64 of seed and count)."""
    _state["count"] += 1
    z = (_state["seed"] * 0x9E3779B97F4A7C15 + _state["count"]) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) >> 1
