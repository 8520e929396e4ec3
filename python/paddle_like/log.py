"""The log format every paddle_like process shares (C++: paddle_like/core/log.h):

    2026-11-24T06:40:00.123Z INFO trainer-3: registered as trainer 7 ...

a UTC timestamp with milliseconds, the level, the process's name and the text, one line
per event. INFO goes to stdout, WARNING and ERROR to stderr. Each line is written and
flushed in one call, so lines from threads do not interleave.
"""

import sys
import threading
import time

__all__ = ["format_line", "set_process_name", "process_name", "info", "warning", "error"]

_lock = threading.Lock()
_name = None


def set_process_name(name):
    """Names this process in every later line ("trainer-3"); default: the script's name."""
    global _name
    _name = str(name)


def process_name():
    if _name is not None:
        return _name
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    return argv0.rsplit("/", 1)[-1]


def format_line(when, level, process, text):
    """`when`: seconds since the epoch. Trailing newlines of `text` are dropped."""
    millis = int(round(when * 1000))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000)) + f".{millis % 1000:03d}Z"
    return f"{stamp} {level} {process}: {str(text).rstrip(chr(10))}\n"


def _write(level, text, stream):
    line = format_line(time.time(), level, process_name(), text)
    with _lock:
        stream.write(line)
        stream.flush()


def info(text):
    _write("INFO", text, sys.stdout)


def warning(text):
    _write("WARNING", text, sys.stderr)


def error(text):
    _write("ERROR", text, sys.stderr)
