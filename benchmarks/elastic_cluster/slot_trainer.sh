#!/bin/sh
# Runs one trainer in one "slot" of the elastic-cluster experiment: its own cpu cgroup
# (cgroup v1 cpu controller) capped at QUOTA_US of CPU per 100 ms, so a slot is the same
# share of the machine however many run. Without a writable cgroup the trainer runs
# uncapped (run.py says so at start).
#
#   slot_trainer.sh CGROUP_PARENT QUOTA_US TRAINER [ARGS...]
parent="$1"; quota="$2"; shift 2
cg="$parent/$$"
if mkdir -p "$cg" 2>/dev/null; then
  echo "$quota" > "$cg/cpu.cfs_quota_us" 2>/dev/null
  echo $$ > "$cg/cgroup.procs" 2>/dev/null
fi
exec "$@"
