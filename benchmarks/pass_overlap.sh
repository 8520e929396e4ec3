#!/bin/bash
# Idle trainers at pass ends (issue 39): a 4-trainer mlp job whose passes have 6 tasks,
# with pl-launch --overlap_passes=$1 (true or false); BUILD=build by default.
#   bash benchmarks/pass_overlap.sh false; bash benchmarks/pass_overlap.sh true
B=${BUILD:-build}/bin; D=${BUILD:-build}/data/fashion-mnist
W=$(mktemp -d); L=$W.log
start=$(date +%s.%N)
$B/pl-launch --pservers 1 --trainers 4 --data $D/train.plrec --passes 4 --chunks_per_task 10 --overlap_passes=$1 \
  --checkpoint_every_s 0 --workdir $W --insecure -- $B/pl-trainer --model mlp --threads 1 --log_every_s 0 > $L 2>&1
rc=$?
end=$(date +%s.%N)
echo "overlap=$1 rc=$rc wall $(echo "$end - $start" | bc) s"
grep -o "waited [0-9.]* s of [0-9.]* for work" $L | awk '{w+=$2; t+=$5} END {printf "  trainers waited %.1f s of %.1f trainer-seconds: idle fraction %.3f\n", w, t, w/t}'
grep -o "master: job done.*" $L | head -1
rm -rf "$W" "$L"
