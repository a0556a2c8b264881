#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Make build/linux: Debian's linux-source-6.12, committed and tagged
# spin-base, with the series in patches/ applied on top by 'git am'.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Creates build/linux from /usr/src/linux-source-6.12.tar.xz as a git
tree whose first commit is the pristine base, tagged 'spin-base', and
applies patches/series on top with 'git am'.

Idempotent:
  - the tree already carries exactly patches/   -> nothing to do;
  - patches/ changed and the tree has no local  -> reset to spin-base
    work since the last apply                      and apply again;
  - the tree has commits not exported yet       -> refuse (make export).
Resetting also removes tools/testing/selftests/spin/ that trees made
before the selftests were patches of the series hold untracked (and
its line in .git/info/exclude), so that the patches can add it.

If a patch does not apply, the script names the base it tried, the base
the series was last exported against (patches/BASE) and the patch.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux
tarball=/usr/src/linux-source-6.12.tar.xz
series=$top/patches/series
git() { command git -C "$tree" -c user.name=spin -c user.email=spin@localhost "$@"; }

[ -f "$tarball" ] || { echo "tree: $tarball missing (scripts/deps.sh installs it)" >&2; exit 1; }
pkgver=$(dpkg-query -W -f='${Version}' linux-source-6.12)
recorded=$(sed -n 's/^package=//p' "$top/patches/BASE" 2>/dev/null || true)

patch_list() {
	[ -f "$series" ] || return 0
	grep -v -e '^#' -e '^[[:space:]]*$' "$series"
}

series_hash() {
	(cd "$top/patches" && cat $(patch_list) /dev/null) | sha1sum | cut -d' ' -f1
}

apply_series() {
	local p
	for p in $(patch_list); do
		if ! git am -q --keep-cr --committer-date-is-author-date \
			"$top/patches/$p" >/dev/null 2>&1; then
			git am --abort >/dev/null 2>&1 || true
			# Nothing here is local work: let the next run retry.
			git rev-parse HEAD >"$tree/.git/spin-applied-head"
			echo failed >"$tree/.git/spin-applied-series"
			echo "tree: patches/$p does not apply to linux-source-6.12 $pkgver" >&2
			echo "tree: the series was last exported against ${recorded:-<unknown>} (patches/BASE)" >&2
			echo "tree: rebase the series onto the new base, then 'make export'" >&2
			exit 1
		fi
	done
	git rev-parse HEAD >"$tree/.git/spin-applied-head"
	series_hash >"$tree/.git/spin-applied-series"
	echo "tree: build/linux = linux-source-6.12 $pkgver + $(patch_list | wc -l) patches"
}

extract() {
	echo "tree: extracting linux-source-6.12 $pkgver into build/linux"
	rm -rf "$tree" "$tree.tmp"
	mkdir -p "$tree.tmp"
	tar -xJf "$tarball" -C "$tree.tmp" --strip-components=1
	mv "$tree.tmp" "$tree"
	# Debian's packaging adds "/*" to the top-level .gitignore, which
	# would hide every new file from git; drop that block so that git
	# works as in an upstream tree.  Nothing else differs from the tarball.
	perl -0pi -e 's/\n#\n# Debian packaging.*\z//s' "$tree/.gitignore"
	git init -q
	git config core.autocrlf false
	git add -A
	GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z' \
		git commit -q -m "linux-source-6.12 $pkgver (Debian)" \
		-m "Debian's top-level .gitignore block that ignores everything is dropped."
	git tag spin-base
	echo "$pkgver" >"$tree/.git/spin-base-version"
}

if ! git rev-parse -q --verify refs/tags/spin-base >/dev/null 2>&1; then
	extract
	apply_series
	exit 0
fi

if [ "$(cat "$tree/.git/spin-applied-series" 2>/dev/null)" = "$(series_hash)" ] &&
   [ "$(cat "$tree/.git/spin-base-version" 2>/dev/null)" = "$pkgver" ]; then
	exit 0	# already up to date
fi

# patches/ or the base changed.  Only redo the tree when that loses nothing.
if [ "$(git rev-parse HEAD)" != "$(cat "$tree/.git/spin-applied-head" 2>/dev/null)" ] ||
   [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "tree: build/linux has work that is not in patches/ (commits or changes)" >&2
	echo "tree: run 'make export' to keep it, or reset build/linux yourself" >&2
	exit 1
fi
if [ "$(cat "$tree/.git/spin-base-version" 2>/dev/null)" != "$pkgver" ]; then
	extract
else
	git reset -q --hard spin-base
	# A tree made when the selftests were not yet patches of the series
	# holds an untracked copy of them, hidden by info/exclude: it would
	# stop 'git am' from adding the directory.  Nothing of spin-base is
	# there.
	sed -i '\#^tools/testing/selftests/spin/$#d' "$tree/.git/info/exclude"
	rm -rf "$tree/tools/testing/selftests/spin"
fi
apply_series
