#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Write the series as an RFC posting: git format-patch with a cover
# letter, threaded, To:/Cc: from get_maintainer.pl.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help]

Writes build/linux's commits since spin-base (the series of patches/)
with
  git format-patch --cover-letter --thread --subject-prefix='RFC PATCH'
into build/rfc/ (emptied first).  Each patch gets To: and Cc: lines
from build/linux/scripts/get_maintainer.pl run on it (maintainers and
reviewers To:, lists and others Cc:, no git history); the cover letter
gets the union.  The cover letter's subject and text come from
Documentation/spin/rfc-cover.txt: its first line is the subject, the
rest the text, followed by the shortlog and diffstat format-patch
writes.  Nothing is sent: review build/rfc/ and send it with
git send-email.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; "") ;; *) usage >&2; exit 2 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
tree=$top/build/linux out=$top/build/rfc cover=$top/Documentation/spin/rfc-cover.txt
[ -f "$cover" ] || { echo "rfc: $cover missing" >&2; exit 1; }
git -C "$tree" rev-parse -q --verify refs/tags/spin-base >/dev/null ||
	{ echo "rfc: build/linux has no spin-base tag (make tree)" >&2; exit 1; }

rm -rf "$out"
git -C "$tree" format-patch -q --cover-letter --thread \
	--subject-prefix='RFC PATCH' -o "$out" spin-base..HEAD

addrs() {	# FILE ROLE-REGEX -> addresses whose role matches, one per line
	(cd "$tree" && ./scripts/get_maintainer.pl --no-git --no-git-fallback \
		--roles "$1" 2>/dev/null) |
		awk -v re="$2" '
		match($0, / \((maintainer|reviewer|supporter|odd fixer|open list|moderated list|subscriber list|list|commit_signer)[:)]/) {
			role = substr($0, RSTART + 2)
			if (role ~ "^" re)
				print substr($0, 1, RSTART - 1)
		}' | sort -u
}
to_all=$(mktemp) cc_all=$(mktemp)
trap 'rm -f "$to_all" "$cc_all"' EXIT
add_headers() {	# FILE TO-LIST CC-LIST
	local f=$1 to cc
	to=$(paste -sd, "$2" | sed 's/,/, /g')
	cc=$(paste -sd, "$3" | sed 's/,/, /g')
	awk -v to="$to" -v cc="$cc" '
		!done && /^Subject: / { print; insub = 1; next }
		!done && insub && /^[ \t]/ { print; next }
		!done && insub {
			if (to != "") print "To: " to
			if (cc != "") print "Cc: " cc
			done = 1
		}
		{ print }' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
}
for p in "$out"/0*.patch; do
	case $p in */0000-cover-letter.patch) continue ;; esac
	t=$(mktemp) c=$(mktemp)
	addrs "$p" '(maintainer|reviewer)' >"$t"
	addrs "$p" '' | grep -vxF -f "$t" >"$c" || true
	add_headers "$p" "$t" "$c"
	cat "$t" >>"$to_all"
	cat "$c" >>"$cc_all"
	rm -f "$t" "$c"
done
sort -u -o "$to_all" "$to_all"
sort -u "$cc_all" | grep -vxF -f "$to_all" >"$cc_all.u" || true
mv "$cc_all.u" "$cc_all"

c=$out/0000-cover-letter.patch
subject=$(head -n 1 "$cover")
tail -n +2 "$cover" >"$out/.blurb"
awk -v subj="$subject" -v blurb="$out/.blurb" '
	/\*\*\* SUBJECT HERE \*\*\*/ { sub(/\*\*\* SUBJECT HERE \*\*\*/, subj) }
	/^\*\*\* BLURB HERE \*\*\*$/ {
		while ((getline l < blurb) > 0) print l
		next
	}
	{ print }' "$c" >"$c.tmp" && mv "$c.tmp" "$c"
rm -f "$out/.blurb"
add_headers "$c" "$to_all" "$cc_all"
echo "rfc: $(ls "$out"/*.patch | wc -l) files in build/rfc/ ($(wc -l <"$to_all") To:, $(wc -l <"$cc_all") Cc: on the cover)"
