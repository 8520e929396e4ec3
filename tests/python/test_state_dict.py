"""Module.state_dict / load_state_dict as in torch: strict lists missing and unexpected
keys, non-strict returns them, embedding tables load, and a failed load changes nothing."""

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn


class Ctr(nn.Module):
    """An embedding table (ids below 20) and a dense head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 3)
        self.fc = nn.Linear(3, 1)

    def forward(self, ids):
        return self.fc(self.emb(ids))


def _snapshot(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


def _assert_state_equal(a, b):
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _trained_ctr(ids):
    pl.manual_seed(11)
    model = Ctr()
    opt = pl.optim.Adagrad(model, lr=0.5)
    for _ in range(2):
        model(np.asarray(ids, np.int64)).sum().backward()
        opt.step()
    return model


def test_embedding_tables_round_trip():
    a = _trained_ctr([4, 9, 17])
    state = a.state_dict()
    assert list(state) == ["emb.table", "emb.table.ids", "fc.w", "fc.b"]
    assert state["emb.table.ids"].tolist() == [4, 9, 17]
    b = Ctr()
    b(np.array([1, 2], np.int64))            # b holds other rows, which the load replaces
    result = b.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    ids, values = b.emb.weight.rows()
    order = np.argsort(ids)
    assert ids[order].tolist() == [4, 9, 17]
    np.testing.assert_array_equal(values[order], state["emb.table"])
    _assert_state_equal(b.state_dict(), state)
    x = np.array([17, 4, 9, 9], np.int64)
    np.testing.assert_array_equal(b(x).numpy(), a(x).numpy())


def test_strict_load_lists_missing_and_unexpected_keys_and_changes_nothing():
    a, b = _trained_ctr([4, 9]), Ctr()
    state = a.state_dict()
    del state["fc.b"]
    state["fc2.w"] = np.zeros((3, 1), np.float32)
    state["emb.extra"] = np.zeros(3, np.float32)
    before = _snapshot(b)
    with pytest.raises(KeyError, match=r"missing keys 'fc\.b'.*unexpected keys 'fc2\.w', 'emb\.extra'"):
        b.load_state_dict(state)
    _assert_state_equal(b.state_dict(), before)


def test_non_strict_load_returns_the_keys_and_loads_the_rest():
    a, b = _trained_ctr([4, 9]), Ctr()
    state = a.state_dict()
    del state["fc.b"]
    state["head.w"] = np.ones(2, np.float32)
    b_bias = b.fc.bias.numpy().copy()
    result = b.load_state_dict(state, strict=False)
    assert result == (["fc.b"], ["head.w"])
    assert result.missing_keys == ["fc.b"] and result.unexpected_keys == ["head.w"]
    np.testing.assert_array_equal(b.fc.weight.numpy(), a.fc.weight.numpy())
    np.testing.assert_array_equal(b.fc.bias.numpy(), b_bias)      # missing: kept
    assert sorted(b.emb.weight.rows()[0].tolist()) == [4, 9]


def test_a_table_without_its_ids_is_a_key_error_even_when_not_strict():
    state = _trained_ctr([4]).state_dict()
    del state["emb.table.ids"]
    b = Ctr()
    before = _snapshot(b)
    with pytest.raises(KeyError, match=r"emb\.table\.ids"):
        b.load_state_dict(state, strict=False)
    _assert_state_equal(b.state_dict(), before)


@pytest.mark.parametrize("key, value, pattern", [
    ("fc.w", np.zeros((4, 1), np.float32), r"'fc\.w'.*\[3, 1\].*\[4, 1\]"),
    ("emb.table", np.zeros((2, 5), np.float32), r"'emb\.table'.*\[2, 3\].*\[2, 5\]"),
    ("emb.table.ids", np.array([4], np.int64), r"'emb\.table\.ids'.*\[2\].*\[1\]"),
    ("emb.table.ids", np.array([4, 25], np.int64), r"25"),                 # beyond num_rows 20
    ("emb.table.ids", np.array([4, 4], np.int64), r"repeats a row id"),
])
def test_bad_values_are_value_errors_and_change_nothing(key, value, pattern):
    state = _trained_ctr([4, 9]).state_dict()
    state[key] = value
    b = _trained_ctr([1, 2, 3])
    before = _snapshot(b)
    with pytest.raises(ValueError, match=pattern):
        b.load_state_dict(state)
    _assert_state_equal(b.state_dict(), before)   # the good entries were not applied either


def test_wrong_dtype_is_a_type_error_naming_the_key():
    b = Ctr()
    state = b.state_dict()
    state["fc.w"] = state["fc.w"].astype(np.float64)
    with pytest.raises(TypeError, match=r"fc\.w.*float64"):
        b.load_state_dict(state)
    with pytest.raises(TypeError, match="dict"):
        b.load_state_dict([("fc.w", np.zeros((3, 1), np.float32))])
