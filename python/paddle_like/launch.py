"""python -m paddle_like.launch: runs a Python trainer script as a local cluster job.

    python -m paddle_like.launch --pservers 2 --trainers 2 --data build/data/fashion-mnist/train.plrec \\
        examples/distributed.py --test build/data/fashion-mnist/test.plrec

does what ``pl-launch`` does (it execs it): starts a master, the pservers and the
trainers on 127.0.0.1, each trainer running ``<this python> script.py [args]`` with the
environment contract (PL_MASTER_ADDR, PL_TRAINER_RANK, PL_SYNC, ...), supervises them
and exits 0 when the job is done. Every pl-launch flag is accepted before the script
(see ``pl-launch --help``); everything from the script on is the script's. "--" may
separate the two.

The built-in trainer runs the same way, named instead of a script (it is in the wheel's
bin/, and runs on a GPU where one is usable, see paddle_like.cuda):

    python -m paddle_like.launch --pservers 2 --trainers 2 --data train.plrec \\
        pl-trainer --model cnn --device auto

pl-launch (with pl-master and pl-pserver beside it) is looked for in $PL_BIN_DIR, in
the package's bin/ (pip installs), in the build tree (<build>/bin when the package is
imported from <build>/python), then on PATH.
"""

import os
import shutil
import sys

__all__ = ["find_binary", "main"]

# pl-launch flags that take no separate value (pl::cli's dialect: a bool flag is --sync,
# --nosync or --sync=false, never "--sync false").
_BOOLEAN_FLAGS = {"--sync", "--nosync", "-sync", "-nosync", "--help", "-h", "--helpfull", "--version"}
_INFO_FLAGS = ("--help", "-h", "--helpfull", "--version")
# Programs of the package that may stand where a script would.
_TRAINER_PROGRAMS = ("pl-trainer",)


def _candidate_dirs():
    env = os.environ.get("PL_BIN_DIR")
    if env:
        yield env
    pkg = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(pkg, "bin")
    yield os.path.normpath(os.path.join(pkg, "..", "..", "bin"))


def find_binary(name):
    """Path of the executable `name` (e.g. "pl-launch"), or None."""
    for d in _candidate_dirs():
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def split_args(argv):
    """(launcher flags, script argv) from the arguments after the module name."""
    flags = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return flags, argv[i + 1:]
        if not a.startswith("-"):
            return flags, argv[i:]
        flags.append(a)
        if a not in _BOOLEAN_FLAGS and "=" not in a:
            if i + 1 >= len(argv):
                raise ValueError(f"{a} needs a value")
            flags.append(argv[i + 1])
            i += 1
        i += 1
    return flags, []


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        flags, script = split_args(argv)
    except ValueError as e:
        print(f"paddle_like.launch: {e}", file=sys.stderr)
        return 2
    info = [f for f in flags if f in _INFO_FLAGS]
    wants_help = bool(info)
    if not script and not wants_help:
        print("usage: python -m paddle_like.launch --pservers P --trainers T [pl-launch flags] "
              "script.py [args]", file=sys.stderr)
        return 2
    program = None
    if script and not os.path.isfile(script[0]):
        if script[0] not in _TRAINER_PROGRAMS:
            print(f"paddle_like.launch: no such script: {script[0]}", file=sys.stderr)
            return 2
        program = find_binary(script[0])
        if program is None:
            print(f"paddle_like.launch: cannot find {script[0]} (looked in $PL_BIN_DIR, the package's bin/, "
                  "the build tree and PATH)", file=sys.stderr)
            return 2
    launcher = find_binary("pl-launch")
    if launcher is None:
        print("paddle_like.launch: cannot find pl-launch (looked in $PL_BIN_DIR, the package's bin/, "
              "the build tree and PATH); build it with `make build` or set PL_BIN_DIR", file=sys.stderr)
        return 2
    if wants_help:
        os.execv(launcher, [launcher, info[0]])
    # The trainers must import this same package, wherever it was imported from.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if pkg_parent not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([pkg_parent] + paths)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")   # trainer lines reach the launcher as printed
    interpreter = sys.executable or "/usr/bin/python3"
    if program is not None:
        trainer = [program] + script[1:]
    else:
        trainer = [interpreter, os.path.abspath(script[0])] + script[1:]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(launcher, [launcher] + flags + ["--"] + trainer)


if __name__ == "__main__":
    sys.exit(main())
