#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the spin kselftests with the kernel's own kselftest flow and
# install them (with run_kselftest.sh) into build/kselftest.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Copies tools/testing/selftests/spin/ into build/linux (the kselftest
Makefiles expect to sit inside a kernel tree), then runs
  make -C tools/testing/selftests TARGETS=spin install
with INSTALL_PATH=build/kselftest.  The result is what the guest runs
with run_kselftest.sh.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
kst=$top/build/linux/tools/testing/selftests
out=$top/build/kselftest

rsync -a --delete "$top/tools/testing/selftests/spin/" "$kst/spin/"
rm -rf "$out"
make -s -C "$kst" TARGETS=spin O="$top/build/kselftest-obj" \
	INSTALL_PATH="$out" install >/dev/null
echo "selftests: installed into build/kselftest ($(grep -c . "$out/kselftest-list.txt") programs)"
