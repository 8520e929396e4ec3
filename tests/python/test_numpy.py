"""Tensors to and from NumPy: zero copy where safe, copies otherwise, clear dtype errors,
views that outlive their tensors, arrays built right under NumPy 1 and NumPy 2."""

import gc
import os
import weakref

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn


def test_float32_round_trip_shares_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = pl.tensor(a)
    assert t.shape == (3, 4) and t.dtype == "float32" and t.ndim == 2 and len(t) == 3
    v = t.numpy()
    assert np.shares_memory(v, a)
    a[1, 2] = -7.0                      # writes through the array are seen by the tensor
    assert t.numpy()[1, 2] == -7.0
    v[0, 0] = 99.0                      # and the other way round
    assert a[0, 0] == 99.0


def test_int64_round_trip_shares_memory():
    ids = np.array([[1, 2], [3, 4]], dtype=np.int64)
    t = pl.tensor(ids)
    assert t.dtype == "int64" and t.shape == (2, 2)
    assert np.shares_memory(t.numpy(), ids)
    np.testing.assert_array_equal(t.numpy(), ids)


def test_tensor_keeps_the_array_alive():
    class Probe(np.ndarray):
        pass
    a = np.ones((4, 5), dtype=np.float32).view(Probe)
    alive = weakref.ref(a)
    t = pl.tensor(a)
    del a
    gc.collect()
    assert alive() is not None          # the tensor's storage holds the array
    np.testing.assert_array_equal(t.numpy(), np.ones((4, 5), np.float32))
    del t
    gc.collect()
    assert alive() is None              # and lets go with the last tensor


def test_non_contiguous_input_is_copied():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    strided = base[:, ::2]              # not C-contiguous
    t = pl.tensor(strided)
    np.testing.assert_array_equal(t.numpy(), strided)
    assert not np.shares_memory(t.numpy(), base)
    base[0, 0] = 100.0
    assert t.numpy()[0, 0] == 0.0       # a copy: later writes do not show
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(pl.tensor(fortran).numpy(), fortran)


def test_read_only_input_is_copied():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = pl.tensor(a)
    assert not np.shares_memory(t.numpy(), a)
    t.numpy()[0] = 5.0                  # the copy is writeable; the original is untouched
    assert a[0] == 0.0


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16, np.uint8])
def test_dtype_mismatch_is_a_type_error_naming_the_dtype(dtype):
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        pl.tensor(np.zeros((2, 2), dtype=dtype))


def test_labels_of_the_wrong_dtype_are_named():
    logits = pl.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"labels.*int64.*float32"):
        nn.CrossEntropyLoss()(logits, np.array([0.0, 1.0], np.float32))


def test_lists_and_scalars_convert():
    assert pl.tensor([[1.5, 2.5]]).dtype == "float32"
    assert pl.tensor([1, 2, 3]).dtype == "int64"
    s = pl.tensor(3.0)
    assert s.shape == () and s.item() == 3.0
    with pytest.raises(TypeError):
        pl.tensor(["a", "b"])


def test_view_outlives_its_tensor_and_model():
    t = pl.tensor(np.full((1000, 100), 2.0, np.float32)) * 3.0   # memory owned by C++
    v = t.numpy()
    del t
    gc.collect()
    junk = [np.ones((1000, 100), np.float32) for _ in range(20)]  # would reuse freed memory
    assert v.shape == (1000, 100) and np.all(v == 6.0)
    del junk

    model = nn.Linear(8, 4)
    w = model.weight.numpy()
    expected = w.copy()
    del model
    gc.collect()
    np.testing.assert_array_equal(w, expected)


def test_parameter_view_is_live():
    model = nn.Linear(3, 2)
    w = model.weight.numpy()
    before = w.copy()
    opt = pl.optim.SGD(model, lr=0.5)
    loss = (model(np.ones((4, 3), np.float32)) * 1.0).sum()
    loss.backward()
    grad = model.weight.grad.numpy().copy()
    opt.step()
    np.testing.assert_allclose(w, before - 0.5 * grad, rtol=1e-6)   # updated in place


def test_zero_size_and_numpy_protocol():
    t = pl.tensor(np.zeros((0, 3), np.float32))
    assert t.shape == (0, 3) and t.numpy().shape == (0, 3)
    arr = np.asarray(pl.tensor(np.ones(3, np.float32)))
    assert arr.dtype == np.float32 and arr.sum() == 3.0


def test_records_are_numpy_views(tmp_path):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 1, 3, 4)
    pl.data.write_records(tmp_path / "x.plrec", labels=[3, 7], images=images)
    r = pl.data.load_records(tmp_path / "x.plrec")
    assert r.kind == "image" and r.features.dtype == np.float32 and r.features.shape == (2, 1, 3, 4)
    np.testing.assert_allclose(r.features, images / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(r.labels, [3, 7])


def test_numpy_major_is_the_one_this_run_expects():
    # ctest runs this suite twice (tests/python/CMakeLists.txt): under Debian's NumPy 1
    # and in a venv with PyPI's NumPy 2. This proves each run has the NumPy it claims.
    expected = os.environ.get("PL_EXPECT_NUMPY_MAJOR")
    if not expected:
        pytest.skip("PL_EXPECT_NUMPY_MAJOR is not set (ctest sets it)")
    assert np.__version__.split(".")[0] == expected, \
        f"this run expects NumPy {expected}.x, got {np.__version__} from {np.__file__}"


def test_embedding_ids_come_back_as_looked_up():
    # Under NumPy 2, ids were built with pybind11 2.10's one-count array constructor and
    # came back with stride 0: ids 17, 4, 9 read as [17, 17, 17].
    emb = nn.Embedding(0, 3)
    looked_up = np.array([17, 4, 9], np.int64)
    out = emb(looked_up)
    weights = np.arange(9, dtype=np.float32).reshape(3, 3)
    (out * weights).sum().backward()                     # d/d(row of id k) = weights[k]
    table = emb.weight
    ids, values = table.rows()
    assert ids.tolist() == [17, 4, 9] and ids.strides == (8,) and values.shape == (3, 3)
    np.testing.assert_array_equal(values, out.numpy())  # row i is the row of ids[i]
    gids, gvalues = table.grad_rows()
    assert gids.tolist() == [17, 4, 9] and gids.strides == (8,)
    np.testing.assert_array_equal(gvalues, weights)
    state = emb.state_dict()
    assert state["table.ids"].tolist() == [4, 9, 17]     # sorted by id
    np.testing.assert_array_equal(state["table"], out.numpy()[[1, 2, 0]])

