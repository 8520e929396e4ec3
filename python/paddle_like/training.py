"""A single-process training loop with a progress bar, and evaluation.

    report = paddle_like.training.fit(model, nn.CrossEntropyLoss(), opt,
                                      train.features, train.labels, epochs=2, batch_size=64)
    acc = paddle_like.training.evaluate(model, test.features, test.labels)
"""

import time

import numpy as np

from . import _C
from .data import DataLoader
from .grad_mode import no_grad
from .utils import ProgressBar

__all__ = ["fit", "evaluate", "predict"]


def fit(model, loss_fn, optimizer, inputs, labels, epochs=1, batch_size=64, seed=0, progress=True,
        on_epoch_end=None):
    """Trains `model` for `epochs` passes over (inputs, labels) in shuffled batches.

    Each step: loss_fn(model(x), y).backward(); optimizer.step(). Returns a dict with
    "losses" (mean loss per epoch), "steps", "seconds" and "samples_per_s".
    on_epoch_end(epoch, mean_loss) is called after each epoch.
    """
    loader = DataLoader(inputs, labels, batch_size=batch_size, shuffle=True, seed=seed)
    model.train()
    losses, steps, samples = [], 0, 0
    start = time.monotonic()
    for epoch in range(epochs):
        total, count = 0.0, 0
        bar = ProgressBar(len(loader), desc=f"epoch {epoch + 1}/{epochs}", disable=not progress, unit="step")
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            value = loss.item()
            if not np.isfinite(value):
                bar.close()
                raise FloatingPointError(f"fit: the loss became {value} at step {steps} (epoch {epoch + 1}); "
                                         f"lower the learning rate")
            total += value
            count += 1
            steps += 1
            samples += len(y)
            bar.update(1, loss=total / count)
        bar.close()
        losses.append(total / max(count, 1))
        if on_epoch_end is not None:
            on_epoch_end(epoch, losses[-1])
    seconds = time.monotonic() - start
    return {"losses": losses, "steps": steps, "seconds": seconds, "samples_per_s": samples / max(seconds, 1e-9)}


def predict(model, inputs, batch_size=500):
    """The model's outputs for every input, as one NumPy array (evaluation mode, no
    graph recorded; the previous mode is restored)."""
    was_training = model.training
    model.eval()
    try:
        outs = []
        with no_grad():
            for b in range(0, len(inputs), batch_size):
                outs.append(model(np.ascontiguousarray(inputs[b:b + batch_size])).numpy().copy())
        return np.concatenate(outs) if outs else np.zeros((0,), np.float32)
    finally:
        model.train(was_training)


def evaluate(model, inputs, labels, batch_size=500, metric="accuracy"):
    """Accuracy (classification logits (N, K)) or AUC (click logits (N) / (N, 1))."""
    logits = predict(model, inputs, batch_size)
    if metric == "accuracy":
        return _C.count_correct(logits, labels) / max(len(labels), 1)
    if metric == "auc":
        return _C.binary_auc(_C.sigmoid_of(logits.reshape(-1)).numpy(), np.asarray(labels, np.float32))
    raise ValueError(f"evaluate: metric must be 'accuracy' or 'auc', got {metric!r}")
