#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Regenerate patches/ from the commits spin-base..HEAD in build/linux.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Writes every commit of build/linux since the tag spin-base to patches/
with 'git format-patch', in a form that does not churn: zeroed commit
hashes, no version signature, no [PATCH n/m] numbering, fixed abbrev.
Rewrites patches/series (the order 'git am' applies them in) and
patches/BASE (the base the series was exported against).  A file in
patches/ that is not a .patch, series or BASE is left alone.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
out=$top/patches
git() { command git -C "$tree" "$@"; }

git rev-parse -q --verify refs/tags/spin-base >/dev/null ||
	{ echo "export: build/linux has no spin-base tag; run 'make tree'" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
	{ echo "export: build/linux has uncommitted changes; commit them first" >&2; exit 1; }

mkdir -p "$out"
rm -f "$out"/*.patch
git -c core.abbrev=12 -c diff.renames=true format-patch -q --zero-commit \
	--no-signature --no-numbered -o "$out" spin-base..HEAD >/dev/null
{
	echo "# The series, in the order 'git am' applies it (scripts/tree.sh)."
	(cd "$out" && ls -1 -- *.patch 2>/dev/null || true)
} >"$out/series"
{
	echo "# The base the series was last exported against (scripts/export.sh)."
	echo "package=linux-source-6.12 $(cat "$tree/.git/spin-base-version")"
	echo "kernel=$(make -s -C "$tree" kernelversion)"
} >"$out/BASE"
git rev-parse HEAD >"$tree/.git/spin-applied-head"
(cd "$out" && cat $(grep -v '^#' series) /dev/null) | sha1sum | cut -d' ' -f1 \
	>"$tree/.git/spin-applied-series"
echo "export: $(grep -vc '^#' "$out/series") patches written to patches/"
