#!/bin/bash
# Installs the build tree (cmake --install, components dev and tools) into a scratch
# prefix, builds tests/install/outside against it with find_package(paddle_like) and
# runs it. Usage: check_install.sh BUILD_DIR SCRATCH_DIR. Prints the seconds each part
# took; exits non-zero with the failing step's output.
set -euo pipefail
build=$1
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch"
mkdir -p "$scratch"
t0=$(date +%s.%N)
cmake --install "$build" --prefix "$scratch/prefix" --component dev > "$scratch/install.log"
cmake --install "$build" --prefix "$scratch/prefix" --component tools >> "$scratch/install.log"
t1=$(date +%s.%N)
# Nothing of the repository may leak in: no include path but the installed one.
cmake -S "$here/outside" -B "$scratch/outside-build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DCMAKE_BUILD_TYPE=Release ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
      > "$scratch/configure.log"
cmake --build "$scratch/outside-build" -j2 > "$scratch/build.log"
t2=$(date +%s.%N)
"$scratch/outside-build/fit_a_line" "$scratch/line.safetensors"
"$scratch/prefix/bin/pl-trainer" --version
# Nothing of the repository may leak in: every include path is the installed tree's
# (or a system one), none the source or build tree's.
src=$(cd "$here/../.." && pwd)
for dir in $(grep '^CXX_INCLUDES' "$scratch/outside-build/CMakeFiles/fit_a_line.dir/flags.make" \
             | tr ' ' '\n' | sed -n 's/^-I//p; s/^\(\/.*\)$/\1/p'); do
  case "$dir" in
    "$scratch"/*) ;;
    "$src"|"$src"/*|"$build"|"$build"/*) echo "the outside build includes $dir from the source or build tree" >&2; exit 1 ;;
  esac
done
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "install %.1f s, outside configure+build %.1f s\n", b - a, c - b }'
