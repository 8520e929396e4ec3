"""A researcher's own model, dataset and loop as a distributed job:
python/examples/own_loop.py (a residual MLP defined in the script, a Dataset reading
Fashion-MNIST's IDX files with NumPy, clipping, a custom loss) under
`python -m paddle_like.launch` with 2 trainers, 2 pservers and a job cut into sample
indices (--data indices:N). Skips when the binaries or the IDX files are missing.
Every run is bounded by a timeout and killed (by process group) on failure."""

import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

import paddle_like as pl
from paddle_like.launch import find_binary

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EXAMPLES = os.path.join(_REPO, "python", "examples")
_IDX = "/usr/share/datasets/fashion-mnist"


@pytest.fixture(scope="module")
def launcher():
    path = find_binary("pl-launch")
    if path is None:
        pytest.skip("pl-launch is not built (set PL_BIN_DIR or build the trainer/launcher targets)")
    if not os.path.exists(os.path.join(_IDX, "train-images-idx3-ubyte.gz")):
        pytest.skip(f"no Fashion-MNIST IDX files in {_IDX} (Debian package dataset-fashion-mnist)")
    return path


def _run(args, tmp_path, timeout=180):
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(pl.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "paddle_like.launch", "--workdir", str(tmp_path / "job"),
                             "--progress_every_s", "1"] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=str(tmp_path), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    return proc.returncode, out


def test_a_model_defined_in_the_script_trains_under_pl_launch(launcher, tmp_path):
    # 4000 samples in chunks of 250, 2 passes: 32 tasks, every sample trained twice.
    rc, out = _run(["--pservers", "2", "--trainers", "2", "--data", "indices:4000:250", "--passes", "2",
                    os.path.join(_EXAMPLES, "own_loop.py"), "--train_limit", "4000", "--test_limit", "2000"],
                   tmp_path)
    assert rc == 0, out[-4000:]
    assert "master: job done: 2 passes, 32 chunks trained, 8000 samples" in out, out[-4000:]
    done = [int(n) for n in re.findall(r"result: job done after (\d+) tasks", out)]
    assert len(done) == 2 and sum(done) == 32, out[-4000:]
    accuracies = [float(a) for a in re.findall(r"final test accuracy: ([0-9.]+)", out)]
    # Both trainers pulled the same final parameters; 8000 samples of Fashion-MNIST give
    # about 0.75 (a linear model on the same budget: about 0.70).
    assert len(accuracies) == 2 and accuracies[0] == accuracies[1] and accuracies[0] > 0.65, out[-4000:]
    assert re.search(r"job done in .* failed 0", out), out[-4000:]


_INDICES = """
import paddle_like as pl
seen = []
with pl.distributed.init() as job:
    for task in job.tasks():
        ix = task.indices()
        assert ix.strides == (8,) and ix.tolist() == list(range(ix[0], ix[0] + len(ix))), (ix.strides, ix[:5])
        seen.extend(int(i) for b in task.batches(100) for i in b)
print("indices:", len(seen), len(set(seen)), min(seen), max(seen), flush=True)
"""


def test_every_sample_index_is_leased_once_per_pass(launcher, tmp_path):
    script = tmp_path / "indices.py"
    script.write_text(_INDICES)
    rc, out = _run(["--pservers", "1", "--trainers", "1", "--data", "indices:1000:256", str(script)], tmp_path)
    assert rc == 0, out[-4000:]
    assert "indices: 1000 1000 0 999" in out, out[-4000:]


