"""The main loop of the package's controllers (the elastic Kubernetes driver, the
PaddleLikeJob operator): tick every period until SIGTERM or SIGINT."""

import signal
import threading


def run_ticks(tick, period_s, once=False):
    """Calls tick() every period_s seconds until SIGTERM/SIGINT (which end the wait at
    once). once=True: a single tick. Returns the exit status: 1 when the last tick
    returned None (it could not observe or act), else 0 (always 0 when not once)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.is_set():
        result = tick()
        if once:
            return 0 if result is not None else 1
        stop.wait(period_s)
    return 0
