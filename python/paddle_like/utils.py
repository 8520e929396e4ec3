"""Progress display for long runs: tqdm when it is installed and the output is a
terminal; otherwise a plain bar redrawn with "\\r" on a terminal, or one line every
few seconds when the output is a file or a pipe (logs, pl-launch, ctest)."""

import sys
import time

__all__ = ["ProgressBar"]


class ProgressBar:
    """bar = ProgressBar(total, desc="epoch 1"); bar.update(1, loss=0.5); bar.close()"""

    def __init__(self, total=None, desc="", disable=False, stream=None, log_every_s=5.0, unit="it"):
        self.total, self.desc, self.disable, self.unit = total, desc, disable, unit
        self.stream = stream or sys.stderr
        self.n = 0
        self.postfix = {}
        self.start = self.last = time.monotonic()
        self.log_every_s = log_every_s
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._tqdm = None
        if not disable and self.tty:
            try:
                from tqdm import tqdm
                self._tqdm = tqdm(total=total, desc=desc, file=self.stream, unit=unit, leave=True)
            except ImportError:
                pass

    def update(self, n=1, **postfix):
        if self.disable:
            return
        self.n += n
        self.postfix.update(postfix)
        if self._tqdm is not None:
            if postfix:
                self._tqdm.set_postfix({k: _fmt(v) for k, v in postfix.items()}, refresh=False)
            self._tqdm.update(n)
            return
        now = time.monotonic()
        if self.tty and now - self.last >= 0.1:
            self.last = now
            self.stream.write("\r" + self._line(now))
            self.stream.flush()
        elif not self.tty and now - self.last >= self.log_every_s:
            self.last = now
            self.stream.write(self._line(now) + "\n")
            self.stream.flush()

    def _line(self, now):
        elapsed = max(now - self.start, 1e-9)
        rate = self.n / elapsed
        post = "  ".join(f"{k} {_fmt(v)}" for k, v in self.postfix.items())
        if self.total:
            frac = min(self.n / self.total, 1.0)
            width = 24
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            eta = (self.total - self.n) / rate if rate > 0 else 0
            return (f"{self.desc} [{bar}] {self.n}/{self.total} {rate:.1f} {self.unit}/s "
                    f"eta {eta:.0f}s  {post}").rstrip()
        return f"{self.desc} {self.n} {self.unit} {rate:.1f} {self.unit}/s  {post}".rstrip()

    def close(self):
        if self.disable:
            return
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
            return
        line = self._line(time.monotonic())
        self.stream.write(("\r" + line + "\n") if self.tty else (line + "\n"))
        self.stream.flush()
        self.disable = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _fmt(v):
    return f"{v:.4f}" if isinstance(v, float) else str(v)
