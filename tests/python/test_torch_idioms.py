"""The everyday PyTorch idioms a user reaches for, written as a PyTorch user would
(with `pl` for `torch`), each checked for its result: the probe of issue 37. An idiom
that raises or computes something else counts as missing. The test fails when fewer
than MIN_WORKING work, and prints the ones that do not."""

import math
import os

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn
from paddle_like.nn import functional as F

MIN_WORKING = 75
IDIOMS = []


def idiom(fn):
    IDIOMS.append(fn)
    return fn


def _t(a):
    return pl.tensor(np.asarray(a, np.float32))


def _close(t, expected, tol=1e-5):
    got = t.numpy() if isinstance(t, pl.Tensor) else np.asarray(t)
    assert np.allclose(got, expected, atol=tol), (got, expected)


X = np.arange(6, dtype=np.float32).reshape(2, 3)


# ---- tensors ----
@idiom
def tensor_from_list():
    assert pl.tensor([[1.0, 2.0]]).shape == (1, 2)


@idiom
def from_numpy_shares():
    a = np.zeros(3, np.float32)
    t = pl.from_numpy(a)
    a[0] = 5
    assert t.numpy()[0] == 5


@idiom
def numpy_and_shape():
    t = _t(X)
    assert t.numpy().shape == (2, 3) and t.shape == (2, 3) and t.size(1) == 3 and t.dim() == 2


@idiom
def reshape_and_view():
    assert _t(X).reshape(3, 2).shape == (3, 2) and _t(X).view(-1).shape == (6,)


@idiom
def arithmetic():
    _close((_t(X) + _t(X)) * 2 - _t(X) / 2, X * 4 - X / 2)


@idiom
def matmul_operator():
    _close(_t(X) @ _t(X.T), X @ X.T)


@idiom
def sum_and_mean():
    assert _t(X).sum().item() == 15 and abs(_t(X).mean().item() - 2.5) < 1e-6


@idiom
def sum_along_dim():
    _close(_t(X).sum(dim=1), X.sum(1))


@idiom
def mean_keepdim():
    _close(_t(X).mean(dim=0, keepdim=True), X.mean(0, keepdims=True))


@idiom
def max_along_dim():
    values, indices = _t(X).max(dim=1)
    _close(values, X.max(1))
    assert indices.numpy().tolist() == [2, 2]


@idiom
def argmax_method():
    assert _t(X).argmax(dim=1).numpy().tolist() == [2, 2]


@idiom
def argmax_function():
    assert pl.argmax(_t(X), dim=0).numpy().tolist() == [1, 1, 1]


@idiom
def item_and_tolist():
    assert _t([3.0]).sum().item() == 3.0 and _t(X).tolist()[1] == [3, 4, 5]


@idiom
def detach_and_clone():
    t = _t(X)
    c = t.clone()
    c.numpy()[0, 0] = 9
    assert t.numpy()[0, 0] == 0 and not t.detach().requires_grad


@idiom
def cat():
    assert pl.cat([_t(X), _t(X)], dim=0).shape == (4, 3)


@idiom
def backward_and_grad():
    w = pl.tensor(np.ones(3, np.float32), requires_grad=True)
    (w * w).sum().backward()
    _close(w.grad, [2, 2, 2])


@idiom
def requires_grad_inplace():
    t = _t(X)
    t.requires_grad_(True)
    assert t.requires_grad


@idiom
def no_grad_context():
    w = pl.tensor(np.ones(2, np.float32), requires_grad=True)
    with pl.no_grad():
        y = w * w
    assert not y.requires_grad


@idiom
def manual_seed():
    pl.manual_seed(3)
    assert pl.initial_seed() == 3


@idiom
def exp_and_log():
    _close(_t(X).exp().log(), X, 1e-4)


@idiom
def power_operator():
    _close(_t(X) ** 2, X ** 2)


@idiom
def transpose_and_T():
    _close(_t(X).t(), X.T)
    _close(_t(X).transpose(0, 1), X.T)


