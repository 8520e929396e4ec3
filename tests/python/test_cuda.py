"""The CUDA libraries are found at run time, not linked (cuda/cuda_libraries.h,
paddle_like/_cuda_path.py): from NVIDIA's wheels on sys.path, from PL_CUDA_LIBRARY_PATH
before them, past files that cannot be used, and not at all on a machine without CUDA,
where every binary still starts and trains on the CPU.

Each case runs a fresh process: a process opens each library once. The wheel layouts
are folders of symbolic links to this machine's CUDA libraries, laid out as NVIDIA's
CUDA 13 wheels lay them out (nvidia/cu13/lib, nvidia/cudnn/lib, nvidia/nccl/lib). The
machine without CUDA is this one in a mount namespace with the toolkit's folder
hidden under an empty one (needs root).
"""

import json
import os
import subprocess
import sys

import pytest

import paddle_like as pl
from paddle_like.launch import find_binary

if not pl._C.cuda.built:
    pytest.skip("this build has no CUDA path (nvcc was not found when it was configured)", allow_module_level=True)

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(pl.__file__)))
_REPORT = "import json, paddle_like as pl; print(json.dumps({'libs': pl.cuda.libraries(), " \
          "'path': pl.cuda.library_search_path(), 'env': __import__('os').environ.get('PL_CUDA_LIBRARY_PATH')}))"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PL_CUDA_LIBRARY_PATH", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def _report(env, cmd_prefix=()):
    r = subprocess.run(list(cmd_prefix) + [sys.executable, "-c", _REPORT], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return {lib["name"]: lib for lib in out["libs"]}, out["path"], out["env"]


@pytest.fixture(scope="module")
def system_libraries():
    """Where this machine's own cuBLAS, cuDNN and NCCL are (the targets of the links)."""
    libs, _, _ = _report(_env(PYTHONPATH=_PACKAGE_PARENT))
    missing = [f"{n}: {lib['error']}" for n, lib in libs.items() if lib["error"] is not None]
    if missing:
        pytest.skip(f"this machine lacks CUDA libraries to lay out: {missing}")
    return {n: lib["path"] for n, lib in libs.items()}


def _link(folder, target, name=None):
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, name or os.path.basename(target))
    os.symlink(os.path.realpath(target), link)
    return link


def _wheel_site(root, system_libraries):
    """A site-packages folder holding NVIDIA's CUDA 13 wheel layout."""
    site = os.path.join(root, "site-packages")
    cublas = system_libraries["cuBLAS"]
    _link(os.path.join(site, "nvidia", "cu13", "lib"), cublas)
    lt = os.path.join(os.path.dirname(os.path.realpath(cublas)), "libcublasLt.so.13")
    if os.path.exists(lt):
        _link(os.path.join(site, "nvidia", "cu13", "lib"), lt)
    _link(os.path.join(site, "nvidia", "cudnn", "lib"), system_libraries["cuDNN"])
    _link(os.path.join(site, "nvidia", "nccl", "lib"), system_libraries["NCCL"])
    return site


def test_every_library_loads_with_its_version(system_libraries):
    libs, _, _ = _report(_env(PYTHONPATH=_PACKAGE_PARENT))
    for name, soname in (("cuBLAS", "libcublas.so.13"), ("cuDNN", "libcudnn.so.9"), ("NCCL", "libnccl.so.2")):
        lib = libs[name]
        assert lib["file"] == soname
        assert os.path.isfile(lib["path"]), lib
        assert lib["version"].split(".")[0] == soname.rsplit(".", 1)[1], lib
        assert lib["skipped"] == []


def test_nvidia_wheels_on_sys_path_are_found_first(tmp_path, system_libraries):
    site = _wheel_site(str(tmp_path), system_libraries)
    libs, path, env = _report(_env(PYTHONPATH=os.pathsep.join([_PACKAGE_PARENT, site])))
    for name, folder in (("cuBLAS", "cu13"), ("cuDNN", "cudnn"), ("NCCL", "nccl")):
        assert libs[name]["path"].startswith(os.path.join(site, "nvidia", folder, "lib") + os.sep), libs[name]
    # The folders are in the environment, for the processes this one starts.
    assert env.split(os.pathsep) == path
    assert os.path.join(site, "nvidia", "cudnn", "lib") in path


