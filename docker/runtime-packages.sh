#!/bin/sh
# Prints, one per line, the Debian packages that own the shared libraries the given
# executables load (ldd), so the runtime image installs exactly those. Libraries no
# package owns (a CUDA toolkit installed by hand) are reported on stderr; the runtime
# stage then fails its ldd check unless its base image provides them.
#   docker/runtime-packages.sh build/bin/* > runtime-packages.txt
set -eu
[ "$#" -gt 0 ] || { echo "usage: $0 EXECUTABLE..." >&2; exit 2; }
for exe in "$@"; do
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  # Debian 12 merged /lib into /usr/lib; dpkg records whichever path the package used.
  real=$(readlink -f "$lib")
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null \
          || dpkg -S "${real#/usr}" 2>/dev/null || true)
  if [ -z "$owner" ]; then
    echo "runtime-packages.sh: no Debian package owns $lib" >&2
    continue
  fi
  # "pkg:arch, other:arch: /path" -> pkg other
  printf '%s\n' "$owner" | head -n 1 | sed 's/: \/.*//; s/, /\n/g'
done | sed 's/:.*//' | sort -u
