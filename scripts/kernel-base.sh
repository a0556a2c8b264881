#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the unpatched kernel the benchmark's regression rows compare
# against: the same Debian base and the same config, without patches/.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Checks out build/linux's spin-base tag (the Debian source with none of
patches/) as a git worktree in build/linux-base, gives it the patched
kernel's build/obj/.config (olddefconfig drops the options only the
series adds) and builds bzImage into build/obj-base with
scripts/build.sh.  A later run only rebuilds what changed.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/build/linux-base obj=$top/build/obj-base
[ -f "$top/build/obj/.config" ] ||
	{ echo "kernel-base: build/obj/.config missing (make config)" >&2; exit 1; }
if [ ! -d "$src" ]; then
	git -C "$top/build/linux" worktree prune
	git -C "$top/build/linux" worktree add -q --detach "$src" spin-base
fi
mkdir -p "$obj"
cp "$top/build/obj/.config" "$obj/.config"
make -s -C "$src" O="$obj" ARCH=x86_64 olddefconfig
SPIN_SRC=$src SPIN_OBJ=$obj "$top/scripts/build.sh"
echo "kernel-base: $obj/arch/x86/boot/bzImage ($(git -C "$src" describe --always))"
