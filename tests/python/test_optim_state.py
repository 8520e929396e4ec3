"""optimizer.state_dict() / load_state_dict(): a run resumed from a checkpoint into a
fresh model and optimizer continues exactly as the uninterrupted run, and both match
the update rules computed by hand (float64 NumPy)."""

import numpy as np
import pytest

import paddle_like as pl
from paddle_like import nn

LR, BETAS, EPS, ACC0 = 0.1, (0.9, 0.999), 1e-8, 0.1


def adam_by_hand(p, grads):
    """Adam with bias correction over the gradients of consecutive steps."""
    m = v = 0.0
    for t, g in enumerate(grads, 1):
        m = BETAS[0] * m + (1 - BETAS[0]) * g
        v = BETAS[1] * v + (1 - BETAS[1]) * g * g
        p = p - LR * (m / (1 - BETAS[0] ** t)) / (np.sqrt(v / (1 - BETAS[1] ** t)) + EPS)
    return p


def adagrad_by_hand(p, grads):
    a = ACC0
    for g in grads:
        a = a + g * g
        p = p - LR * g / (np.sqrt(a) + EPS)
    return p


BY_HAND = {"adam": adam_by_hand, "adagrad": adagrad_by_hand}


def make_optimizer(kind, model, lr=LR):
    if kind == "adam":
        return pl.optim.Adam(model, lr=lr, betas=BETAS, eps=EPS)
    return pl.optim.Adagrad(model, lr=lr, initial_accumulator_value=ACC0, eps=EPS)


# --- dense: a Linear layer, loss = sum(x @ w + b), so dL/dw = column sums of x and
# dL/db = batch size, whatever the parameters: each step's gradient is known exactly.
BATCHES = [np.array([[1.0, -2.0], [0.5, 3.0]], np.float32),
           np.array([[-4.0, 1.0], [2.0, 0.25], [1.0, 1.0]], np.float32)]


def dense_model(seed):
    pl.manual_seed(seed)
    return nn.Linear(2, 1)


def dense_step(model, opt, x):
    model(x).sum().backward()
    opt.step()


