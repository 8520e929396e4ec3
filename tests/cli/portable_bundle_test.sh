#!/bin/bash
# benchmarks/portable_bundle.sh: the bundle's binaries load the bundle's libraries (not
# the system's), run with nothing else set, and train; bad input changes nothing.
# Usage: portable_bundle_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="$1"; build="$2"
pack="$src/benchmarks/portable_bundle.sh"
if [ ! -f "$build/data/fashion-mnist/test.plrec" ]; then
  echo "SKIP: no prepared data in $build/data (make data)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out="$work/bundle"
"$pack" --build "$build" --out "$out" pl-trainer pl-pserver pl-master pl-launch > "$work/pack.log" 2>&1 ||
  fail "packing: $(cat "$work/pack.log")"
for f in run.sh bin/pl-trainer lib/libgrpc.so.29 data/fashion-mnist/test.plrec data/fashion-mnist/train.plrec; do
  [ -e "$out/$f" ] || fail "the bundle lacks $f"
done
# The loader takes gRPC and abseil from the bundle, ahead of the system's copies.
clean=(env -i PATH=/usr/bin:/bin HOME="$work")
"${clean[@]}" "$out/run.sh" ldd "$out/bin/pl-trainer" > "$work/ldd.txt" || fail "ldd through run.sh"
for lib in libgrpc.so libprotobuf.so libabsl_strings.so; do
  grep "$lib" "$work/ldd.txt" | grep -q "=> $out/lib/" || fail "$lib not from the bundle: $(grep "$lib" "$work/ldd.txt")"
done
"${clean[@]}" "$out/run.sh" pl-trainer --version | grep -q "^pl-trainer " || fail "pl-trainer --version"
# A small job through the bundle's launcher, on its own data, with no other environment.
"${clean[@]}" "$out/run.sh" pl-launch --workdir "$work/job" --insecure --pservers 1 --trainers 1 --passes 1 \
  --data "$out/data/fashion-mnist/train.plrec" -- "$out/bin/pl-trainer" --model mlp --threads 1 --device cpu \
  > "$work/job.log" 2>&1 || fail "the job: $(tail -5 "$work/job.log")"
grep -q "job done after" "$work/job.log" || fail "no trainer finished: $(tail -5 "$work/job.log")"

# Bad input: one line naming it, a non-zero exit, and the bundle that was there kept.
"$pack" --build "$build" --out "$out" no-such-binary > "$work/bad.log" 2>&1 && fail "a missing binary was packed"
grep -q "no-such-binary is not built" "$work/bad.log" || fail "missing binary: $(cat "$work/bad.log")"
[ -x "$out/bin/pl-trainer" ] || fail "a refused pack removed the bundle that was there"
"$pack" --bogus > "$work/bad.log" 2>&1; [ $? = 2 ] || fail "an unknown flag is not a usage error"
mkdir "$work/not-a-bundle" && touch "$work/not-a-bundle/keep"
"$pack" --build "$build" --out "$work/not-a-bundle" pl-trainer > "$work/bad.log" 2>&1 && fail "packed over a folder"
[ -e "$work/not-a-bundle/keep" ] || fail "a folder that is not a bundle was emptied"
echo "PASS"
