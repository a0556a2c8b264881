#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the kernel at every patch of the series, so that each one
# builds on its own (git bisect never lands on a broken tree).
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Checks out each commit of build/linux from spin-base+1 to HEAD in turn
and builds bzImage, then the objects of the C files the commit touches
with W=1 (their warnings are printed for review), in the normal object
directory; kbuild only rebuilds what changed, so this
costs a few minutes after a full build.  Stops at the first commit that
fails, naming it, and always returns build/linux to where it was.
Refuses to run on a tree with uncommitted changes.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
obj=$top/build/obj
git() { command git -C "$tree" "$@"; }

[ -z "$(git status --porcelain --untracked-files=no)" ] ||
	{ echo "bisect-check: build/linux has uncommitted changes" >&2; exit 1; }
head=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
trap 'git checkout -q "$head"' EXIT

for c in $(git rev-list --reverse spin-base..HEAD); do
	subject=$(git log -1 --format=%s "$c")
	git checkout -q "$c"
	# W=1 on the touched files that are objects of their own (not
	# sources #included by another, like drivers/md/raid1-10.c).
	objs=
	for f in $(git diff --name-only "$c^" "$c" -- '*.c'); do
		[ -f "$obj/${f%.c}.o" ] && objs+=" ${f%.c}.o"
	done
	if ! "$top/scripts/build.sh" bzImage ||
	   { [ -n "$objs" ] && ! "$top/scripts/build.sh" W=1 $objs >/dev/null; }; then
		echo "bisect-check: FAILS at $(git rev-parse --short "$c") $subject" >&2
		exit 1
	fi
	echo "bisect-check: ok   $subject"
done
