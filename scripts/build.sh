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

  SPIN_DEBUG=1   build the debug kernel (build/obj-debug)
  SPIN_OBJ=dir   object directory (default build/obj, or build/obj-debug)
  SPIN_SRC=dir   source tree (default build/linux)
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
obj=${SPIN_OBJ:-$top/build/obj$([ "${SPIN_DEBUG:-0}" = 1 ] && echo -debug || true)}
cc=gcc
if command -v ccache >/dev/null; then
	cc="ccache gcc"
	# Hash paths relative to the checkout, so that every clone (CI's
	# included) shares one cache.
	export CCACHE_BASEDIR=$top CCACHE_NOHASHDIR=true
fi
[ $# -gt 0 ] || set -- bzImage
make -s -C "${SPIN_SRC:-$top/build/linux}" O="$obj" ARCH=x86_64 CC="$cc" -j"$(nproc)" "$@"
