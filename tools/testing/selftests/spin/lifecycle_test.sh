#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# lifecycle_test unbinds and removes the provider the other tests use,
# so it must run last.  lib.mk runs TEST_GEN_PROGS before TEST_PROGS:
# the binary is built as TEST_GEN_PROGS_EXTENDED and run from here.
exec "$(dirname "$0")/lifecycle_test" "$@"
