"""Gradients of models composed in Python against central finite differences."""

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn
from paddle_like.nn import functional as F


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 4)
        self.fc2 = nn.Linear(4, 3)

    def forward(self, x):
        h = F.tanh(self.fc1(x))
        return self.fc2(h) + 0.5 * self.fc2(F.sigmoid(self.fc1(x)))   # reuses layers, sums paths


def _finite_difference_check(loss_fn, tensors, rng, samples=8, eps=1e-2, rtol=3e-2, atol=2e-3):
    loss = loss_fn()
    loss.backward()
    for name, t in tensors:
        grad = t.grad.numpy().copy()
        values = t.numpy()
        for flat in rng.choice(values.size, size=min(samples, values.size), replace=False):
            idx = np.unravel_index(flat, values.shape)
            old = values[idx]
            values[idx] = old + eps
            plus = loss_fn().item()
            values[idx] = old - eps
            minus = loss_fn().item()
            values[idx] = old
            numeric = (plus - minus) / (2 * eps)
            assert grad[idx] == pytest.approx(numeric, rel=rtol, abs=atol), (name, idx)


def test_python_model_gradients_match_finite_differences(rng):
    pl.manual_seed(3)
    model = TwoLayer()
    assert [n for n, _ in model.named_parameters()] == ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
    x = rng.normal(size=(6, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=6).astype(np.int64)
    # Non-zero biases so their gradients are exercised away from the initial zeros.
    for name, p in model.named_parameters():
        p.numpy()[...] += rng.normal(scale=0.1, size=p.shape).astype(np.float32)
    _finite_difference_check(lambda: nn.CrossEntropyLoss()(model(x), y), model.named_parameters(), rng)


def test_conv_pool_model_gradients(rng):
    pl.manual_seed(5)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(2 * 3 * 3, 4))
    x = rng.normal(size=(3, 1, 6, 6)).astype(np.float32)
    y = rng.integers(0, 4, size=3).astype(np.int64)
    _finite_difference_check(lambda: F.cross_entropy(model(x), y), model.named_parameters(), rng, samples=6,
                             eps=1e-3)  # small: max-pool windows must not switch


def test_tensor_ops_gradients(rng):
    a = pl.tensor(rng.normal(size=(3, 4)).astype(np.float32), requires_grad=True)
    b = pl.tensor(rng.normal(size=(3, 4)).astype(np.float32), requires_grad=True)
    w = pl.tensor(rng.normal(size=(4, 2)).astype(np.float32), requires_grad=True)
    labels = np.array([1.0, 0.0, 1.0], np.float32)

    def loss():
        h = (a * b + a - 0.5 * b) @ w                    # (3, 2)
        z = h.reshape(6).reshape(3, 2).sum() / 3.0 + (h * h).mean()
        return z + F.binary_cross_entropy_with_logits(h @ pl.tensor(
            np.array([[1.0], [-1.0]], np.float32)), labels)
    _finite_difference_check(loss, [("a", a), ("b", b), ("w", w)], rng, samples=6)


def test_backward_accumulates_until_the_optimizer_clears():
    pl.manual_seed(1)
    model = nn.Linear(2, 1)
    x = np.ones((1, 2), np.float32)
    model(x).sum().backward()
    g1 = model.weight.grad.numpy().copy()
    model(x).sum().backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), 2 * g1)
    opt = pl.optim.SGD(model.parameters(), lr=0.1)
    opt.step()
    np.testing.assert_array_equal(model.weight.grad.numpy(), 0)


def test_a_model_of_the_new_layers_and_functional_ops_matches_finite_differences(rng):
    """LayerNorm, BatchNorm (training), GELU, log_softmax + nll_loss, F.linear (torch's
    (out, in) weight), avg_pool2d and reductions along a dimension, composed in Python."""
    pl.manual_seed(11)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, padding=1)
            self.bn = nn.BatchNorm2d(2)
            self.norm = nn.LayerNorm(8)
            self.act = nn.GELU()

        def forward(self, x, head_w):
            h = F.avg_pool2d(self.bn(self.conv(x)), 2)            # (N, 2, 2, 2)
            h = self.act(self.norm(h.reshape(x.shape[0], 8)))
            return F.log_softmax(F.linear(h, head_w), dim=1)

    net = Net()
    for _, p in net.named_parameters():
        p.numpy()[...] += rng.normal(scale=0.2, size=p.shape).astype(np.float32)
    head_w = pl.tensor(rng.normal(size=(3, 8)).astype(np.float32), requires_grad=True)
    x = rng.normal(size=(4, 1, 4, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 2], np.int64)

    def loss():
        logp = net(pl.tensor(x), head_w)
        return F.nll_loss(logp, y) + logp.exp().sum(dim=1).mean() * 0.1 + logp.max(dim=0)[0].mean() * 0.01
    _finite_difference_check(loss, net.named_parameters() + [("head_w", head_w)], rng, samples=5, eps=1e-3)


def test_batch_norm_running_statistics_are_buffers_saved_with_the_model(tmp_path, rng):
    bn = nn.BatchNorm1d(3, momentum=0.5)
    x = rng.normal(loc=2.0, size=(16, 3)).astype(np.float32)
    bn(pl.tensor(x))
    expected_mean = 0.5 * x.mean(0)
    expected_var = 0.5 * 1.0 + 0.5 * x.var(0, ddof=1)   # unbiased, as torch
    assert np.allclose(bn.running_mean.numpy(), expected_mean, atol=1e-5)
    assert np.allclose(bn.running_var.numpy(), expected_var, atol=1e-5)
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]   # the pservers' part
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var"]
    pl.save(bn, tmp_path / "bn.safetensors")
    fresh = nn.BatchNorm1d(3)
    pl.load(fresh, tmp_path / "bn.safetensors")
    fresh.eval()
    bn.eval()
    assert np.allclose(fresh(pl.tensor(x)).numpy(), bn(pl.tensor(x)).numpy())
    other = nn.BatchNorm1d(3)
    other.load_state_dict(bn.state_dict())
    assert np.allclose(other.running_var.numpy(), expected_var, atol=1e-5)
    with pytest.raises(ValueError, match="BatchNorm1d: expected a 2-D or 3-D input"):
        bn(pl.tensor(np.zeros((1, 3, 2, 2), np.float32)))