def test_the_users_folder_comes_before_the_wheels_and_unusable_files_are_skipped(tmp_path, system_libraries):
    site = _wheel_site(str(tmp_path), system_libraries)
    mine = str(tmp_path / "mine")
    _link(mine, system_libraries["cuDNN"])
    # Files that cannot be used, found first: NCCL's library under cuBLAS's name, and
    # text under NCCL's. Both are passed over, with why, for the next place.
    bad = str(tmp_path / "bad")
    _link(bad, system_libraries["NCCL"], "libcublas.so.13")
    os.makedirs(bad, exist_ok=True)
    with open(os.path.join(bad, "libnccl.so.2"), "w") as f:
        f.write("not a library\n")
    libs, path, _ = _report(_env(PYTHONPATH=os.pathsep.join([_PACKAGE_PARENT, site]),
                                 PL_CUDA_LIBRARY_PATH=os.pathsep.join([bad, mine])))
    assert path[:2] == [bad, mine]
    assert libs["cuDNN"]["path"] == os.path.join(mine, "libcudnn.so.9")
    assert libs["cuBLAS"]["path"].startswith(os.path.join(site, "nvidia", "cu13", "lib")), libs["cuBLAS"]
    assert libs["NCCL"]["path"].startswith(os.path.join(site, "nvidia", "nccl", "lib")), libs["NCCL"]
    assert len(libs["cuBLAS"]["skipped"]) == 1 and "it has no cublasCreate_v2" in libs["cuBLAS"]["skipped"][0]
    assert libs["cuBLAS"]["skipped"][0].startswith(os.path.join(bad, "libcublas.so.13"))
    assert len(libs["NCCL"]["skipped"]) == 1 and libs["NCCL"]["skipped"][0].startswith(
        os.path.join(bad, "libnccl.so.2")), libs["NCCL"]


def _without_cuda(tmp_path):
    """A command prefix that runs a command with the CUDA toolkit's folder hidden."""
    toolkit = os.path.realpath("/usr/local/cuda")
    if not os.path.isdir(toolkit):
        pytest.skip("no /usr/local/cuda to hide: this machine already has no CUDA toolkit")
    empty = tmp_path / "empty"
    empty.mkdir()
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here (needs root): {probe.stderr.strip()}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind "{empty}" "{toolkit}" && exec "$@"', "sh"]


def test_without_cuda_everything_starts_and_trains_on_the_cpu(tmp_path, fashion_dir):
    hide = _without_cuda(tmp_path)
    env = _env(PYTHONPATH=_PACKAGE_PARENT, OMP_NUM_THREADS="1")
    libs, _, _ = _report(env, hide)
    for name, lib in libs.items():
        assert lib["path"] is None and "cannot be used" in lib["error"], lib
        assert "pip install paddle_like[cuda]" in lib["error"]
    report = subprocess.run(hide + [sys.executable, "-m", "paddle_like.cuda"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 1 and "no GPU:" in report.stdout, report.stdout + report.stderr

    trainer = find_binary("pl-trainer")
    assert trainer is not None
    local = [trainer, "--model", "mlp", "--data", fashion_dir, "--epochs", "1", "--train_limit", "1024",
             "--test_limit", "500", "--threads", "1", "--log_every_s", "60"]
    gpu = subprocess.run(hide + local + ["--device", "gpu"], env=env, capture_output=True, text=True, timeout=120)
    assert gpu.returncode != 0
    assert "--device gpu" in gpu.stderr, gpu.stderr

    # A whole job, its trainer named where a script would be: every binary starts without
    # a CUDA library, and the trainers run on the CPU.
    job = subprocess.run(hide + [sys.executable, "-m", "paddle_like.launch", "--workdir", str(tmp_path / "job"),
                                 "--pservers", "1", "--trainers", "1", "--passes", "1",
                                 "--data", os.path.join(fashion_dir, "train.plrec"), "pl-trainer", "--model", "mlp",
                                 "--threads", "1", "--device", "auto", "--test_data",
                                 os.path.join(fashion_dir, "test.plrec"), "--test_limit", "1000"],
                         env=env, capture_output=True, text=True, timeout=400)
    out = job.stdout + job.stderr
    assert job.returncode == 0, out[-4000:]
    assert "--device auto: using the CPU" in out, out[-4000:]
    assert "libcublas.so.13" in out or "no usable CUDA device" in out, out[-4000:]
    accuracy = [line for line in out.splitlines() if "final test accuracy" in line]
    assert accuracy and float(accuracy[-1].rsplit(" ", 1)[1]) > 0.7, out[-4000:]
