#!/bin/bash
# Packs built binaries, the shared libraries they need (gRPC, protobuf, abseil, OpenSSL,
# RocksDB, ...) and the prepared test data into one folder that runs on another x86-64
# Linux machine with none of our dependencies installed: a lent GPU machine, a cluster
# node. CUDA's own libraries (cuBLAS, cuDNN, NCCL) are not packed, being large and tied
# to the driver: the binaries open them at run time (the runtime is linked in), and the
# bundle's run.sh puts the target machine's folders of them on LD_LIBRARY_PATH.
#
#   benchmarks/portable_bundle.sh [--build DIR] [--out DIR] [--full_data] [BINARY...]
#
# BINARY: names in DIR/bin or DIR/tests (default: the GPU checks, a job's processes and
# the side-by-side benchmark: cuda_test pl-bench-gpu pl-trainer pl-pserver pl-master
# pl-launch pl-bench-dist). The Fashion-MNIST test set goes in as
# data/fashion-mnist/{train,test}.plrec (the same 10k records under both names, to keep
# the folder small); --full_data packs the 60k training set.
# `ip` and `tc` go along for the multi-host test bed. Then, on the target machine:
#
#   OUT/run.sh              the GPU tests, pl-bench-gpu, and one process against the job
#                           (pl-bench-dist --only job: cnn on the GPU, mlp on the CPU)
#   OUT/run.sh CMD ARGS...  any command with the bundle's libraries (bin/ on the PATH)
set -euo pipefail

build=build
out=.bundle
full_data=0
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --full_data) full_data=1; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "portable_bundle.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
[ ${#names[@]} -gt 0 ] || names=(cuda_test pl-bench-gpu pl-trainer pl-pserver pl-master pl-launch pl-bench-dist)
data="$build/data/fashion-mnist"
[ -f "$data/test.plrec" ] || { echo "portable_bundle.sh: no prepared data in $data (run make build first)" >&2; exit 1; }

files=()  # every binary found before anything is touched
for n in "${names[@]}"; do
  f=""
  for d in "$build/bin" "$build/tests"; do [ -x "$d/$n" ] && f="$d/$n" && break; done
  [ -n "$f" ] || { echo "portable_bundle.sh: $n is not built in $build/bin or $build/tests" >&2; exit 1; }
  files+=("$f")
done
if [ -e "$out" ] && [ ! -f "$out/run.sh" ]; then
  echo "portable_bundle.sh: $out exists and is not a bundle; remove it or pick another --out" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/data/fashion-mnist"
for f in "${files[@]}"; do cp "$f" "$out/bin/"; done
for t in ip tc; do
  f=$(command -v "$t" || true)
  [ -n "$f" ] && cp "$f" "$out/bin/"
done
strip --strip-unneeded "$out"/bin/* 2>/dev/null || true

# Every library the binaries load, but the C library's own (the target has its own, and
# mixing them breaks the loader) and CUDA's (found on the target: see run.sh).
for f in "$out"/bin/*; do
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so|/usr/local/cuda|/libcuda\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done

cp "$data/test.plrec" "$data/test.plrec.index" "$out/data/fashion-mnist/"
if [ "$full_data" = 1 ]; then
  cp "$data/train.plrec" "$data/train.plrec.index" "$out/data/fashion-mnist/"
else
  ln -s test.plrec "$out/data/fashion-mnist/train.plrec"
  ln -s test.plrec.index "$out/data/fashion-mnist/train.plrec.index"
fi

cat > "$out/run.sh" <<'EOS'
#!/bin/bash
# Runs a command (default: the GPU checks) with this bundle's libraries; see
# benchmarks/portable_bundle.sh in the paddle_like repository.
here="$(cd "$(dirname "$0")" && pwd)"
libdirs="$here/lib"
for so in libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
  f=$(find /usr/local /opt /usr/lib -name "$so" 2>/dev/null | head -1)
  if [ -n "$f" ]; then libdirs="$libdirs:$(dirname "$f")"; else echo "run.sh: $so not found (its GPU parts will skip)" >&2; fi
done
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PATH="$here/bin:$PATH"
[ $# -gt 0 ] && exec "$@"
d="$here/data/fashion-mnist"
log=$(mktemp)
rc=0
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ -x "$here/bin/cuda_test" ]; then
  timeout 300 "$here/bin/cuda_test" > "$log" 2>&1 || { rc=1; tail -20 "$log"; }
  grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test|FAILED  \]' "$log"
fi
[ -x "$here/bin/pl-bench-gpu" ] && { timeout 300 "$here/bin/pl-bench-gpu" || rc=1; }
if [ -x "$here/bin/pl-bench-dist" ]; then
  # One process and the job side by side: the cnn on the GPU (when nvidia-smi finds one),
  # the mlp on the CPU; PL_PASSES passes of the bundle's training set (default 5).
  timeout 900 "$here/bin/pl-bench-dist" --data "$d" --only job --passes "${PL_PASSES:-5}" || rc=1
elif nvidia-smi -L >/dev/null 2>&1 && [ -x "$here/bin/pl-launch" ]; then
  work=$(mktemp -d)
  timeout 300 "$here/bin/pl-launch" --workdir "$work" --data "$d/train.plrec" --pservers 1 --trainers 1 --passes 2 -- \
    "$here/bin/pl-trainer" --model cnn --device gpu --test_data "$d/test.plrec" > "$log" 2>&1 || { rc=1; tail -5 "$log"; }
  grep -E 'job done after|per step|final test accuracy' "$log"
  rm -rf "$work"
fi
rm -f "$log"
exit $rc
EOS
chmod +x "$out/run.sh"
echo "portable_bundle.sh: $out ($(du -sh "$out" | cut -f1)): ${names[*]}; run $out/run.sh there"
