#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the spin kselftests with the kernel's own kselftest flow and
# install them (with run_kselftest.sh) into build/kselftest, together
# with the project's own test of tools/spin/spin-stat.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Runs, in build/linux (the series adds tools/testing/selftests/spin/
and its TARGETS entry),
  make -C tools/testing/selftests TARGETS=spin install
with O=build/kselftest-obj and INSTALL_PATH=build/kselftest (emptied
first).  Then it installs tests/spin_stat_test.sh, which tests this
project's tools/spin/spin-stat and so is not in the series, into
build/kselftest/spin/, and lists it in kselftest-list.txt just before
spin:lifecycle_test.sh, which must stay last (it unbinds and removes
the provider the other programs use).  The result is what the guest
runs with run_kselftest.sh.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
kst=$top/build/linux/tools/testing/selftests
out=$top/build/kselftest
list=$out/kselftest-list.txt
last=spin:lifecycle_test.sh

[ -f "$kst/spin/Makefile" ] || {
	echo "selftests: build/linux has no tools/testing/selftests/spin;" \
		"make tree applies patches/" >&2
	exit 1
}
rm -rf "$out"
make -s -C "$kst" TARGETS=spin O="$top/build/kselftest-obj" \
	INSTALL_PATH="$out" install >/dev/null

grep -qxF "$last" "$list" || { echo "selftests: no $last in $list" >&2; exit 1; }
install -m 0755 "$top/tests/spin_stat_test.sh" "$out/spin/spin_stat_test.sh"
awk -v last="$last" '$0 == last { print "spin:spin_stat_test.sh" } { print }' \
	"$list" >"$list.tmp"
mv "$list.tmp" "$list"
echo "selftests: installed into build/kselftest ($(grep -c . "$list") programs)"