@idiom
def zeros_ones_randn():
    assert pl.zeros(2, 3).sum().item() == 0 and pl.ones(2).sum().item() == 2 and pl.randn(4, 5).shape == (4, 5)


@idiom
def unsqueeze_squeeze():
    assert _t(X).unsqueeze(0).shape == (1, 2, 3) and _t(X).unsqueeze(0).squeeze(0).shape == (2, 3)


@idiom
def abs_and_clamp():
    _close(_t([-1.0, 2.0]).abs(), [1, 2])
    _close(_t([-1.0, 2.0]).clamp(min=0.0, max=1.5), [0, 1.5])


@idiom
def sqrt_method():
    _close(_t([4.0, 9.0]).sqrt(), [2, 3])


@idiom
def dtype_conversion():
    assert pl.tensor(np.array([1, 2], np.int64)).float().dtype == "float32"
    assert _t([1.5]).long().numpy().tolist() == [1]


@idiom
def arange_and_full():
    assert pl.arange(5).numpy().tolist() == [0, 1, 2, 3, 4]
    _close(pl.full((2,), 7.0), [7, 7])


# ---- layers ----
@idiom
def linear():
    assert nn.Linear(3, 4)(_t(X)).shape == (2, 4)


@idiom
def conv2d():
    assert nn.Conv2d(1, 2, 3, padding=1)(_t(np.zeros((1, 1, 5, 5)))).shape == (1, 2, 5, 5)


@idiom
def max_pool2d():
    assert nn.MaxPool2d(2)(_t(np.zeros((1, 1, 4, 4)))).shape == (1, 1, 2, 2)


@idiom
def relu_sigmoid_tanh():
    _close(nn.ReLU()(_t([-1.0, 1.0])), [0, 1])
    _close(nn.Sigmoid()(_t([0.0])), [0.5])
    _close(nn.Tanh()(_t([0.0])), [0.0])


@idiom
def dropout_eval_is_identity():
    d = nn.Dropout(0.5)
    d.eval()
    _close(d(_t(X)), X)


@idiom
def flatten():
    assert nn.Flatten()(_t(np.zeros((2, 3, 4)))).shape == (2, 12)


@idiom
def embedding():
    e = nn.Embedding(10, 4)
    assert e(pl.tensor(np.array([[1, 2]], np.int64))).shape == (1, 2, 4)


@idiom
def sequential_indexing():
    s = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    assert isinstance(s[0], nn.Linear) and len(s) == 2 and s(_t(X)).shape == (2, 4)


@idiom
def module_list():
    m = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
    assert len(m) == 2 and len(list(m.parameters())) == 4


@idiom
def layer_norm():
    y = nn.LayerNorm(3)(_t(X)).numpy()
    ref = (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 1e-5)
    _close(y, ref, 1e-4)


@idiom
def batch_norm_1d():
    bn = nn.BatchNorm1d(3)
    y = bn(_t(X)).numpy()
    ref = (X - X.mean(0)) / np.sqrt(X.var(0) + 1e-5)
    _close(y, ref, 1e-4)
    _close(bn.running_mean, 0.1 * X.mean(0), 1e-5)


@idiom
def batch_norm_2d_eval():
    bn = nn.BatchNorm2d(2)
    bn.eval()
    x = np.ones((1, 2, 2, 2), np.float32)
    _close(bn(_t(x)), x / np.sqrt(1 + 1e-5), 1e-5)


@idiom
def gelu():
    v = np.array([-1.0, 0.0, 2.0], np.float32)
    _close(nn.GELU()(_t(v)), [0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in v], 1e-5)


@idiom
def cross_entropy_loss():
    loss = nn.CrossEntropyLoss()(_t(np.zeros((2, 4))), pl.tensor(np.array([0, 1], np.int64)))
    assert abs(loss.item() - math.log(4)) < 1e-5


