#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the kernel's checkpatch.pl --strict on every patch of the series.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Runs build/linux/scripts/checkpatch.pl --strict on each patch named in
patches/series.  Any error, warning or check fails the run, except a
message type a patch is granted in patches/checkpatch-exceptions, one
line each: "<patch file> <TYPE> <one-line reason>".
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
exc=$top/patches/checkpatch-exceptions
# spdxcheck.py needs Debian's python3-ply and python3-git, not a pyenv.
export PATH=/usr/bin:/bin:$PATH

fail=0 n=0
for p in $(grep -v -e '^#' -e '^[[:space:]]*$' "$top/patches/series"); do
	n=$((n + 1))
	ignore=$(awk -v p="$p" '$1 == p { printf "%s%s", sep, $2; sep = "," }' \
		"$exc" 2>/dev/null || true)
	if ! out=$(cd "$tree" && ./scripts/checkpatch.pl --strict --quiet \
		--show-types ${ignore:+--ignore "$ignore"} "$top/patches/$p" 2>&1); then
		fail=1
	fi
	if [ -n "$out" ]; then
		echo "== $p"
		echo "$out"
		fail=1
	fi
done
[ $fail = 0 ] && echo "checkpatch: $n patches clean (--strict)"
exit $fail
