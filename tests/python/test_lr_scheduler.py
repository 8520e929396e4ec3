"""paddle_like.optim.lr_scheduler against hand-computed rates (and torch's schedulers
when torch is installed): over a local optimizer they move its rate per step() as
torch's do, and the updates the C++ rule applies follow; over a spec they become the
schedule the pservers apply (tests/optim/lr_schedule_test.cc checks a shard)."""

import math

import numpy as np
import pytest

import paddle_like as pl
from paddle_like.optim import lr_scheduler


def _one_weight():
    model = pl.nn.Linear(1, 1)
    np.asarray(model.weight)[...] = 1.0
    return model


def _sgd_steps(model, opt, sched, n):
    """n SGD updates with gradient 1 on w, scheduler.step() after each; w after each."""
    values = []
    for _ in range(n):
        out = model(pl.tensor(np.ones((1, 1), np.float32)))
        out.sum().backward()  # d/dw = 1, d/db = 1
        opt.step()
        sched.step()
        values.append(float(np.asarray(model.weight)[0, 0]))
    return values


def test_step_lr_moves_the_local_rate_and_the_updates_follow():
    model = _one_weight()
    opt = pl.optim.SGD(model.parameters(), lr=0.1)
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    # rates 0.1, 0.1, 0.05, 0.05, 0.025 from w = 1
    assert _sgd_steps(model, opt, sched, 5) == pytest.approx([0.9, 0.8, 0.75, 0.7, 0.675], abs=1e-6)
    assert sched.get_last_lr() == pytest.approx([0.1 * 0.5 ** 2])
    assert opt.lr == pytest.approx(0.025)  # after 5 step() calls: 0.1 * 0.5 ** (5 // 2)
    # Resumed: a new scheduler takes the old one's state and the same rate.
    again = lr_scheduler.StepLR(pl.optim.SGD(_one_weight().parameters(), lr=0.1), step_size=2, gamma=0.5)
    again.load_state_dict(sched.state_dict())
    assert again.optimizer.lr == pytest.approx(0.025)
    with pytest.raises(KeyError, match="last_epoch"):
        again.load_state_dict({"base_lr": 0.1})


def test_cosine_warm_up_linear_constant_and_lambda_rates():
    opt = pl.optim.Adam(_one_weight().parameters(), lr=1.0)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.2)
    rates = [opt.lr]
    for _ in range(5):
        cos.step()
        rates.append(opt.lr)
    expected = [0.2 + 0.8 * (1 + math.cos(math.pi * min(k, 4) / 4)) / 2 for k in range(6)]
    assert rates == pytest.approx(expected, abs=1e-6)
    assert rates[-1] == pytest.approx(0.2)  # held at eta_min

    warm = lr_scheduler.StepLR(pl.optim.SGD(_one_weight().parameters(), lr=1.0), step_size=100, gamma=0.1,
                               warmup_steps=4, warmup_factor=0.2)
    seen = [warm.optimizer.lr]
    for _ in range(4):
        warm.step()
        seen.append(warm.optimizer.lr)
    assert seen == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])

    lin = lr_scheduler.LinearLR(pl.optim.SGD(_one_weight().parameters(), lr=1.0), start_factor=0.5,
                                end_factor=1.0, total_iters=2)
    assert lin.get_last_lr() == pytest.approx([0.5])
    lin.step()
    assert lin.get_last_lr() == pytest.approx([0.75])
    const = lr_scheduler.ConstantLR(pl.optim.SGD(_one_weight().parameters(), lr=1.0), factor=0.5, total_iters=2)
    got = [const.get_last_lr()[0]]
    for _ in range(3):
        const.step()
        got.append(const.get_last_lr()[0])
    assert got == pytest.approx([0.5, 0.5, 1.0, 1.0])

    lam = lr_scheduler.LambdaLR(pl.optim.SGD(_one_weight().parameters(), lr=2.0), lambda e: 1.0 / (1 + e))
    lam.step()
    lam.step()
    assert lam.optimizer.lr == pytest.approx(2.0 / 3)


def test_over_a_spec_the_schedule_goes_with_it_for_the_pservers():
    spec = pl.optim.spec("adam", lr=1e-3)
    sched = lr_scheduler.CosineAnnealingLR(spec, T_max=1000, warmup_steps=10, warmup_factor=0.1)
    assert "schedule=cosine(t_max=1000, eta_min_factor=0) + warmup(10 from 0.1)" in repr(sched.spec)
    assert repr(sched.spec.schedule) == repr(sched.schedule)
    assert pl.distributed.environment.as_optimizer_spec(sched).schedule.factor(500) == pytest.approx(0.5)
    # A lambda is tabulated for the pservers, exact at its points and close between.
    lam = lr_scheduler.LambdaLR(spec, lambda k: 0.99 ** k, total_steps=630)
    for k in (0, 10, 315, 630):
        assert lam.schedule.factor(k) == pytest.approx(0.99 ** k, rel=2e-2)
    assert lam.schedule.factor(0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="total_steps"):
        lr_scheduler.LambdaLR(spec, lambda k: 1.0)
    with pytest.raises(ValueError, match="step_size must be in"):
        lr_scheduler.StepLR(spec, step_size=0)
    with pytest.raises(ValueError, match="eta_min must be in"):
        lr_scheduler.CosineAnnealingLR(spec, T_max=10, eta_min=1.0)
    with pytest.raises(TypeError, match="takes a paddle_like.optim optimizer or an optimizer spec"):
        lr_scheduler.StepLR(object(), step_size=1)


def test_rates_match_torch_when_it_is_installed():
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.ones(1))
    for make_ours, make_theirs in [
        (lambda o: lr_scheduler.StepLR(o, 3, 0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5)),
        (lambda o: lr_scheduler.CosineAnnealingLR(o, 7, 0.01),
         lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 7, 0.01)),
        (lambda o: lr_scheduler.ExponentialLR(o, 0.9), lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.9)),
        (lambda o: lr_scheduler.LinearLR(o, 0.25, 1.0, 4), lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.25, 1.0, 4)),
    ]:
        ours = make_ours(pl.optim.SGD(_one_weight().parameters(), lr=0.1))
        topt = torch.optim.SGD([w], lr=0.1)
        theirs = make_theirs(topt)
        for _ in range(7):
            assert ours.get_last_lr()[0] == pytest.approx(theirs.get_last_lr()[0], rel=1e-5)
            topt.step()
            ours.step()
            theirs.step()