@idiom
def bce_with_logits_loss():
    loss = nn.BCEWithLogitsLoss()(_t([0.0, 0.0]), _t([1.0, 0.0]))
    assert abs(loss.item() - math.log(2)) < 1e-5


@idiom
def mse_loss_module():
    assert abs(nn.MSELoss()(_t([1.0, 2.0]), _t([0.0, 0.0])).item() - 2.5) < 1e-6


@idiom
def l1_loss_module():
    assert abs(nn.L1Loss()(_t([1.0, -2.0]), _t([0.0, 0.0])).item() - 1.5) < 1e-6


@idiom
def nll_loss_module():
    logp = np.log(np.full((2, 4), 0.25, np.float32))
    assert abs(nn.NLLLoss()(_t(logp), pl.tensor(np.array([0, 3], np.int64))).item() - math.log(4)) < 1e-5


@idiom
def softmax_and_log_softmax_modules():
    _close(nn.Softmax(dim=1)(_t(np.zeros((1, 4)))), np.full((1, 4), 0.25))
    _close(nn.LogSoftmax(dim=1)(_t(np.zeros((1, 2)))), np.log([[0.5, 0.5]]))


@idiom
def identity():
    _close(nn.Identity()(_t(X)), X)


@idiom
def avg_pool_2d():
    _close(nn.AvgPool2d(2)(_t(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))), [[[[2.5, 4.5], [10.5, 12.5]]]])


# ---- functional ----
@idiom
def f_relu_sigmoid_tanh():
    _close(F.relu(_t([-1.0, 1.0])), [0, 1])
    _close(F.sigmoid(_t([0.0])), [0.5])
    _close(F.tanh(_t([0.0])), [0.0])


@idiom
def f_softmax():
    _close(F.softmax(_t(np.zeros((1, 4))), dim=1), np.full((1, 4), 0.25))


@idiom
def f_cross_entropy():
    assert abs(F.cross_entropy(_t(np.zeros((2, 4))), pl.tensor(np.array([0, 1], np.int64))).item()
               - math.log(4)) < 1e-5


@idiom
def f_bce_with_logits():
    assert abs(F.binary_cross_entropy_with_logits(_t([0.0]), _t([1.0])).item() - math.log(2)) < 1e-5


@idiom
def f_log_softmax():
    _close(F.log_softmax(_t([[0.0, 0.0]]), dim=1), np.log([[0.5, 0.5]]))


@idiom
def f_mse_loss():
    assert abs(F.mse_loss(_t([1.0, 3.0]), _t([0.0, 0.0])).item() - 5.0) < 1e-6


@idiom
def f_dropout():
    _close(F.dropout(_t(X), p=0.5, training=False), X)


@idiom
def f_linear():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)  # torch layout (out, in)
    _close(F.linear(_t(X), _t(w), _t([1.0, 1.0])), X @ w.T + 1)


@idiom
def f_conv2d():
    x = np.ones((1, 1, 3, 3), np.float32)
    _close(F.conv2d(_t(x), _t(np.ones((1, 1, 3, 3)))), [[[[9.0]]]])


@idiom
def f_max_pool2d():
    _close(F.max_pool2d(_t(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)), 2), [[[[5, 7], [13, 15]]]])


@idiom
def f_embedding():
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    _close(F.embedding(pl.tensor(np.array([3, 0], np.int64)), _t(w)), w[[3, 0]])


@idiom
def f_nll_loss():
    assert abs(F.nll_loss(_t(np.log(np.full((1, 2), 0.5))), pl.tensor(np.array([1], np.int64))).item()
               - math.log(2)) < 1e-5


@idiom
def f_gelu():
    _close(F.gelu(_t([0.0])), [0.0])


@idiom
def f_layer_norm():
    _close(F.layer_norm(_t(X), (3,)), (X - X.mean(1, keepdims=True)) / np.sqrt(X.var(1, keepdims=True) + 1e-5), 1e-4)


