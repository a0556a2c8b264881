#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Reduce the per-run CSV of bench-spin to one line per point: the
# median of its runs, with the spread next to it.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] RUNS.CSV

RUNS.CSV holds bench-spin's lines, one per run
(sweep,pattern,residency,bs,rw,jobs,mode,MB/s,extra).  Prints one line
per point (the first seven fields), in the order the points first
appear:

  sweep,pattern,residency,bs,rw,jobs,mode,median,min,max,runs,extra

where extra is that of the run that gave the median (for an even
number of runs, the lower middle one).  The header line and
"regress," lines are passed through unchanged.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; esac
[ -r "$1" ] || { echo "bench-median: cannot read $1" >&2; exit 1; }

awk -F, '
/^sweep,/ { print "sweep,pattern,residency,bs,rw,jobs,mode,median,min,max,runs,extra"; next }
/^regress,/ { print; next }
NF >= 8 {
	k = $1 "," $2 "," $3 "," $4 "," $5 "," $6 "," $7
	if (!(k in n)) o[np++] = k
	i = ++n[k]; v[k, i] = $8 + 0; x[k, i] = $9
}
END {
	for (p = 0; p < np; p++) {
		k = o[p]; m = n[k]
		for (i = 1; i <= m; i++) { a[i] = v[k, i]; e[i] = x[k, i] }
		for (i = 2; i <= m; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
				t = e[j]; e[j] = e[j - 1]; e[j - 1] = t
			}
		mid = int((m + 1) / 2)
		printf "%s,%s,%s,%s,%d,%s\n", k, a[mid], a[1], a[m], m, e[mid]
	}
}' "$1"
