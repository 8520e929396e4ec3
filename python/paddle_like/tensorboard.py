"""TensorBoard event files from user code, in the spirit of torch.utils.tensorboard:

    from paddle_like.tensorboard import SummaryWriter
    with SummaryWriter("runs/exp1") as w:
        for step in range(100):
            w.add_scalar("loss", loss, step)
        w.add_histogram("fc1.w", model.fc1.w.numpy(), step)

The files are written by the C++ writer the trainers use (paddle_like/metrics/
event_file_writer.h): TFRecord-framed Event protos that TensorBoard reads as its own.
Records are buffered and reach the file at least every `flush_secs`, on flush() and on
close(). A directory that cannot be written raises at construction, naming it
(PermissionError; RuntimeError for a path through a file).
"""

import os
import time

import numpy as np

from . import _C

__all__ = ["SummaryWriter"]


class SummaryWriter:
    """Writes one events.out.tfevents.* file under `log_dir` (created if needed;
    default runs/<date>_<host>). Thread-safe."""

    def __init__(self, log_dir=None, flush_secs=2.0):
        if log_dir is None:
            log_dir = os.path.join("runs", time.strftime("%b%d_%H-%M-%S") + "_" + os.uname().nodename)
        self.log_dir = os.fspath(log_dir)
        self._writer = _C.EventFileWriter(self.log_dir, float(flush_secs))
        self._step = 0

    @property
    def path(self):
        """The event file's path."""
        return self._writer.path

    def _next_step(self, global_step):
        if global_step is None:
            global_step, self._step = self._step, self._step + 1
        return int(global_step)

    def add_scalar(self, tag, scalar_value, global_step=None):
        """One value under `tag` ("loss", "train/accuracy"); a Tensor or NumPy scalar is
        read with float()."""
        self._writer.add_scalar(str(tag), float(np.asarray(scalar_value, dtype=np.float64)),
                                self._next_step(global_step))

    def add_scalars(self, tag_scalar_dict, global_step=None):
        """Several scalars of one step, written as one record."""
        values = {str(k): float(np.asarray(v, dtype=np.float64)) for k, v in tag_scalar_dict.items()}
        self._writer.add_scalars(self._next_step(global_step), values)

    def add_histogram(self, tag, values, global_step=None):
        """The distribution of `values` (any array-like; NaN/Inf are skipped) in
        TensorFlow's default buckets."""
        if hasattr(values, "numpy"):
            values = values.numpy()
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        self._writer.add_histogram(str(tag), arr, self._next_step(global_step))

    def flush(self):
        self._writer.flush()

    def close(self):
        """Flushes and closes; later add_* calls raise RuntimeError."""
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
