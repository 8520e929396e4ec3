"""What a PyTorch user brings along: checkpoints as nested dicts (pl.save/pl.load),
torch state_dicts (names and layouts mapped; checked against torch's own forward when
torch is installed, skipped otherwise), nn.init's fans on paddle_like's layouts, and
Module.apply."""

import math

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn


def test_a_nested_checkpoint_round_trips_with_its_plain_values(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = pl.optim.Adam(model.parameters(), lr=0.01)
    sched = pl.optim.lr_scheduler.StepLR(opt, step_size=2)
    x = pl.tensor(np.ones((5, 3), np.float32))
    model(x).sum().backward()
    opt.step()
    sched.step()
    path = tmp_path / "ckpt.pl"
    pl.save({"model": model, "optimizer": opt, "scheduler": sched, "epoch": 7, "best": 0.91,
             "notes": ["warm", None, True], "shape": (2, 3), "extra": {"ids": np.arange(4)}}, path)
    ckpt = pl.load(path)
    assert ckpt["epoch"] == 7 and ckpt["best"] == 0.91 and ckpt["notes"] == ["warm", None, True]
    assert ckpt["shape"] == (2, 3) and ckpt["extra"]["ids"].dtype == np.int64
    assert ckpt["scheduler"] == {"last_epoch": 1, "base_lr": pytest.approx(0.01)}
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict(ckpt["model"])
    fresh_opt = pl.optim.Adam(fresh.parameters(), lr=0.01)
    fresh_opt.load_state_dict(ckpt["optimizer"])
    assert np.allclose(fresh(x).numpy(), model(x).numpy())
    assert fresh_opt.steps == 1
    # Still a safetensors file: the arrays are its tensors, the tree its metadata.
    tensors, metadata = pl.load_tensors(path, with_metadata=True)
    assert "pl.tree" in metadata and len(tensors) >= 4
    # A flat dict of arrays stays a plain file of those names.
    pl.save({"a": np.zeros(2, np.float32)}, tmp_path / "flat.safetensors")
    assert list(pl.load(tmp_path / "flat.safetensors")) == ["a"]


def test_what_a_checkpoint_cannot_hold_is_named(tmp_path):
    with pytest.raises(TypeError, match=r"save: run\.cb is a function"):
        pl.save({"run": {"cb": lambda: 0}}, tmp_path / "x.pl")
    with pytest.raises(TypeError, match="key 3 in the dict is not a string"):
        pl.save({3: [1]}, tmp_path / "x.pl")
    with pytest.raises(TypeError, match=r"save: x\.s is an array of float64: only float32 and integer"):
        pl.save({"x": {"s": np.zeros(2)}}, tmp_path / "x.pl")
    with pytest.raises(TypeError, match="tensor 's': expected a float32 or int64 array, got <U1"):
        pl.save({"s": np.array(["a"])}, tmp_path / "x.pl")
    assert not (tmp_path / "x.pl").exists()


def test_a_torch_layout_state_dict_loads_with_names_and_layouts_mapped():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    rng = np.random.default_rng(0)
    sd = {"0.weight": rng.normal(size=(3, 4)).astype(np.float32), "0.bias": rng.normal(size=3).astype(np.float32),
          "2.weight": rng.normal(size=(2, 3)).astype(np.float32), "2.bias": rng.normal(size=2).astype(np.float32)}
    result = pl.nn.utils.load_torch_state_dict(net, sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = rng.normal(size=(5, 4)).astype(np.float32)
    expected = np.maximum(x @ sd["0.weight"].T + sd["0.bias"], 0) @ sd["2.weight"].T + sd["2.bias"]
    assert np.allclose(net(pl.tensor(x)).numpy(), expected, atol=1e-5)
    before = net.state_dict()
    with pytest.raises(KeyError, match=r"missing keys '2.w', '2.b'; unexpected torch keys 'head.weight'"):
        pl.nn.utils.load_torch_state_dict(net, {"0.weight": sd["0.weight"], "0.bias": sd["0.bias"],
                                                "head.weight": sd["2.weight"]})
    assert all(np.array_equal(before[k], v) for k, v in net.state_dict().items())  # nothing changed
    partial = pl.nn.utils.load_torch_state_dict(net, {"0.weight": sd["0.weight"] * 0}, strict=False)
    assert "0.b" in partial.missing_keys and not net.state_dict()["0.w"].any()


def test_a_torch_models_values_when_torch_is_installed():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(2 * 4 * 4, 3))
    ours = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    pl.nn.utils.load_torch_state_dict(ours, ref.state_dict())
    x = np.random.default_rng(1).normal(size=(2, 1, 4, 4)).astype(np.float32)
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    assert np.allclose(ours(pl.tensor(x)).numpy(), expected, atol=1e-5)


def test_init_fans_follow_the_layout_and_apply_visits_every_module():
    lin = nn.Linear(400, 10)  # stored (in, out): fan_in is 400
    nn.init.kaiming_normal_(lin.weight, nonlinearity="relu", generator=np.random.default_rng(0))
    assert abs(np.asarray(lin.weight).std() - math.sqrt(2 / 400)) < 0.01
    conv = nn.Conv2d(8, 4, 3)  # (out, in, kh, kw): fan_in 8 * 9
    nn.init.kaiming_uniform_(conv.weight, a=math.sqrt(5))
    assert np.abs(np.asarray(conv.weight)).max() <= 1 / math.sqrt(72) + 1e-6
    with pytest.raises(ValueError, match="2 or more dimensions"):
        nn.init.xavier_uniform_(lin.bias)
    with pytest.raises(TypeError, match="expected a Tensor"):
        nn.init.zeros_(np.zeros(3))
    with pytest.raises(ValueError, match="mode must be"):
        nn.init.kaiming_normal_(lin.weight, mode="fan")

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.25)
            nn.init.zeros_(m.bias)
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Sequential(nn.Linear(2, 1)))
    assert net.apply(init_weights) is net
    assert all((np.asarray(m.weight) == 0.25).all() for m in net.modules() if isinstance(m, nn.Linear))