@idiom
def f_flatten():
    assert F.flatten(_t(np.zeros((2, 3, 4)))).shape == (2, 12)


# ---- modules ----
@idiom
def custom_module_and_parameters():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)
    net = Net()
    assert [n for n, _ in net.named_parameters()] and len(list(net.parameters())) == 2 and net(_t(X)).shape == (2, 2)


@idiom
def count_parameters():
    assert sum(p.numel() for p in nn.Linear(3, 2).parameters()) == 8


@idiom
def load_a_torch_layout_state_dict():
    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    w0 = np.arange(6, dtype=np.float32).reshape(2, 3)  # torch: (out, in)
    sd = {"0.weight": w0, "0.bias": np.ones(2, np.float32), "2.weight": np.ones((1, 2), np.float32),
          "2.bias": np.zeros(1, np.float32)}
    pl.nn.utils.load_torch_state_dict(net, sd)
    _close(net(_t(X)), np.maximum(X @ w0.T + 1, 0) @ np.ones((2, 1)))


@idiom
def state_dict_round_trip():
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    _close(b(_t(X)), a(_t(X)).numpy())


@idiom
def train_eval_flags():
    m = nn.Sequential(nn.Dropout(0.5))
    m.eval()
    assert not m.training
    m.train()
    assert m.training


@idiom
def module_zero_grad():
    m = nn.Linear(3, 1)
    m(_t(X)).sum().backward()
    m.zero_grad()
    assert all(p.grad is None or not np.asarray(p.grad).any() for p in m.parameters())


@idiom
def children_and_modules():
    s = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    assert len(list(s.children())) == 2 and len(list(s.modules())) == 3


@idiom
def module_apply():
    seen = []
    nn.Sequential(nn.Linear(3, 4), nn.ReLU()).apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Sequential" and "Linear" in seen


@idiom
def init_xavier_uniform():
    lin = nn.Linear(30, 20)
    nn.init.xavier_uniform_(lin.weight)
    bound = math.sqrt(6 / 50)
    w = np.asarray(lin.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2


@idiom
def init_zeros_and_constant():
    lin = nn.Linear(3, 2)
    nn.init.zeros_(lin.bias)
    nn.init.constant_(lin.weight, 0.5)
    assert not np.asarray(lin.bias).any() and (np.asarray(lin.weight) == 0.5).all()


@idiom
def init_kaiming_normal():
    lin = nn.Linear(400, 300)
    nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
    assert abs(np.asarray(lin.weight).std() - math.sqrt(2 / 400)) < 0.01


@idiom
def buffers_in_state_dict():
    bn = nn.BatchNorm1d(3)
    assert "running_mean" in bn.state_dict() and "running_var" in bn.state_dict()


# ---- optimisation ----
@idiom
def sgd_step():
    m = nn.Linear(3, 1)
    opt = pl.optim.SGD(m.parameters(), lr=0.1)
    before = np.asarray(m.bias).copy()
    opt.zero_grad()
    m(_t(X)).sum().backward()
    opt.step()
    _close(m.bias, before - 0.1 * 2)


@idiom
def adam_step():
    m = nn.Linear(3, 1)
    opt = pl.optim.Adam(m.parameters(), lr=0.01)
    before = np.asarray(m.bias).copy()
    m(_t(X)).sum().backward()
    opt.step()
    _close(m.bias, before - 0.01, 1e-4)


@idiom
def optimizer_state_dict():
    m = nn.Linear(3, 1)
    opt = pl.optim.Adam(m.parameters(), lr=0.01)
    m(_t(X)).sum().backward()
    opt.step()
    pl.optim.Adam(m.parameters(), lr=0.01).load_state_dict(opt.state_dict())


@idiom
def param_groups_lr():
    opt = pl.optim.SGD(nn.Linear(3, 1).parameters(), lr=0.1)
    opt.param_groups[0]["lr"] = 0.05
    assert abs(opt.lr - 0.05) < 1e-7


@idiom
def step_lr():
    opt = pl.optim.SGD(nn.Linear(3, 1).parameters(), lr=0.1)
    sched = pl.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    sched.step()
    assert abs(opt.param_groups[0]["lr"] - 0.05) < 1e-7


@idiom
def cosine_annealing_lr():
    opt = pl.optim.SGD(nn.Linear(3, 1).parameters(), lr=0.1)
    sched = pl.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    sched.step()
    assert abs(sched.get_last_lr()[0] - 0.05) < 1e-7


@idiom
def clip_grad_norm():
    m = nn.Linear(3, 1)
    m(_t(X * 100)).sum().backward()
    pl.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    assert math.sqrt(sum(float((np.asarray(p.grad) ** 2).sum()) for p in m.parameters())) <= 1.0 + 1e-4


@idiom
def clip_grad_value():
    m = nn.Linear(3, 1)
    m(_t(X * 100)).sum().backward()
    pl.nn.utils.clip_grad_value_(m.parameters(), 0.5)
    assert all(np.abs(np.asarray(p.grad)).max() <= 0.5 for p in m.parameters())


# ---- saving, data, metrics ----
@idiom
def save_and_load_model(tmp="/tmp"):
    import tempfile
    m, n = nn.Linear(3, 2), nn.Linear(3, 2)
    with tempfile.TemporaryDirectory() as d:
        pl.save(m, os.path.join(d, "m.safetensors"))
        pl.load(n, os.path.join(d, "m.safetensors"))
    _close(n(_t(X)), m(_t(X)).numpy())


@idiom
def save_a_checkpoint_dict():
    import tempfile
    m = nn.Linear(3, 2)
    opt = pl.optim.Adam(m.parameters(), lr=0.01)
    m(_t(X)).sum().backward()
    opt.step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ckpt.pl")
        pl.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path)
        ckpt = pl.load(path)
    n = nn.Linear(3, 2)
    n.load_state_dict(ckpt["model"])
    pl.optim.Adam(n.parameters(), lr=0.01).load_state_dict(ckpt["optimizer"])
    assert ckpt["epoch"] == 3
    _close(n(_t(X)), m(_t(X)).numpy())