_SPARSE = """
import numpy as np
import paddle_like as pl
from paddle_like import nn

# Clicks from a known model: id i of field f has weight w[f, i]; P(click) = sigmoid(sum).
rng = np.random.default_rng(7)
w = rng.normal(scale=2.0, size=(3, 50))
ids = np.stack([rng.integers(0, 50, 3000) + 50 * f for f in range(3)], axis=1).astype(np.int64)
p = 1 / (1 + np.exp(-w[np.arange(3), ids - 50 * np.arange(3)].sum(axis=1)))
clicks = (rng.random(3000) < p).astype(np.float32)

class Clicks(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(0, 4)           # rows live on the pservers
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(self.emb(x).sum(dim=1)).reshape(-1)

job = pl.distributed.init()
model = pl.distributed.ParameterServerModel(Clicks(), optimizer="adagrad", lr=0.3)
with job:
    for task in job.tasks():
        for x, y in task.batches(50, dataset=(ids[:2500], clicks[:2500])):
            nn.BCEWithLogitsLoss()(model(x), y).backward()
            model.step()
if job.result["job_done"]:
    test = ids[2500:]
    model.pull(test)                            # the rows the test set touches
    logits = model.module(pl.tensor(test)).numpy()
    best = float(((p[2500:] > 0.5) == clicks[2500:]).mean())
    print(f"click accuracy {float(((logits > 0) == clicks[2500:]).mean()):.3f} (the true model: {best:.3f})",
          flush=True)
"""


def test_a_model_with_an_embedding_table_trains_its_rows_on_the_pservers(launcher, tmp_path):
    script = tmp_path / "clicks.py"
    script.write_text(_SPARSE)
    rc, out = _run(["--pservers", "2", "--trainers", "2", "--data", "indices:2500:250", "--passes", "3",
                    str(script)], tmp_path)
    assert rc == 0, out[-4000:]
    found = re.findall(r"click accuracy ([0-9.]+) \(the true model: ([0-9.]+)\)", out)
    assert len(found) == 2, out[-4000:]
    for got, best in found:
        assert float(got) > float(best) - 0.08, out[-4000:]   # within reach of the generating model


_BROKEN = """
import paddle_like as pl
with pl.distributed.init() as job:
    for task in job.tasks():
        for idx in task.batches(10):
            raise RuntimeError(f"boom in task {task.id}")
"""


def test_an_error_in_the_loop_fails_the_task_at_the_master_and_the_trainer(launcher, tmp_path):
    script = tmp_path / "broken.py"
    script.write_text(_BROKEN)
    rc, out = _run(["--pservers", "1", "--trainers", "1", "--data", "indices:100:50", str(script)], tmp_path)
    assert rc != 0, out[-4000:]
    # The master hears why (a failure of the task, not a give-back), and the script's own
    # traceback ends the trainer with status 1.
    assert re.search(r"\[master\] .*trainer \d+ failed task (\d+): RuntimeError: boom in task \1", out), out[-4000:]
    assert re.search(r"INFO launch: trainer-0 exited \(status 1\)", out), out[-4000:]


_PREEMPTED = """
import os, signal, sys, time
sys.path.insert(0, {examples!r})
import own_loop

rank = os.environ["PL_TRAINER_RANK"]
MARK = {mark!r}

def on_step(step):
    if rank == "0" and step == 5:                    # mid-way through its second task
        open(MARK, "w").close()
        os.kill(os.getpid(), signal.{signal})         # as a preempting cluster would
    if rank != "0" and step == 1:                    # keep the job going until then
        deadline = time.monotonic() + 60
        while not os.path.exists(MARK):
            if time.monotonic() > deadline:
                sys.exit("trainer-0 did not reach step 5 within 60 s")
            time.sleep(0.05)

sys.exit(own_loop.main(sys.argv[1:], on_step=on_step))
"""


def _run_signalled(signal_name, tmp_path):
    """The own-loop job with trainer-0 sending itself `signal_name` at its step 5."""
    script = tmp_path / "signalled.py"
    script.write_text(_PREEMPTED.format(examples=_EXAMPLES, mark=str(tmp_path / "stopping"), signal=signal_name))
    # Tasks of 256 samples (4 steps of 64): step 5 is the first of trainer-0's second task.
    return _run(["--pservers", "2", "--trainers", "2", "--data", "indices:2048:256",
                 str(script), "--train_limit", "2048", "--test_limit", "500"], tmp_path)


