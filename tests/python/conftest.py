"""Shared fixtures. The package under test is the one on PYTHONPATH (ctest sets it to
<build>/python); run by hand, the repository's build/python is tried as a fallback."""

import os
import sys

import numpy as np
import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import paddle_like  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(_REPO, "build", "python"))
    import paddle_like  # noqa: F401


def _data_dir():
    return os.environ.get("PL_DATA_DIR") or os.path.join(_REPO, "build", "data")


@pytest.fixture(scope="session")
def fashion_dir():
    d = os.path.join(_data_dir(), "fashion-mnist")
    if not os.path.isfile(os.path.join(d, "train.plrec.index")):
        pytest.skip(f"prepared Fashion-MNIST records not found in {d} (run `make data`)")
    return d


@pytest.fixture(scope="session")
def fashion(fashion_dir):
    from paddle_like.data import load_records
    return (load_records(os.path.join(fashion_dir, "train.plrec")),
            load_records(os.path.join(fashion_dir, "test.plrec")))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def grad_mode_left_on():
    """Every test must leave grad recording on (paddle_like.no_grad & co. restore it);
    a test that does not fails here, and the switch is reset for the next one."""
    yield
    leaked = not paddle_like.is_grad_enabled()
    paddle_like.set_grad_enabled(True)
    assert not leaked, "the test left grad recording off"
