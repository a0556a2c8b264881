#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Write build/obj/.config: x86_64_defconfig + kvm_guest.config + our
# fragments, merged with the kernel's own merge_config.sh, and fail if
# any option a fragment asks for did not survive olddefconfig.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [FRAGMENT...]

Merges x86_64_defconfig, kernel/configs/kvm_guest.config and the given
fragments (default: configs/spin.config) into build/obj/.config with
scripts/kconfig/merge_config.sh, then checks that every CONFIG_ line of
every fragment is in the final config as written.  Unknown or
unsatisfiable options make it fail, naming them.

  SPIN_DEBUG=1   also merge configs/debug.config (KASAN, lockdep, ...),
                 into build/obj-debug
  SPIN_OBJ=dir   object directory (default build/obj, or build/obj-debug)
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/build/linux
debug=${SPIN_DEBUG:-0}
obj=${SPIN_OBJ:-$top/build/obj$([ "$debug" = 1 ] && echo -debug || true)}
frags=("$@")
if [ ${#frags[@]} -eq 0 ]; then
	frags=("$top/configs/spin.config")
	[ "$debug" = 1 ] && frags+=("$top/configs/debug.config")
fi
for i in "${!frags[@]}"; do frags[$i]=$(realpath "${frags[$i]}"); done

mkdir -p "$obj"
# merge_config.sh writes .config in the current directory when -O is given.
(cd "$src" && ARCH=x86_64 scripts/kconfig/merge_config.sh -m -O "$obj" \
	arch/x86/configs/x86_64_defconfig kernel/configs/kvm_guest.config \
	"${frags[@]}" >"$obj/merge_config.log")
make -s -C "$src" O="$obj" ARCH=x86_64 olddefconfig

bad=0
for f in "${frags[@]}"; do
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=n) want="# ${line%=n} is not set" ;;
		CONFIG_*=*) want=$line ;;
		"# CONFIG_"*" is not set") want=$line ;;
		*) continue ;;
		esac
		if ! grep -qxF -- "$want" "$obj/.config"; then
			name=${want#\# }; name=${name%%[= ]*}
			have=$(grep -E "^$name=|^# $name is not set" "$obj/.config" || echo "absent")
			echo "config: $(basename "$f"): asked for '$line', got '$have'" >&2
			bad=1
		fi
	done <"$f"
done
[ $bad = 0 ] || { echo "config: requested options did not survive olddefconfig" >&2; exit 1; }
echo "config: $obj/.config ok ($(basename -a "${frags[@]}" | tr '\n' ' '))"
