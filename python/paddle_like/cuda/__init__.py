"""GPUs and the CUDA libraries, as this process sees them; `python -m paddle_like.cuda`
prints a report.

    import paddle_like as pl
    pl.cuda.is_available()        # a device, a driver, cuBLAS and cuDNN
    pl.cuda.unavailable_reason()  # "" or why not, e.g. "no usable CUDA device: ..."
    pl.cuda.libraries()           # [{"name": "cuBLAS", "path": ".../libcublas.so.13", "error": None}, ...]

The package runs the same on machines with and without CUDA: the CUDA runtime is built
in, and cuBLAS, cuDNN and NCCL are opened only when a GPU is used, from NVIDIA's PyPI
wheels (`pip install paddle_like[cuda]`), PL_CUDA_LIBRARY_PATH, the system's library
path or /usr/local/cuda (docs/python.md). What runs on a GPU is the built-in trainer
(`pl-trainer --device gpu|auto`, in the wheel's bin/ and started by
`python -m paddle_like.launch ... pl-trainer ...`); models written in Python run their
layers on the CPU.
"""

from .. import _C
from .._cuda_path import ENV as LIBRARY_PATH_ENV

__all__ = ["is_available", "unavailable_reason", "device_count", "get_device_name", "libraries",
           "library_search_path", "main"]


def is_available():
    """True when this process can run a model on a GPU."""
    return bool(_C.cuda.is_available())


def unavailable_reason():
    """"" when a GPU can be used, else why not (no device, no driver, a library missing)."""
    return _C.cuda.unavailable_reason()


def device_count():
    """The number of devices visible (CUDA_VISIBLE_DEVICES honoured); 0 without a driver."""
    return int(_C.cuda.device_count())


def get_device_name(device=0):
    """e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"; ValueError for a device
    that does not exist."""
    return _C.cuda.describe_device(int(device))


def libraries():
    """cuBLAS, cuDNN and NCCL: for each a dict of name, file (the soname looked for),
    path (where it was loaded from, or None), version (the library's own, or None),
    skipped (files found first that could not be used, each with why) and error (None,
    or why it cannot be used). Opens them if no one has yet."""
    return [dict(d) for d in _C.cuda.libraries()]


def library_search_path():
    """The folders tried first (PL_CUDA_LIBRARY_PATH, with NVIDIA's wheels appended)."""
    return list(_C.cuda.search_path())


def main():
    if not _C.cuda.built:
        print(unavailable_reason())
        return 1
    print(f"{LIBRARY_PATH_ENV}: {':'.join(library_search_path()) or '(unset)'}")
    for lib in libraries():
        where = f"{lib['version']} {lib['path']}" if lib["error"] is None else f"not usable: {lib['error']}"
        print(f"{lib['name']:7} {lib['file']:16} {where}")
        for skipped in lib["skipped"]:
            print(f"        skipped {skipped}")
    if is_available():
        for i in range(device_count()):
            print(f"GPU {i}: {get_device_name(i)}")
        return 0
    print(f"no GPU: {unavailable_reason()}")
    return 1
