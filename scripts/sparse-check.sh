#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# sparse and W=1 on every C file the series touches, against the same
# files in the unpatched kernel: the series must add no new warning.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

For each C file that build/linux changes since spin-base and that is an
object of its own, runs sparse (make C=2) with W=1 on it in the patched
tree (build/obj) and in the unpatched one (build/linux-base,
build/obj-base: scripts/kernel-base.sh), takes the warnings with their
line and column numbers stripped, and prints those only the patched
tree has.  Exits 1 if there are any.  Installs sparse if it is missing
(scripts/deps.sh --sparse).  Files the series adds are compared against
nothing, so every warning in them counts.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh" --sparse
[ -f "$top/build/obj-base/.config" ] || "$top/scripts/kernel-base.sh"

# warnings SRC OBJ FILES...: sparse and W=1 warnings, one per line, as
# "file: message" with the line and column numbers taken out.
warnings() {
	local src=$1 obj=$2
	shift 2
	# C=2 checks the named objects even when they are up to date.
	SPIN_SRC=$src SPIN_OBJ=$obj "$top/scripts/build.sh" C=2 W=1 "$@" 2>&1 >/dev/null |
		grep -E ': (warning|error):' |
		sed -E 's|^([^:]+):[0-9]+:[0-9]+:|\1:|; s|^(.*/)?build/linux(-base)?/||; s|^(\.\./)?linux(-base)?/||' |
		sort -u || true
}

objs=() base_objs=()
for f in $(git -C "$top/build/linux" diff --name-only spin-base HEAD -- '*.c'); do
	[ -f "$top/build/obj/${f%.c}.o" ] || continue
	objs+=("${f%.c}.o")
	[ -f "$top/build/linux-base/$f" ] && base_objs+=("${f%.c}.o")
done
echo "sparse-check: ${#objs[@]} objects, ${#base_objs[@]} of them in the base"
new=$(comm -13 <(warnings "$top/build/linux-base" "$top/build/obj-base" "${base_objs[@]}") \
	<(warnings "$top/build/linux" "$top/build/obj" "${objs[@]}"))
if [ -n "$new" ]; then
	echo "sparse-check: new warnings:"
	echo "$new"
	exit 1
fi
echo "sparse-check: no new sparse or W=1 warnings"
