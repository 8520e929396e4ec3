"""Makes the CUDA libraries of NVIDIA's PyPI wheels visible to the C++ side.

The GPU path opens cuBLAS, cuDNN and NCCL at run time (cuda/cuda_libraries.h), looking
first in the folders of PL_CUDA_LIBRARY_PATH. NVIDIA's wheels (`pip install
paddle_like[cuda]`: nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13) put them in
site-packages/nvidia/*/lib, which no linker searches; at import the package appends the
ones it finds on sys.path to PL_CUDA_LIBRARY_PATH, after any folders the user set, so
this process and every process it starts (pl-launch, its trainers) find them.
"""

import os
import sys

# The CUDA 13 wheels put cuBLAS (and the runtime, nvrtc) in nvidia/cu13/lib; cuDNN and
# NCCL keep folders of their own. (CUDA 12's nvidia/cublas/lib holds libcublas.so.12,
# which this build never opens, so it is not added.)
WHEEL_LIBRARY_DIRS = ("nvidia/cu13/lib", "nvidia/cudnn/lib", "nvidia/nccl/lib")
ENV = "PL_CUDA_LIBRARY_PATH"


def nvidia_wheel_dirs(paths=None):
    """The library folders of NVIDIA's wheels under the entries of `paths` (sys.path)."""
    found = []
    for entry in sys.path if paths is None else paths:
        if not entry or not os.path.isdir(entry):
            continue
        for sub in WHEEL_LIBRARY_DIRS:
            d = os.path.join(os.path.abspath(entry), sub)
            if os.path.isdir(d) and d not in found:
                found.append(d)
    return found


def add_nvidia_wheel_dirs():
    """Appends the wheels' folders to PL_CUDA_LIBRARY_PATH; returns the value."""
    current = [d for d in os.environ.get(ENV, "").split(os.pathsep) if d]
    added = [d for d in nvidia_wheel_dirs() if d not in current]
    if added:
        os.environ[ENV] = os.pathsep.join(current + added)
    return os.environ.get(ENV, "")