@idiom
def save_modules_in_a_dict():
    import tempfile
    m = nn.Linear(3, 2)
    with tempfile.TemporaryDirectory() as d:
        pl.save({"model": m, "step": 10}, os.path.join(d, "x.pl"))
        got = pl.load(os.path.join(d, "x.pl"))
    assert got["step"] == 10 and set(got["model"]) == set(m.state_dict())


@idiom
def data_loader():
    batches = list(pl.data.DataLoader(X, np.array([0, 1]), batch_size=1, shuffle=False))
    assert len(batches) == 2 and batches[1][1].tolist() == [1]


@idiom
def accuracy_by_argmax():
    logits = _t([[0.1, 0.9], [0.8, 0.2]])
    labels = np.array([1, 0])
    assert (logits.argmax(dim=1).numpy() == labels).mean() == 1.0


def test_the_everyday_pytorch_idioms_work():
    missing = []
    for fn in IDIOMS:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - any failure is a missing idiom
            missing.append(f"{fn.__name__}: {type(e).__name__}: {str(e)[:120]}")
    working = len(IDIOMS) - len(missing)
    print(f"\n{working} of {len(IDIOMS)} PyTorch idioms work; missing:\n  " + "\n  ".join(missing))
    assert len(IDIOMS) >= 89, len(IDIOMS)
    assert working >= MIN_WORKING, f"{working} of {len(IDIOMS)} work:\n" + "\n".join(missing)


@pytest.mark.parametrize("fn", IDIOMS, ids=lambda f: f.__name__)
def test_idiom(fn):
    """Each idiom on its own, so a regression names itself; the missing ones skip."""
    try:
        fn()
    except (AttributeError, TypeError, NotImplementedError) as e:
        pytest.skip(f"not provided: {type(e).__name__}: {str(e)[:100]}")