@pytest.mark.parametrize("kind", ["adam", "adagrad"])
def test_dense_resume_equals_uninterrupted_and_hand_computed(kind):
    straight = dense_model(1)
    w0, b0 = straight.weight.numpy().astype(np.float64), straight.bias.numpy().astype(np.float64)
    opt = make_optimizer(kind, straight)
    for x in BATCHES:
        dense_step(straight, opt, x)

    first = dense_model(1)
    opt1 = make_optimizer(kind, first)
    dense_step(first, opt1, BATCHES[0])
    model_state, opt_state = first.state_dict(), opt1.state_dict()
    del first, opt1
    resumed = dense_model(2)                              # other initial values
    resumed.load_state_dict(model_state)
    opt2 = make_optimizer(kind, resumed, lr=0.5 * LR)     # the lr comes back from the state
    opt2.load_state_dict(opt_state)
    assert opt2.lr == pytest.approx(LR) and opt2.param_groups[0]["lr"] == pytest.approx(LR)
    dense_step(resumed, opt2, BATCHES[1])

    np.testing.assert_array_equal(resumed.weight.numpy(), straight.weight.numpy())
    np.testing.assert_array_equal(resumed.bias.numpy(), straight.bias.numpy())
    assert opt2.steps == opt.steps == 2
    grads_w = [x.sum(axis=0, dtype=np.float64).reshape(2, 1) for x in BATCHES]
    grads_b = [np.array([float(len(x))]) for x in BATCHES]
    np.testing.assert_allclose(straight.weight.numpy(), BY_HAND[kind](w0, grads_w), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(straight.bias.numpy(), BY_HAND[kind](b0, grads_b), rtol=1e-5, atol=1e-7)


def test_adam_state_holds_the_step_and_moments():
    model = dense_model(1)
    opt = make_optimizer("adam", model)
    dense_step(model, opt, BATCHES[0])
    sd = opt.state_dict()
    assert sd["steps"] == 1 and list(sd["state"]) == ["w", "b"]
    assert sd["param_groups"] == [{"kind": "adam", "lr": pytest.approx(LR), "momentum": pytest.approx(0.9),
                                   "betas": (pytest.approx(0.9), pytest.approx(0.999)),
                                   "eps": pytest.approx(EPS), "initial_accumulator_value": pytest.approx(0.1),
                                   "weight_decay": 0.0}]
    w = sd["state"]["w"]
    assert set(w) == {"step", "exp_avg", "exp_avg_sq"} and w["step"] == 1
    g = BATCHES[0].sum(axis=0).reshape(2, 1)
    np.testing.assert_allclose(w["exp_avg"], (1 - BETAS[0]) * g, rtol=1e-5)
    # 1 - beta2 is computed in float32 (0.000999987), 1.3e-5 away from 0.001.
    np.testing.assert_allclose(w["exp_avg_sq"], (1 - BETAS[1]) * g * g, rtol=1e-4)
    w["exp_avg"][...] = 7.0                               # a copy: the optimizer is unaffected
    assert opt.state_dict()["state"]["w"]["exp_avg"][0, 0] != 7.0


# --- sparse: an Embedding, loss = sum(emb(ids) * coef), so the gradient of the row of
# id k is the sum of coef's rows at the positions of k. Lazy updates: a row has its own
# step count and is updated only in the steps whose batch holds its id.
SPARSE_BATCHES = [(np.array([4, 9, 4], np.int64), np.array([[1.0, -1.0], [0.5, 2.0], [2.0, 0.0]], np.float32)),
                  (np.array([9, 17], np.int64), np.array([[-3.0, 1.0], [1.0, 1.0]], np.float32))]


def sparse_model():
    pl.manual_seed(5)
    return nn.Embedding(0, 2)


def sparse_step(model, opt, ids, coef):
    (model(ids) * coef).sum().backward()
    opt.step()


def row_grads(row_id):
    """The gradient of row `row_id` in each step whose batch holds it."""
    return [coef[ids == row_id].sum(axis=0, dtype=np.float64) for ids, coef in SPARSE_BATCHES
            if (ids == row_id).any()]


@pytest.mark.parametrize("kind", ["adagrad", "adam"])
def test_sparse_resume_equals_uninterrupted_and_hand_computed(kind):
    straight = sparse_model()
    opt = make_optimizer(kind, straight)
    initial = {}
    for ids, coef in SPARSE_BATCHES:
        straight(ids)                                     # creates the rows (deterministic per id)
        initial.update({int(k): straight.weight.rows()[1][list(straight.weight.rows()[0]).index(k)]
                        .astype(np.float64) for k in ids if int(k) not in initial})
        sparse_step(straight, opt, ids, coef)

    first = sparse_model()
    opt1 = make_optimizer(kind, first)
    sparse_step(first, opt1, *SPARSE_BATCHES[0])
    model_state, opt_state = first.state_dict(), opt1.state_dict()
    table_state = opt_state["state"]["table"]
    assert table_state["ids"].tolist() == [4, 9] and table_state["step"].tolist() == [1, 1]
    resumed = sparse_model()
    resumed.load_state_dict(model_state)
    opt2 = make_optimizer(kind, resumed)
    opt2.load_state_dict(opt_state)
    sparse_step(resumed, opt2, *SPARSE_BATCHES[1])

    assert opt2.state_dict()["state"]["table"]["step"].tolist() == [1, 2, 1]   # ids 4, 9, 17
    got, want = resumed.state_dict(), straight.state_dict()
    assert got["table.ids"].tolist() == want["table.ids"].tolist() == [4, 9, 17]
    np.testing.assert_array_equal(got["table"], want["table"])
    for i, row_id in enumerate([4, 9, 17]):
        expected = BY_HAND[kind](initial[row_id], row_grads(row_id))
        np.testing.assert_allclose(want["table"][i], expected, rtol=1e-5, atol=1e-7, err_msg=f"row {row_id}")


def test_a_fresh_optimizer_without_the_state_would_differ():
    # The check above is not vacuous: dropping Adagrad's accumulators changes step 2.
    model = dense_model(1)
    opt = make_optimizer("adagrad", model)
    dense_step(model, opt, BATCHES[0])
    state = model.state_dict()
    straight_opt_state = opt.state_dict()
    dense_step(model, opt, BATCHES[1])
    other = dense_model(1)
    other.load_state_dict(state)
    dense_step(other, make_optimizer("adagrad", other), BATCHES[1])
    assert not np.array_equal(other.weight.numpy(), model.weight.numpy())
    assert straight_opt_state["state"]["w"]["step"] == 1


def _trained(kind="adam"):
    model = dense_model(1)
    opt = make_optimizer(kind, model)
    dense_step(model, opt, BATCHES[0])
    return model, opt


def _assert_unchanged(opt, before):
    after = opt.state_dict()
    assert after["steps"] == before["steps"] and after["param_groups"] == before["param_groups"]
    assert list(after["state"]) == list(before["state"])
    for name, entry in before["state"].items():
        for key, value in entry.items():
            np.testing.assert_array_equal(after["state"][name][key], value, err_msg=f"{name} {key}")


def test_another_optimizer_kind_is_refused():
    _, adam = _trained("adam")
    model, adagrad = _trained("adagrad")
    before = adagrad.state_dict()
    with pytest.raises(ValueError, match="adam optimizer, this one is adagrad"):
        adagrad.load_state_dict(adam.state_dict())
    _assert_unchanged(adagrad, before)


def test_wrong_shapes_names_and_entries_are_clear_errors_and_change_nothing():
    model, opt = _trained()
    before = opt.state_dict()
    fresh = make_optimizer("adam", model)

    bad = opt.state_dict()
    bad["state"]["w"]["exp_avg_sq"] = np.zeros((3, 1), np.float32)
    bad["state"]["b"]["exp_avg"] = np.zeros((1,), np.float32)        # fine, but not applied
    with pytest.raises(ValueError, match=r"slot 1 of 'w': expected \[2, 1\] float32, got \[3, 1\] float32"):
        opt.load_state_dict(bad)
    _assert_unchanged(opt, before)

    bad = opt.state_dict()
    bad["state"]["fc9.w"] = bad["state"].pop("w")
    with pytest.raises(KeyError, match="'fc9.w' is not a dense parameter"):
        opt.load_state_dict(bad)

    bad = opt.state_dict()
    del bad["state"]["w"]["exp_avg_sq"]
    with pytest.raises(KeyError, match="'w'.*exp_avg_sq"):
        opt.load_state_dict(bad)

    bad = opt.state_dict()
    bad["state"]["w"]["sum"] = np.zeros((2, 1), np.float32)
    with pytest.raises(ValueError, match="unknown entries 'sum'"):
        opt.load_state_dict(bad)

    bad = opt.state_dict()
    bad["state"]["w"]["exp_avg"] = bad["state"]["w"]["exp_avg"].astype(np.float64)
    with pytest.raises(TypeError, match="float64"):
        opt.load_state_dict(bad)

    bad = opt.state_dict()
    bad["state"]["w"]["step"] = -1
    with pytest.raises(ValueError, match="step -1"):
        opt.load_state_dict(bad)

    bad = opt.state_dict()
    bad["param_groups"][0]["lr"] = -1.0
    with pytest.raises(ValueError, match="lr|learning"):
        opt.load_state_dict(bad)

    with pytest.raises(KeyError, match="param_groups"):
        opt.load_state_dict({"state": {}, "steps": 0})
    _assert_unchanged(opt, before)
    assert fresh.state_dict()["state"] == {}              # a fresh optimizer has none


def test_sparse_state_is_checked_too():
    model = sparse_model()
    opt = make_optimizer("adagrad", model)
    sparse_step(model, opt, *SPARSE_BATCHES[0])
    before = opt.state_dict()
    bad = opt.state_dict()
    bad["state"]["table"]["ids"] = np.array([4, 4], np.int64)
    with pytest.raises(ValueError, match="row 4 appears twice"):
        opt.load_state_dict(bad)
    bad = opt.state_dict()
    bad["state"]["table"]["sum"] = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"slot 0 of 'table': expected \[2, 2\] float32, got \[2, 3\]"):
        opt.load_state_dict(bad)
    _assert_unchanged(opt, before)


