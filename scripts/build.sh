#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build bzImage from build/linux into the object directory, with ccache
# when it is installed.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [MAKE-ARGS...]

Runs 'make bzImage' (or the given targets) for build/linux with
O=build/obj, -j\$(nproc) and CC="ccache gcc" when ccache exists.
Run scripts/config.sh first.

  SPIN_OBJ=dir   object directory (default build/obj)
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
obj=${SPIN_OBJ:-$top/build/obj}
cc=gcc
command -v ccache >/dev/null && cc="ccache gcc"
[ $# -gt 0 ] || set -- bzImage
make -s -C "$top/build/linux" O="$obj" ARCH=x86_64 CC="$cc" -j"$(nproc)" "$@"
