"""Bad input surfaces as the documented exception types, carrying the C++ message."""

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn


def test_shape_mismatch_is_value_error_naming_the_shapes():
    layer = nn.Linear(4, 2)
    with pytest.raises(ValueError, match=r"\[3, 5\]"):
        layer(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="differ"):
        pl.tensor(np.zeros(3, np.float32)) + pl.tensor(np.zeros(4, np.float32))
    conv = nn.Conv2d(3, 4, 3)
    with pytest.raises(ValueError, match="Conv2D"):
        conv(np.zeros((1, 1, 8, 8), np.float32))


def test_label_out_of_range_is_value_error():
    with pytest.raises(ValueError):
        nn.CrossEntropyLoss()(np.zeros((2, 3), np.float32), np.array([0, 7]))


def test_unknown_parameter_is_key_error():
    with pytest.raises(KeyError, match="fc9.w"):
        nn.Sequential(nn.Linear(2, 2)).get_parameter("fc9.w")


def test_missing_files_are_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        pl.load(nn.Linear(2, 2), tmp_path / "nope.safetensors")
    with pytest.raises(FileNotFoundError, match="nothing.plrec"):
        pl.data.load_records(tmp_path / "nothing.plrec")
    with pytest.raises(FileNotFoundError):
        pl.load_tensors(tmp_path / "absent.safetensors")


def test_parameter_missing_from_file_is_key_error(tmp_path):
    path = tmp_path / "small.safetensors"
    pl.save(nn.Sequential(nn.Linear(2, 2)), path)
    with pytest.raises(KeyError, match="1.w"):
        pl.load(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)), path)


def test_wrong_shape_in_file_is_value_error_and_leaves_model_alone(tmp_path):
    path = tmp_path / "shape.safetensors"
    pl.save(nn.Sequential(nn.Linear(2, 3)), path)
    target = nn.Sequential(nn.Linear(2, 4))
    before = target[0].weight.numpy().copy()
    with pytest.raises(ValueError, match="0.w"):
        pl.load(target, path)
    np.testing.assert_array_equal(target[0].weight.numpy(), before)


def test_corrupt_files_are_os_errors(tmp_path):
    path = tmp_path / "m.safetensors"
    pl.save(nn.Linear(8, 8), path)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF                                  # flip data bytes: checksum fails
    path.write_bytes(bytes(raw))
    with pytest.raises(OSError, match="m.safetensors"):
        pl.load(nn.Linear(8, 8), path)
    (tmp_path / "trunc.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(OSError):
        pl.load_tensors(tmp_path / "trunc.safetensors")

    rec = tmp_path / "d.plrec"
    pl.data.write_records(rec, labels=np.arange(50) % 10, images=np.zeros((50, 4, 4), np.uint8),
                          records_per_chunk=10)
    raw = bytearray(rec.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    rec.write_bytes(bytes(raw))
    with pytest.raises(OSError, match="d.plrec"):
        pl.data.load_records(rec)


def test_bad_optimizer_settings_are_value_errors():
    with pytest.raises(ValueError, match="lr|learning"):
        pl.optim.Adam(nn.Linear(2, 2), lr=-1.0)
    with pytest.raises(ValueError):
        pl.optim.spec("rmsprop", lr=0.1)
    with pytest.raises(TypeError):
        pl.optim.SGD([pl.tensor(np.zeros(2, np.float32))], lr=0.1)


def test_backward_of_a_non_scalar_is_value_error():
    out = nn.Linear(2, 3)(np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match="non-scalar"):
        out.backward()


def test_errors_do_not_break_the_session():
    layer = nn.Linear(4, 2)
    for _ in range(3):
        with pytest.raises(ValueError):
            layer(np.zeros((1, 3), np.float32))
    assert layer(np.zeros((1, 4), np.float32)).shape == (1, 2)