def test_a_preempted_trainer_gives_its_task_back_and_no_sample_is_lost(launcher, tmp_path):
    rc, out = _run_signalled("SIGTERM", tmp_path)
    assert rc == 0, out[-4000:]
    assert re.search(r"\[trainer-0\] .*stop requested: returned task \d+ to the master "
                     r"\(64 of its samples were pushed\)", out), out[-4000:]
    assert "[trainer-0] result: stopped after 1 tasks, 5 steps" in out, out[-4000:]
    assert re.search(r"INFO launch: trainer-0 exited \(status 0\)", out), out[-4000:]
    assert "[trainer-1] result: job done" in out, out[-4000:]
    # Every chunk trained (the returned one by trainer-1), none failed, and the 64 samples
    # trained twice are counted as such.
    assert "master: job done: 1 passes, 8 chunks trained, 2048 samples" in out, out[-4000:]
    assert re.search(r"job done in .* failed 0 .*tasks returned 1 \(64 samples trained twice\)", out), out[-4000:]


def test_a_trainer_asked_to_leave_finishes_its_task_and_nothing_is_trained_twice(launcher, tmp_path):
    # SIGUSR1 (pl-launch's first word when it shrinks a job) at the first step of
    # trainer-0's second task: that task runs to its end and is reported; no task goes
    # back, so no sample is trained twice.
    rc, out = _run_signalled("SIGUSR1", tmp_path)
    assert rc == 0, out[-4000:]
    assert "[trainer-0] " in out and "leaving as asked, after 2 task(s)" in out, out[-4000:]
    assert "[trainer-0] result: stopped after 2 tasks, 8 steps" in out, out[-4000:]
    assert re.search(r"INFO launch: trainer-0 exited \(status 0\)", out), out[-4000:]
    assert "returned task" not in out, out[-4000:]
    assert "master: job done: 1 passes, 8 chunks trained, 2048 samples" in out, out[-4000:]
    assert re.search(r"job done in .* failed 0 ", out), out[-4000:]
    assert "samples trained twice" not in out, out[-4000:]


class _Indexed:
    """A map-style dataset without array indexing: batches() collates its items."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        if not isinstance(i, int):
            raise TypeError("one index at a time")
        return np.full(3, i, np.float32), i


class _FakeTask:
    def __init__(self, ids):
        self.id, self.pass_, self.num_records = 7, 0, len(ids)
        self._ids = np.asarray(ids, np.int64)

    def indices(self):
        return self._ids


def test_batches_gather_collate_and_check_the_dataset_size():
    from paddle_like.distributed.job import LeasedTask
    task = LeasedTask(None, _FakeTask(range(4, 10)))
    order = np.concatenate(list(task.batches(4)))
    assert sorted(order.tolist()) == list(range(4, 10))  # each index once
    assert order.tolist() == np.concatenate(list(task.batches(4))).tolist()  # one order per (seed, task, pass)
    assert [b.tolist() for b in task.batches(4, shuffle=False)] == [[4, 5, 6, 7], [8, 9]]
    assert [len(b) for b in task.batches(4, shuffle=False, drop_last=True)] == [4]
    x, y = next(task.batches(2, shuffle=False, dataset=_Indexed()))
    assert x.shape == (2, 3) and x[1, 0] == 5 and y.tolist() == [4, 5]
    arrays = (np.arange(10) * 10, np.arange(10))
    a, b = next(task.batches(3, shuffle=False, dataset=arrays))
    assert a.tolist() == [40, 50, 60] and b.tolist() == [4, 5, 6]
    with pytest.raises(ValueError, match="indices up to 9, but the dataset has 5 samples"):
        next(task.batches(2, dataset=np.zeros(5)))
    with pytest.raises(ValueError, match="batch_size"):
        next(task.batches(0))


def test_a_job_needs_a_master():
    env_master = os.environ.pop("PL_MASTER_ADDR", None)
    try:
        with pytest.raises(RuntimeError, match="no master address"):
            pl.distributed.init()
        with pytest.raises(RuntimeError, match="call paddle_like.distributed.init"):
            pl.distributed.current()
    finally:
        if env_master is not None:
            os.environ["PL_MASTER_ADDR"] = env_master
