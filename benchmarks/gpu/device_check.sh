#!/bin/bash
# The GPU-machine checks of issues 35 and 36 in one run, from a bundle made here by
#
#   benchmarks/portable_bundle.sh --out .bundle cuda_test pl-bench-gpu pl-trainer pl-pserver \
#       pl-master pl-launch pl-bench-dist pl-bench-ps pl-bench-scaling pl-bench-catchup-trainer \
#       pl-gen-clicks pl-bench-master
#
# and then, on the lent machine, from the repository root:
#
#   benchmarks/gpu/device_check.sh .bundle OUT_DIR
#
# The GPU tests; one Adam push applied on 1 thread and on all cores (pl-bench-ps --only
# apply); one mlp step's exchange per transport (--only exchange); one process against
# the job, cnn on the GPU and mlp on the CPU, 5 passes (pl-bench-dist --only job); ctr on
# the CPU and the GPU, one process and a job; the bfloat16 point across hosts at 10
# Gbit/s (pl-bench-scaling); issue 39's small tasks (8 ctr trainers, tasks of 250 against
# 1,000 records) and the master under load (pl-bench-master); a replica's catch-up
# (bench_replication.py --parts catchup).
# Every log goes to OUT_DIR; the figures go to stdout.
set -u
bundle=$(cd "${1:?bundle directory}" && pwd)
out=${2:?output directory}
mkdir -p "$out"
run="$bundle/run.sh"
data="$bundle/data/fashion-mnist"
step() { echo "== $(date +%T) $*"; }
echo "cores: $(nproc)"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step "GPU tests (cuda_test)"
timeout 240 "$run" cuda_test > "$out/cuda_test.log" 2>&1
grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test|FAILED  \]' "$out/cuda_test.log"
step "one Adam push applied (pl-bench-ps --only apply)"
timeout 90 "$run" pl-bench-ps --only apply > "$out/apply.log" 2>&1
grep -E 'Adam push|apply_threads|memcpy' "$out/apply.log"
step "one mlp step's exchange through each transport (pl-bench-ps --quick --only exchange)"
timeout 90 "$run" pl-bench-ps --quick --only exchange > "$out/exchange.log" 2>&1
grep -E 'Adam step|PushAndPull' "$out/exchange.log"
step "one process and the job (pl-bench-dist --only job --passes 5)"
timeout 480 "$run" pl-bench-dist --data "$data" --only job --passes 5 > "$out/job.log" 2>&1
grep -vE '^$|load average' "$out/job.log"
cp /tmp/pl-bench-dist-job-cnn-*.log "$out/" 2>/dev/null
step "ctr on the CPU and on the GPU: one process, and 1 trainer + 2 pservers (2 passes of 100k clicks)"
clicks=$(mktemp -d)
"$run" pl-gen-clicks --out "$clicks" --train 100000 --test 10000 --records_per_chunk 1000 > "$out/clicks.log" 2>&1
grep -E 'ideal test auc' "$out/clicks.log"
for dev in cpu gpu; do
  timeout 120 "$run" pl-trainer --model ctr --data "$clicks" --epochs 2 --device "$dev" > "$out/ctr-$dev.log" 2>&1
  echo "  one process --device $dev: $(grep -E 'trained .* steps' "$out/ctr-$dev.log" | sed 's/.*trained/trained/'); \
$(grep -E 'final test auc' "$out/ctr-$dev.log" | sed 's/.*final/final/')"
  grep -E 'error|rror:' "$out/ctr-$dev.log" | head -3
  timeout 180 "$run" pl-launch --pservers 2 --trainers 1 --data "$clicks/train.plrec" --passes 2 --progress_every_s 1000 \
    -- pl-trainer --model ctr --device "$dev" --test_data "$clicks/test.plrec" --log_every_s 1000 > "$out/ctr-job-$dev.log" 2>&1
  echo "  job (1 trainer + 2 pservers) --device $dev: exit $?; $(grep -E 'INFO trainer-0: (per step|final test auc|running)' \
    "$out/ctr-job-$dev.log" | sed 's/.*INFO trainer-0: //' | tr '\n' ';')"
done
rm -rf "$clicks"
for wire in "" "--pipeline --wire_dtype bfloat16"; do
  step "pl-bench-scaling 1x1 at 10 Gbit/s ${wire:-float32}"
  # shellcheck disable=SC2086
  timeout 150 "$run" pl-bench-scaling --trainers 1 --pservers 1 --rates_mbit 10000 --reps 1 --chunks_per_task 16 \
    --csv "$out/scaling.csv" $wire > "$out/scaling${wire:+-bf16}.log" 2>&1
  if ! grep -qE 'ceiling' "$out/scaling${wire:+-bf16}.log"; then
    tail -4 "$out/scaling${wire:+-bf16}.log"
  else
    grep -E 'ceiling|model|samples/s' "$out/scaling${wire:+-bf16}.log" | tail -6
  fi
done
step "small tasks (issue 39): ctr 26 fields x 1M ids, 400k clicks, 4 pservers, 8 trainers, tasks of 250 and 1000 records"
for records in 1000 250; do
  small=$(mktemp -d)
  "$run" pl-gen-clicks --out "$small" --fields 26 --vocab 1000000 --train 400000 --test 10000 \
    --records_per_chunk "$records" > "$out/small-$records-gen.log" 2>&1
  timeout 120 "$run" pl-launch --pservers 4 --trainers 8 --data "$small/train.plrec" --passes 1 --progress_every_s 1000 \
    -- pl-trainer --model ctr --ctr_fields 26 --threads 1 --test_data "$small/test.plrec" --test_limit 2000 \
    --log_every_s 1000 > "$out/small-$records.log" 2>&1
  echo "  tasks of $records records: exit $?; $(grep -oE 'job done in [0-9.]+ s' "$out/small-$records.log"); \
$(grep -E 'INFO trainer-0: per step' "$out/small-$records.log" | sed 's/.*INFO trainer-0: //')"
  rm -rf "$small"
done
step "the master under load (pl-bench-master, 1,000 and 10,000 simulated trainers)"
PL_BIN_DIR="$bundle/bin" timeout 120 "$run" pl-bench-master --trainers 1000 --tasks 100000 --seconds 4 --modes log,inproc > "$out/master.log" 2>&1
PL_BIN_DIR="$bundle/bin" timeout 120 "$run" pl-bench-master --trainers 10000 --tasks 1000000 --seconds 4 --modes log >> "$out/master.log" 2>&1
grep -E '^(log|inproc)' "$out/master.log" | cut -c1-170
step "a replica's catch-up (bench_replication.py --parts catchup)"
timeout 240 "$run" python3 "$(dirname "$0")/../bench_replication.py" --build "$bundle" --parts catchup \
  --catchup_reps 1 --catchup_lanes 4 > "$out/catchup.log" 2>&1
tail -12 "$out/catchup.log"
step done