@pytest.mark.parametrize("make", [
    lambda m: pl.optim.SGD(m, lr=0.1),
    lambda m: pl.optim.Momentum(m, lr=0.1, momentum=0.8),
    lambda m: pl.optim.Adagrad(m, lr=0.1),
    lambda m: pl.optim.Adam(m, lr=0.1, weight_decay=0.01),
], ids=["sgd", "momentum", "adagrad", "adam"])
def test_every_kind_round_trips(make):
    model = nn.Sequential(nn.Embedding(0, 2), nn.Linear(2, 1))
    opt = make(model)
    model(np.array([3, 8], np.int64)).sum().backward()
    opt.step()
    saved = opt.state_dict()
    restored = make(model)
    restored.load_state_dict(saved)
    _assert_unchanged(restored, saved)
    assert set(saved["state"]) == {"0.table", "1.w", "1.b"}


def test_a_table_with_its_own_optimizer_follows_that_rule():
    """Embedding(optimizer=...) updates its rows with its own rule (SGD 0.25 here) while
    the optimizer's (SGD 0.5) trains everything else, and keeps it in its attributes."""
    pl.manual_seed(5)
    emb = nn.Embedding(0, 2, optimizer=pl.optim.spec("sgd", 0.25))
    assert emb.optimizer.kind == "sgd" and emb.optimizer.lr == 0.25
    assert emb._cpp.optimizer.lr == 0.25
    opt = pl.optim.SGD(emb.parameters(), lr=0.5)
    ids, coef = SPARSE_BATCHES[0]
    emb(ids)
    before = dict(zip(emb.weight.rows()[0].tolist(), emb.weight.rows()[1].astype(np.float64)))
    sparse_step(emb, opt, ids, coef)
    after = dict(zip(emb.weight.rows()[0].tolist(), emb.weight.rows()[1].astype(np.float64)))
    for row_id in (4, 9):
        np.testing.assert_allclose(after[row_id], before[row_id] - 0.25 * row_grads(row_id)[0], rtol=1e-6)
    with pytest.raises(TypeError, match="optimizer must be a paddle_like.optim.spec"):
        nn.Embedding(0, 2, optimizer="adagrad")
