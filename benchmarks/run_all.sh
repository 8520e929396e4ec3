#!/usr/bin/env bash
# Runs every benchmark from an existing build directory and writes one report.
# Builds nothing: configure and build first (make build, make data).
#
#   benchmarks/run_all.sh [BUILD_DIR] [--quick]
#
# BUILD_DIR defaults to ./build. The report goes to $BUILD_DIR/bench-report.txt (or
# $REPORT) and to stdout. The JAX peer comparison runs only when a venv with jax exists
# at $BUILD_DIR/venv (or $PEER_PYTHON names an interpreter that imports jax); see
# benchmarks/README.md for the one-time set-up.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="build"
quick=""
for arg in "$@"; do
  case "$arg" in
    --quick) quick="--quick" ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) build="$arg" ;;
  esac
done
build="$(cd "$build" 2>/dev/null && pwd)" || { echo "run_all.sh: no build directory '$build'" >&2; exit 2; }
bin="$build/bin"
data="$build/data/fashion-mnist"
report="${REPORT:-$build/bench-report.txt}"
tmp="$(mktemp -d /tmp/pl-bench-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

for b in pl-bench-core pl-bench-ps pl-bench-tls pl-bench-checkpoint pl-bench-dist pl-bench-telemetry pl-trainer pl-pserver pl-master pl-launch; do
  if [ ! -x "$bin/$b" ]; then
    echo "run_all.sh: $bin/$b is not built (cmake --build $build)" >&2
    exit 2
  fi
done
if [ ! -f "$data/train.plrec" ]; then
  echo "run_all.sh: no prepared data at $data (make data, or pl-convert; see benchmarks/README.md)" >&2
  exit 2
fi

section() { echo; echo "######## $*"; }
run() { echo "\$ $*"; "$@"; local rc=$?; [ $rc -eq 0 ] || echo "(exit status $rc)"; }

main() {
echo "paddle_like benchmarks $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "commit $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$here/.." diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GB"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build: $build${quick:+ (quick)}"

section "core: memory, GEMM, Conv2D"
run "$bin/pl-bench-core" --data "$data" --only memory,gemm,conv $quick

# Training throughput per thread count, each followed at once by the peer on the same
# thread count, so both see the same machine load.
section "training throughput, and the same networks in JAX on CPU (the peer)"
py="${PEER_PYTHON:-$build/venv/bin/python}"
have_peer=""
if [ -x "$py" ] && "$py" -c 'import jax' 2>/dev/null; then have_peer=1; fi
mlp_steps=400; cnn_steps=40
[ -n "$quick" ] && { mlp_steps=100; cnn_steps=10; }
for t in 1 2; do
  run "$bin/pl-bench-core" --data "$data" --only train --threads $t $quick | tee "$tmp/train-$t.txt"
  if [ -n "$have_peer" ]; then
    run "$py" "$here/peer_mlp.py" --threads $t --steps $mlp_steps --ours "$tmp/train-$t.txt"
    run "$py" "$here/peer_cnn.py" --threads $t --steps $cnn_steps --reps 2 --ours "$tmp/train-$t.txt"
  fi
done
[ -n "$have_peer" ] || echo "peer skipped: no interpreter with jax at $py (one-time set-up: see benchmarks/README.md)"

section "pserver: push/pull vs raw loopback, sparse rows, memory"
run "$bin/pl-bench-ps" $quick

section "checkpoints: incremental vs full after 1% of an embedding table changed"
run "$bin/pl-bench-checkpoint" ${quick:+--rows 200000}

section "mutual TLS: the mlp exchange and a first call with and without it, vs the cipher"
run "$bin/pl-bench-tls" ${quick:+--rounds 1}

section "distributed: end-to-end samples/s, recovery, joining"
run "$bin/pl-bench-dist" --data "$data" $quick

# Root only (network namespaces); the plot needs matplotlib (Debian: python3-matplotlib).
section "telemetry: a step with and without TensorBoard events and /metrics, event file size, a whole job"
run "$bin/pl-bench-telemetry" --data "$data" $quick

section "replicated shards: exchange R=2 vs R=1, failover time, catch-up, memory"
if [ -n "$quick" ]; then
  run /usr/bin/python3 "$here/bench_replication.py" --build "$build" --kills 3 --reps 1 --parts exchange,failover
else
  run /usr/bin/python3 "$here/bench_replication.py" --build "$build"
fi

section "scaling across hosts: trainers x pservers on the multi-host test bed, shaped links"
if [ -x "$bin/pl-bench-scaling" ]; then
  rm -f "$build/bench-scaling.csv"  # never plot an older run's points
  run "$bin/pl-bench-scaling" --data "$data" --csv "$build/bench-scaling.csv" $quick
  plot_py="${PLOT_PYTHON:-/usr/bin/python3}"
  if [ -f "$build/bench-scaling.csv" ] && "$plot_py" -c 'import matplotlib' 2>/dev/null; then
    run "$plot_py" "$here/plot_scaling.py" "$build/bench-scaling.csv" "$build/bench-scaling.png"
  else
    echo "plot skipped: no CSV, or no matplotlib for $plot_py"
  fi
else
  echo "skipped: $bin/pl-bench-scaling is not built (it needs tests/netbed and tests/dist configured)"
fi

section "replicated shards across hosts: the host of a primary lost (pl-launch --nnodes 3 on the bed)"
if [ -x "$bin/pl-bench-host-failover" ]; then
  run "$bin/pl-bench-host-failover" --data "$data" --reps "$([ -n "$quick" ] && echo 3 || echo 10)"
else
  echo "skipped: $bin/pl-bench-host-failover is not built (it needs tests/netbed and tests/dist configured)"
fi

# Built only with CUDA; without a GPU it says why and exits 0.
section "GPU: GEMM and convolution vs peak, cnn GPU vs CPU, the trainer's host round trip, NCCL"
if [ -x "$bin/pl-bench-gpu" ]; then
  run "$bin/pl-bench-gpu"
else
  echo "skipped: $bin/pl-bench-gpu is not built (no nvcc when the build was configured)"
fi

echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main 2>&1 | tee "$report"
echo "report written to $report"
