"""nn.Module subclasses: registration by attribute name, modes, training, saving."""

import json
import struct

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn
from paddle_like.nn import functional as F


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(F.relu(self.fc(x))) + x        # residual


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.block = Block(8)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(8, 3))
        self.loss_fn = nn.CrossEntropyLoss()            # no parameters, no C++ side
        self.note = "plain attributes stay plain"

    def forward(self, x):
        return self.head(self.block(self.inp(x)))


def test_parameter_names_follow_attributes():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["inp.w", "inp.b", "block.fc.w", "block.fc.b", "head.1.w", "head.1.b"]
    assert net.get_parameter("block.fc.w").shape == (8, 8)
    assert [n for n, _ in net.named_children()] == ["inp", "block", "head", "loss_fn"]
    assert net.num_parameters() == 4 * 8 + 8 + 8 * 8 + 8 + 8 * 3 + 3


def test_train_eval_reaches_every_level():
    net = Net()
    x = np.ones((2, 4), np.float32)
    net.eval()
    assert not net.block.drop.training
    np.testing.assert_array_equal(net(x).numpy(), net(x).numpy())   # no dropout in eval
    net.train()
    assert net.block.drop.training and net.training


def test_sub_modules_cannot_be_replaced_or_shared():
    net = Net()
    with pytest.raises(ValueError, match="already registered"):
        net.inp = nn.Linear(4, 8)
    with pytest.raises(AttributeError):
        del net.block
    lin = nn.Linear(2, 2)
    a, b = nn.Sequential(lin), None
    with pytest.raises(ValueError, match="another module"):
        b = nn.Sequential(lin)
    assert b is None and len(a) == 1


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(F.tanh(self.fc1(x)))


def test_custom_module_trains(rng):
    pl.manual_seed(7)
    x = rng.normal(size=(256, 2)).astype(np.float32)
    y = ((x[:, 0] * x[:, 1]) > 0).astype(np.int64)       # XOR-like: needs the hidden layer
    model = Tiny()
    opt = pl.optim.Adam(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    first = loss_fn(model(x), y).item()
    for _ in range(200):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    last = loss_fn(model(x), y).item()
    assert last < 0.25 * first, (first, last)
    assert pl.metrics.accuracy(model(x).numpy(), y) > 0.95


@pytest.mark.parametrize("make", [
    lambda m: pl.optim.SGD(m.parameters(), lr=0.5),
    lambda m: pl.optim.SGD(list(m.parameters()), lr=0.2, momentum=0.9),
    lambda m: pl.optim.Momentum(m, lr=0.2),
    lambda m: pl.optim.Adagrad(m.parameters(), lr=0.3),
    lambda m: pl.optim.Adam(m.parameters(), lr=0.05),
])
def test_every_optimizer_reduces_the_loss(make, rng):
    pl.manual_seed(2)
    x = rng.normal(size=(128, 2)).astype(np.float32)
    y = (x[:, 0] > x[:, 1]).astype(np.int64)
    model = Tiny()
    opt = make(model)
    loss_fn = nn.CrossEntropyLoss()
    first = loss_fn(model(x), y).item()
    for _ in range(60):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    assert loss_fn(model(x), y).item() < 0.5 * first


def test_embedding_model_trains_with_sparse_updates(rng):
    pl.manual_seed(4)

    class Ctr(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(0, 4)
            self.flat = nn.Flatten()
            self.out = nn.Linear(3 * 4, 1)

        def forward(self, ids):
            return self.out(self.flat(self.emb(ids)))

    ids = rng.integers(0, 50, size=(512, 3)).astype(np.int64)
    weights = rng.normal(size=50)
    labels = (weights[ids].sum(axis=1) > 0).astype(np.float32)
    model = Ctr()
    opt = pl.optim.Adagrad(model.parameters(), lr=0.5)
    loss_fn = nn.BCEWithLogitsLoss()
    first = loss_fn(model(ids), labels).item()
    for _ in range(150):
        loss = loss_fn(model(ids), labels)
        loss.backward()
        opt.step()
    assert loss_fn(model(ids), labels).item() < 0.4 * first
    table = model.get_parameter("emb.table")
    assert table.name == "emb.table" and table.dim == 4 and table.num_held_rows == len(np.unique(ids))


def test_save_load_round_trip_and_file_is_plain_safetensors(tmp_path):
    pl.manual_seed(1)
    a, b = Net(), Net()
    b.init_parameters(99)
    path = tmp_path / "net.safetensors"
    pl.save(a, path)
    pl.load(b, path)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
    # Read back with nothing but json and numpy, as another tool would.
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    entry = header["inp.w"]
    assert entry["dtype"] == "F32" and entry["shape"] == [4, 8]
    begin, end = entry["data_offsets"]
    w = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<f4").reshape(4, 8)
    np.testing.assert_array_equal(w, a.inp.weight.numpy())
    assert set(pl.load(path)) == {name for name, _ in a.named_parameters()}


def test_state_dict_round_trip():
    pl.manual_seed(1)
    a, b = Tiny(), Tiny()
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.fc2.weight.numpy(), b.fc2.weight.numpy())
    sd = a.state_dict()
    sd["fc1.w"] = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="fc1.w"):
        b.load_state_dict(sd)


def test_init_parameters_is_deterministic_by_name():
    a, b = Tiny(), Tiny()
    a.init_parameters(5)
    b.init_parameters(5)
    np.testing.assert_array_equal(a.fc1.weight.numpy(), b.fc1.weight.numpy())
    assert not np.array_equal(a.fc1.weight.numpy()[:2, :2], a.fc2.weight.numpy()[:2, :2])


def test_embedding_admission_policy_is_kept_and_checked():
    emb = pl.nn.Embedding(100, 4, admit_after=3)
    assert emb.admit_after == 3 and emb._cpp.admit_after == 3
    assert pl.nn.Embedding(100, 4).admit_after == 0
    with pytest.raises(ValueError, match="admit_after 70000 is outside"):
        pl.nn.Embedding(100, 4, admit_after=70000)
    emb = pl.nn.Embedding(100, 4, evict_after_s=600)
    assert emb.evict_after_s == 600 and emb._cpp.evict_after_s == 600
    with pytest.raises(ValueError, match="evict_after_s -1 is outside"):
        pl.nn.Embedding(100, 4, evict_after_s=-1)
