#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The reference docs say what is true of the current series: no history
# and no numbers that go stale.  Fail, naming file and line, on any of
# them in README.md and Documentation/spin/*.rst.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [FILE...]

Checks the reference docs (default: README.md and Documentation/spin/*.rst;
the results of past runs under Documentation/spin/bench/ are history
and are not checked) for what goes stale:

  - a date (YYYY-MM-DD), except as the name of a bench run's folder
    (bench/YYYY-MM-DD..., or a link's text \`YYYY-MM-DD...);
  - an issue number ("issue 17", "#17");
  - a patch number ("patch 0040", "0049-0055", "0027"): the series is
    renumbered as it is folded, so patches are named by subject;
  - a count of patches or test cases ("76 patches", "553 cases"): those
    live in patches/series and tests/case-counts.

Prints each hit as FILE:LINE: TEXT and exits 1 if there is any.
'make test' runs it first.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ $# -eq 0 ]; then
	set -- README.md Documentation/spin/*.rst
fi

rules=(
	'date|(?<!bench/)(?<!`)(?<![0-9-])20[0-9]{2}-[01][0-9]-[0-3][0-9](?![0-9])'
	'issue number|\b[Ii]ssues? #?[0-9]+\b|(^|[\s(])#[0-9]+\b'
	'patch number|\b[Pp]atch(es)? [0-9]{4}\b|\b0[0-9]{3}-0[0-9]{3}\b|\b00[0-9]{2}\b(?![:.])'
	'count|\b[0-9]+ (patches|cases|test cases|selftests)\b'
)
bad=0
for r in "${rules[@]}"; do
	what=${r%%|*} re=${r#*|}
	if hits=$(grep -HnP -- "$re" "$@"); then
		echo "$hits" | sed "s/^/doc-check: $what: /"
		bad=1
	fi
done
[ $bad = 0 ] || { echo "doc-check: the docs above quote history or stale numbers" >&2; exit 1; }
echo "doc-check: $# files clean"
