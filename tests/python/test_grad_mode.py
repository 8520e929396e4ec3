"""paddle_like.no_grad / inference_mode / enable_grad / set_grad_enabled, as in torch:
context managers and decorators under which ops record no graph, restoring the
previous state on exit (also after an exception), per thread."""

import threading

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn


def _model():
    pl.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))


X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


@pytest.mark.parametrize("context", [pl.no_grad, pl.inference_mode], ids=["no_grad", "inference_mode"])
def test_no_graph_is_recorded_and_backward_is_a_clear_error(context):
    model = _model()
    with context():
        assert not pl.is_grad_enabled()
        out = model(X)
        loss = nn.CrossEntropyLoss()(out, np.array([0, 1]))
    assert pl.is_grad_enabled()
    assert not out.requires_grad and not loss.requires_grad
    with pytest.raises(RuntimeError, match="does not depend on anything that requires a gradient.*no_grad"):
        loss.backward()
    assert all(p.grad is None for p in model.parameters())
    np.testing.assert_array_equal(out.numpy(), model(X).numpy())   # same values as with a graph
    assert model(X).requires_grad


def test_embedding_lookups_record_no_gradient_rows():
    emb = nn.Embedding(0, 2)
    with pl.no_grad():
        out = emb(np.array([4, 9], np.int64))
    assert not out.requires_grad
    with pytest.raises(RuntimeError):
        out.sum().backward()
    assert emb.weight.grad_rows()[0].size == 0


def test_leaf_tensors_keep_requires_grad():
    with pl.no_grad():
        a = pl.tensor(np.ones(3, np.float32), requires_grad=True)
        b = a * 2.0
    assert a.requires_grad and not b.requires_grad
    (a * 3.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3, 3, 3])


def test_state_is_restored_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with pl.no_grad():
            1 / 0
    assert pl.is_grad_enabled()

    @pl.no_grad()
    def fails():
        assert not pl.is_grad_enabled()
        raise KeyError("inside")
    with pytest.raises(KeyError, match="inside"):
        fails()
    assert pl.is_grad_enabled()
    with pytest.raises(ValueError):
        with pl.set_grad_enabled(False):
            raise ValueError
    assert pl.is_grad_enabled()


@pytest.mark.parametrize("make_decorator", [
    lambda: pl.no_grad(), lambda: pl.no_grad, lambda: pl.inference_mode(), lambda: pl.inference_mode,
    lambda: pl.set_grad_enabled(False),     # sets at once, as in torch, until it decorates
], ids=["no_grad()", "no_grad", "inference_mode()", "inference_mode", "set_grad_enabled(False)"])
def test_decorators(make_decorator):
    decorate = make_decorator()

    @decorate
    def evaluate(model, x):
        """Docstring kept."""
        return pl.is_grad_enabled(), model(x)

    assert pl.is_grad_enabled()
    enabled, out = evaluate(_model(), X)
    assert not enabled and not out.requires_grad and pl.is_grad_enabled()
    assert evaluate.__name__ == "evaluate" and evaluate.__doc__ == "Docstring kept."
    assert evaluate(_model(), X)[0] is False         # a second call works the same


def test_nesting_and_enable_grad():
    a = pl.tensor(np.ones(2, np.float32), requires_grad=True)
    with pl.no_grad():
        with pl.enable_grad():
            assert (a * 2.0).requires_grad
        assert not (a * 2.0).requires_grad
        with pl.no_grad():
            pass
        assert not pl.is_grad_enabled()          # an inner exit restores the outer state
        with pl.inference_mode(False):           # leaves the state as it is
            assert not pl.is_grad_enabled()
    ctx = pl.no_grad()
    with ctx:
        with ctx:                                # one instance entered re-entrantly
            pass
        assert not pl.is_grad_enabled()
    assert pl.is_grad_enabled()


def test_set_grad_enabled_as_a_call():
    pl.set_grad_enabled(False)
    try:
        assert not pl.is_grad_enabled()
        assert not (pl.tensor([1.0], requires_grad=True) * 2.0).requires_grad
    finally:
        pl.set_grad_enabled(True)
    assert pl.is_grad_enabled()


def test_the_switch_is_per_thread():
    seen = {}

    def worker():
        seen["start"] = pl.is_grad_enabled()
        with pl.no_grad():
            seen["inside"] = pl.is_grad_enabled()
    with pl.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert not pl.is_grad_enabled()
    assert seen == {"start": True, "inside": False}
    assert pl.is_grad_enabled()


def test_generator_functions_are_refused():
    with pytest.raises(TypeError, match="generator"):
        @pl.no_grad()
        def gen():
            yield 1


def test_predict_records_no_graph():
    model = _model()
    out = pl.training.predict(model, X)
    np.testing.assert_array_equal(out, model(X).numpy())
    assert pl.is_grad_enabled() and model.training
