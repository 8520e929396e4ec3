"""Learning-rate schedules, named like torch.optim.lr_scheduler, computed by the C++
schedule the update rules apply (paddle_like/optim/lr_schedule.h).

In one process, over a paddle_like.optim optimizer, they behave as torch's: the rate
starts at lr * factor(0), and each scheduler.step() (per epoch or per batch, your
choice) moves it to lr * factor(number of step() calls).

    opt = pl.optim.SGD(model.parameters(), lr=0.1)
    sched = pl.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(90):
        train(...); sched.step()

In a distributed job the optimizer runs on the pservers, so the schedule goes with the
optimizer's spec: build the scheduler over a spec and hand it to the job. The pservers
then set the rate of every update from the count of updates before it (the job's
steps on that shard; an embedding row's own count), so step() is not needed there and
the schedule survives restarts with the shard's checkpoint:

    spec = pl.optim.spec("adam", lr=1e-3)
    sched = pl.optim.lr_scheduler.CosineAnnealingLR(spec, T_max=5000, warmup_steps=100)
    model = pl.distributed.ParameterServerModel(net, optimizer=sched)

Every scheduler takes warmup_steps and warmup_factor: a linear warm-up from
warmup_factor to 1 over the first warmup_steps, multiplied into the schedule.
"""

from .. import _C

__all__ = ["LRScheduler", "StepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR",
           "LinearLR", "ConstantLR"]


class LRScheduler:
    """Base class: a C++ LrSchedule over a local optimizer or an optimizer spec."""

    def __init__(self, optimizer, schedule):
        self.optimizer = optimizer
        self.schedule = schedule
        self._local = not isinstance(optimizer, _C.OptimizerSpec)
        if self._local and not hasattr(optimizer, "lr"):
            raise TypeError(f"{type(self).__name__} takes a paddle_like.optim optimizer or an optimizer spec "
                            f"(paddle_like.optim.spec(...)), got {type(optimizer).__name__}")
        self.base_lr = float(optimizer.lr)
        self.last_epoch = 0
        self._apply()

    @property
    def spec(self):
        """The optimizer's spec carrying this schedule, for the pservers."""
        base = self.optimizer if not self._local else self.optimizer.spec
        return base.with_schedule(self.schedule)

    def _apply(self):
        if self._local:
            self.optimizer.lr = self.base_lr * self.schedule.factor(self.last_epoch)

    def step(self):
        """One more epoch (or batch) done: the local optimizer's rate follows. Over a
        spec (a distributed job) the pservers count updates themselves; step() only
        keeps get_last_lr() in step with your count."""
        self.last_epoch += 1
        self._apply()

    def get_last_lr(self):
        return [self.base_lr * self.schedule.factor(self.last_epoch)]

    def state_dict(self):
        return {"last_epoch": self.last_epoch, "base_lr": self.base_lr}

    def load_state_dict(self, state):
        for key in ("last_epoch", "base_lr"):
            if key not in state:
                raise KeyError(f"scheduler state_dict has no {key!r}")
        if int(state["last_epoch"]) < 0:
            raise ValueError(f"scheduler state_dict: last_epoch must be >= 0, got {state['last_epoch']}")
        self.last_epoch, self.base_lr = int(state["last_epoch"]), float(state["base_lr"])
        self._apply()

    def __repr__(self):
        return f"{type(self).__name__}({self.schedule!r}, base_lr={self.base_lr:g})"


def _schedule(kind="constant", warmup_steps=0, warmup_factor=0.0, **fields):
    return _C.LrSchedule(kind, warmup_steps=int(warmup_steps), warmup_factor=float(warmup_factor), **fields)


class StepLR(LRScheduler):
    """lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, warmup_steps=0, warmup_factor=0.0):
        super().__init__(optimizer, _schedule("step", warmup_steps, warmup_factor, step_size=int(step_size),
                                              gamma=float(gamma)))


class ExponentialLR(LRScheduler):
    """lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, warmup_steps=0, warmup_factor=0.0):
        super().__init__(optimizer, _schedule("exponential", warmup_steps, warmup_factor, gamma=float(gamma)))


class CosineAnnealingLR(LRScheduler):
    """eta_min + (lr - eta_min) * (1 + cos(pi * min(epoch, T_max) / T_max)) / 2; held at
    eta_min after T_max (torch's closed form, without restarts)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, warmup_steps=0, warmup_factor=0.0):
        lr = float(optimizer.lr)
        if eta_min < 0 or eta_min > lr:
            raise ValueError(f"eta_min must be in [0, lr={lr:g}], got {eta_min}")
        super().__init__(optimizer, _schedule("cosine", warmup_steps, warmup_factor, t_max=int(T_max),
                                              eta_min_factor=float(eta_min) / lr))


class LinearLR(LRScheduler):
    """The factor goes linearly from start_factor to end_factor over total_iters, then
    stays (torch's LinearLR; with end_factor 1, a warm-up)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, warmup_steps=0,
                 warmup_factor=0.0):
        if total_iters < 1:
            raise ValueError(f"total_iters must be >= 1, got {total_iters}")
        super().__init__(optimizer, _schedule("piecewise", warmup_steps, warmup_factor,
                                              points=[(0, float(start_factor)), (int(total_iters), float(end_factor))]))


class ConstantLR(LRScheduler):
    """factor for the first total_iters, then 1 (torch's ConstantLR)."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, warmup_steps=0, warmup_factor=0.0):
        if total_iters < 1:
            raise ValueError(f"total_iters must be >= 1, got {total_iters}")
        n = int(total_iters)
        points = [(0, float(factor)), (n - 1, float(factor)), (n, 1.0)] if n > 1 else [(0, float(factor)), (1, 1.0)]
        super().__init__(optimizer, _schedule("piecewise", warmup_steps, warmup_factor, points=points))


class LambdaLR(LRScheduler):
    """lr * lr_lambda(epoch). Over a local optimizer lr_lambda is called at every
    step(); for the pservers (over a spec) it is tabulated at `points` evenly spaced
    epochs of [0, total_steps] and interpolated linearly between them (flat after)."""

    def __init__(self, optimizer, lr_lambda, total_steps=None, points=64):
        self.lr_lambda = lr_lambda
        if isinstance(optimizer, _C.OptimizerSpec):
            if not total_steps or total_steps < 1:
                raise ValueError("LambdaLR over a spec (for the pservers) needs total_steps >= 1 to tabulate "
                                 "lr_lambda")
            n = max(2, min(int(points), 64, int(total_steps) + 1))
            steps = sorted({round(i * int(total_steps) / (n - 1)) for i in range(n)})
            table = [(int(k), float(lr_lambda(int(k)))) for k in steps]
            super().__init__(optimizer, _schedule("piecewise", points=table))
        else:
            super().__init__(optimizer, _schedule("constant"))

    def _apply(self):
        if self._local:
            self.optimizer.lr = self.base_lr * float(self.lr_lambda(self.last_epoch))

    def get_last_lr(self):
        return [self.base_lr * float(self.lr_lambda(self.last_epoch))]
