#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Tables, target ratios and plots from the CSV files 'make bench' wrote.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [DIR]

Reads DIR/spin-RIG.csv for the rigs throttled, fast, plain, two, raid0
and raid0fast (the
medians scripts/bench-median.sh makes of each run's CSV) and, if
present, DIR/regress-base.csv and DIR/cliff-{spin,base}.csv (DIR
defaults to build/bench, where scripts/bench.sh writes them) and
writes:
  - DIR/report.rst: the tables (reStructuredText, for
    Documentation/spin/bench.rst), each cell the median of its runs
    with the min-max next to it, and the targets, each a ratio of two
    medians of the same point in the same boot.  A ratio one of whose
    medians spread by more than 25% (max - min over the median) is
    marked with '*': it is reported, not trusted;
  - DIR/*.png (gnuplot): throughput against residency for each mode,
    medians with min-max error bars, with the overlap bound
    T(r) = max(r*S/B_copy, (1-r)*S/B_p2p), where B_p2p is the mean
    O_DIRECT rate at queue depth 1 and B_copy the page-cache path at
    100% residency of the same run; throughput against request size;
    and P-readahead's speed-up over O_DIRECT.
Every rig is judged at matched queue depths: SPIN at depth N against
O_DIRECT and the page-cache path at depth N (a synchronous pread is
depth 1).  Comparisons across depths (SPIN at 1 against O_DIRECT at 8)
are shown, never judged.  Prints the report.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build/bench}
rigs=()
for r in throttled fast plain two raid0 raid0fast; do
	[ -s "$dir/spin-$r.csv" ] && rigs+=("$r")
done
[ ${#rigs[@]} -gt 0 ] || { echo "bench-report: no $dir/spin-*.csv" >&2; exit 1; }
report=$dir/report.rst
MODES="p2p p2p_qd8 bounce pagecache spin spin_default"

# Common awk: load a medians CSV (sweep,pattern,residency,bs,rw,jobs,
# mode,median,min,max,runs,extra) into med[], lo[], hi[] keyed by
# "sweep,pattern,residency,bs,rw,jobs" SUBSEP mode.
lib='
function bytes(s) { return s ~ /k$/ ? s * 1024 : s ~ /M$/ ? s * 1048576 : s }
function has(p, m) { return (p SUBSEP m) in med }
function spread(p, m) { return has(p, m) && med[p, m] > 0 ? (hi[p, m] - lo[p, m]) / med[p, m] : 0 }
function cell(p, m) { return has(p, m) ? sprintf("%d (%d-%d)", med[p, m], lo[p, m], hi[p, m]) : "-" }
function bestm(p,   m, b, i, n, a) {
	n = split("p2p p2p_qd8 bounce pagecache", a, " "); b = ""
	for (i = 1; i <= n; i++)
		if (has(p, a[i]) && (b == "" || med[p, a[i]] > med[p, b])) b = a[i]
	return b
}
function depth(m) { return m ~ /_qd[0-9]+$/ ? substr(m, index(m, "_qd") + 3) + 0 : 1 }
# The baseline of kind k ("p2p" or "pagecache") at the depth of mode m.
function base(m, k) { return depth(m) == 1 ? k : k "_qd" depth(m) }
function ratio(p, m1, m2,   r) {
	if (!has(p, m1) || !has(p, m2) || med[p, m2] <= 0) return "-"
	r = sprintf("%.2f", med[p, m1] / med[p, m2])
	if (spread(p, m1) > 0.25 || spread(p, m2) > 0.25) r = r "*"
	return r
}
FNR == 1 { next }
$1 != "regress" {
	p = $1 "," $2 "," $3 "," $4 "," $5 "," $6
	if (!(p in seen)) { seen[p] = 1; pts[np++] = p }
	med[p, $7] = $8; lo[p, $7] = $9; hi[p, $7] = $10; ex[p, $7] = $12
}
'

residency_dat() {	# csv pattern -> res, med min max per mode, bound
	awk -F, -v pat="$2" -v modes="$MODES" "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] != "residency") continue
			if (has(pts[i], "p2p")) { bp += med[pts[i], "p2p"]; nb++ }
			if (f[2] == "contig" && f[3] == 100 && has(pts[i], "pagecache")) bc = med[pts[i], "pagecache"]
		}
		if (!nb) exit
		bp /= nb
		nm = split(modes, m, " ")
		for (r = 0; r <= 100; r += 10) {
			p = ""
			for (i = 0; i < np; i++) {
				split(pts[i], f, ",")
				if (f[1] == "residency" && f[3] == r && (f[2] == pat || r == 0 || r == 100)) p = pts[i]
			}
			if (p == "" || !has(p, "spin")) continue
			line = r
			for (j = 1; j <= nm; j++)
				line = line (has(p, m[j]) ? sprintf(" %d %d %d", med[p, m[j]], lo[p, m[j]], hi[p, m[j]]) : " NaN NaN NaN")
			x = r / 100
			t = x / bc > (1 - x) / bp ? x / bc : (1 - x) / bp
			print line, sprintf("%.0f", 1 / t)
		}
	}' "$1"
}

size_dat() {	# csv residency -> bytes bs, med min max per mode
	awk -F, -v res="$2" -v modes="$MODES" "$lib"'
	END {
		nm = split(modes, m, " ")
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] != "size" || f[3] != res) continue
			line = bytes(f[4]) " " f[4]
			for (j = 1; j <= nm; j++)
				line = line (has(pts[i], m[j]) ? sprintf(" %d %d %d", med[pts[i], m[j]], lo[pts[i], m[j]], hi[pts[i], m[j]]) : " NaN NaN NaN")
			print line
		}
	}' "$1"
}

rst_table() {	# title, header words, then rows on stdin, fields split by '|'
	local title=$1
	shift
	awk -F'|' -v title="$title" -v hdr="$*" '
	{ rows[n++] = $0 }
	END {
		if (!n) exit	# a sweep this rig did not run
		nh = split(hdr, h, " ")
		for (i = 1; i <= nh; i++) w[i] = length(h[i])
		for (r = 0; r < n; r++) {
			nf = split(rows[r], f, "|")
			for (i = 1; i <= nf; i++) if (length(f[i]) > w[i]) w[i] = length(f[i])
		}
		rule = ""
		for (i = 1; i <= nh; i++) {
			s = ""
			for (j = 0; j < w[i]; j++) s = s "="
			rule = rule (i > 1 ? "  " : "") s
		}
		print title; print ""
		print rule
		line = ""
		for (i = 1; i <= nh; i++) line = line (i > 1 ? "  " : "") sprintf("%-" w[i] "s", h[i])
		print line; print rule
		for (r = 0; r < n; r++) {
			nf = split(rows[r], f, "|"); line = ""
			for (i = 1; i <= nh; i++) line = line (i > 1 ? "  " : "") sprintf("%-" w[i] "s", f[i])
			print line
		}
		print rule; print ""
	}'
}

for rig in "${rigs[@]}"; do
	csv=$dir/spin-$rig.csv
	for pat in contig scatter; do
		residency_dat "$csv" $pat >"$dir/residency-$rig-$pat.dat"
	done
	for res in 0 50; do
		size_dat "$csv" $res >"$dir/size-$rig-$res.dat"
	done
done

{
for rig in "${rigs[@]}"; do
	csv=$dir/spin-$rig.csv
	echo "$rig rig"
	echo "$rig rig" | sed 's/./-/g'
	echo
	[ -s "$dir/calib-$rig.txt" ] && {
		echo "Calibration (spin-calibrate)::"
		echo
		sed 's/^/  /' "$dir/calib-$rig.txt"
		echo
	}
	[ -s "$dir/learned-$rig.txt" ] && {
		echo "Learned at the end (queue/p2p_learned_cost_ns)::"
		echo
		sed 's/^/  /' "$dir/learned-$rig.txt"
		echo
	}
	for pat in contig scatter; do
		awk '
		function sp(j) { return $j > 0 ? ($(j + 2) - $(j + 1)) / $j : 0 }
		{
			b = 2; for (j = 5; j <= 11; j += 3) if ($j != "NaN" && $j > $b) b = j
			c = ""
			for (j = 2; j <= 17; j += 3)
				c = c "|" ($j == "NaN" ? "-" : sprintf("%d (%d-%d)", $j, $(j + 1), $(j + 2)))
			mk = (sp(14) > 0.25 || sp(b) > 0.25) ? "*" : ""
			ms = (sp(14) > 0.25) ? "*" : ""
			printf "%s%%%s|%s|%.2f%s|%.2f%s\n", $1, c, $20, $14 / $b, mk,
				$14 / $20, ms }' \
			"$dir/residency-$rig-$pat.dat" |
			rst_table "Residency, $pat, 1 MiB sequential reads, MB/s, median (min-max):" \
				resident p2p p2p_qd8 bounce pagecache spin spin_default bound spin/best spin/bound
	done
	for res in 0 50; do
		[ -s "$dir/size-$rig-$res.dat" ] || continue
		awk '
		function sp(j) { return $j > 0 ? ($(j + 2) - $(j + 1)) / $j : 0 }
		{
			b = 3; for (j = 6; j <= 12; j += 3) if ($j != "NaN" && $j > $b) b = j
			c = ""
			for (j = 3; j <= 15; j += 3)
				c = c "|" ($j == "NaN" ? "-" : sprintf("%d (%d-%d)", $j, $(j + 1), $(j + 2)))
			mb = (sp(15) > 0.25 || sp(b) > 0.25) ? "*" : ""
			mp = (sp(15) > 0.25 || sp(3) > 0.25) ? "*" : ""
			printf "%s%s|%.2f%s|%.2f%s\n", $2, c, $15 / $b, mb, $15 / $3, mp }' \
			"$dir/size-$rig-$res.dat" |
			rst_table "Request size, sequential, $res% resident (scattered), MB/s, median (min-max):" \
				bs p2p p2p_qd8 bounce pagecache spin spin/best spin/p2p
	done
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] !~ /^(random|jobs|app)$/) continue
			p = pts[i]; b = bestm(p)
			printf "%s|%s|%s%%|%s|%s|%s|%s|%s|%s|%s\n", f[1], f[4], f[3], f[6],
				cell(p, "p2p"), cell(p, "p2p_qd8"), cell(p, "bounce"),
				cell(p, "pagecache"), cell(p, "spin"), ratio(p, "spin", b)
		}
	}' "$csv" | rst_table "Random reads, 4 jobs, and the log scanner, MB/s, median (min-max):" \
		sweep bs resident jobs p2p p2p_qd8 bounce pagecache spin spin/best
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] !~ /^drive[01]$/) continue
			p = pts[i]; b = bestm(p)
			printf "%s|%s%%|%s|%s|%s|%s|%s|%s\n", f[1], f[3],
				cell(p, "p2p"), cell(p, "pagecache"), cell(p, "spin"),
				cell(p, "spin_cal"), ratio(p, "spin", b),
				ratio(p, "spin", "spin_cal")
		}
	}' "$csv" | rst_table "Two drives apart, scattered, 1 MiB sequential reads, MB/s, median (min-max):" \
		drive resident p2p pagecache spin spin_cal spin/best spin/spin_cal
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] !~ /^raid0/) continue
			p = pts[i]; s = f[1] == "raid0" ? "spin" : "spin_qd8"
			printf "%s|%s|%s%%|%d|%s|%s|%s|%s|%s|%s\n", f[1], f[2], f[3],
				depth(s), cell(p, base(s, "p2p")),
				cell(p, base(s, "pagecache")), cell(p, s),
				cell(p, "spin_cal"), ratio(p, s, base(s, "p2p")),
				ratio(p, s, base(s, "pagecache"))
		}
	}' "$csv" | rst_table "md raid0 over three drives, XFS, 1 MiB sequential reads, MB/s, median (min-max), each mode at the depth shown:" \
		sweep pattern resident depth O_DIRECT pagecache spin spin_cal spin/O_DIRECT spin/pagecache
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (!has(pts[i], "spin_cal") || f[1] ~ /^drive[01]$/) continue
			p = pts[i]
			printf "%s|%s|%s%%|%s|%s|%s|%s|%s\n", f[1], f[2], f[3], f[4],
				f[6], cell(p, "spin"), cell(p, "spin_cal"),
				ratio(p, "spin", "spin_cal")
		}
	}' "$csv" | rst_table "The learned model (spin) against the calibrated one (spin_cal), MB/s, median (min-max):" \
		sweep pattern resident bs jobs spin spin_cal spin/spin_cal
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] != "qd") continue
			p = pts[i]
			for (q = 1; q <= 32; q *= (q == 1 ? 8 : 4))
				printf "%s|%s%%|%d|%s|%s|%s|%s|%s\n", f[2], f[3], q,
					cell(p, "p2p_qd" q), cell(p, "pagecache_qd" q),
					cell(p, "spin_qd" q), ratio(p, "spin_qd" q, "p2p_qd" q),
					ratio(p, "spin_qd" q, "pagecache_qd" q)
		}
	}' "$csv" | rst_table "1 MiB sequential reads through io_uring, MB/s, median (min-max):" \
		pattern resident qd p2p pagecache spin spin/p2p spin/pagecache
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] != "fixed") continue
			p = pts[i]
			for (q = 1; q <= 32; q *= (q == 1 ? 8 : 4))
				printf "%s|%s%%|%d|%s|%s|%s\n", f[2], f[3], q,
					cell(p, "spin_qd" q), cell(p, "fixed_qd" q),
					ratio(p, "fixed_qd" q, "spin_qd" q)
		}
	}' "$csv" | rst_table "READ_FIXED from a registered device buffer against READ, router on, MB/s, median (min-max):" \
		pattern resident qd READ READ_FIXED fixed/read
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] != "kbvec") continue
			p = pts[i]
			printf "%s|%s%%|%s|%s|%s\n", f[2], f[3],
				cell(p, "kbvec_off"), cell(p, "kbvec"),
				ratio(p, "kbvec", "kbvec_off")
		}
	}' "$csv" | rst_table "A GPU driver's in-kernel bio_vec read (spin-kread), router off and on, MB/s, median (min-max):" \
		pattern resident off on on/off
	awk -F, "$lib"'
	END {
		for (i = 0; i < np; i++) {
			split(pts[i], f, ",")
			if (f[1] !~ /^(residency|size|random|jobs)$/) continue
			for (k = 1; k <= 2; k++) {
				m = k == 1 ? "spin" : "spin_default"
				if (!has(pts[i], m)) continue
				delete x
				n = split(ex[pts[i], m], e, " ")
				for (j = 1; j <= n; j++) { split(e[j], kv, "="); x[kv[1]] = kv[2] }
				printf "%s|%s|%s%%|%s%%|%s|%s|%s|%s|%s|%s|%s\n", f[1], f[2], f[3],
					x["resident"], f[4], f[6], m, x["dma_MiB"], x["copy_MiB"],
					x["ra_hit_MiB"], x["rep"]
			}
		}
	}' "$csv" | rst_table "Where SPIN's bytes came from (router counters of the median run, MiB):" \
		sweep pattern asked resident bs jobs mode dma copy ra_hit run
	# Regression rows: medians of five rounds, with the rounds' spread.
	grep -qh '^regress,' "$csv" || continue
	base=/dev/null
	[ -s "$dir/regress-base.csv" ] && base=$dir/regress-base.csv
	grep -h '^regress,' "$csv" "$base" |
		awk -F, '{ k = $2 "," $3; n[k]++; v[k, n[k]] = $5; t[$2] = 1 }
		function sortk(k,   i, j, x) {
			split("", a)
			for (i = 1; i <= n[k]; i++) a[i] = v[k, i]
			for (i = 2; i <= n[k]; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
		}
		function med(k) { if (!(k in n)) return 0; sortk(k); return a[int((n[k] + 1) / 2)] }
		function cellr(k,   m) {
			if (!(k in n)) return "-"
			m = med(k); return sprintf("%g (%g-%g)", m, a[1], a[n[k]])
		}
		function sp(k,   m) { if (!(k in n)) return 0; m = med(k); return (a[n[k]] - a[1]) / m }
		END {
			for (x in t) {
				on = med(x ",spin_on"); off = med(x ",spin_off"); base = med(x ",base")
				s = sp(x ",spin_on"); if (sp(x ",spin_off") > s) s = sp(x ",spin_off")
				if (sp(x ",base") > s) s = sp(x ",base")
				printf "%s|%s|%s|%s|%.3f|%s|%.0f%%\n", x, cellr(x ",spin_on"),
					cellr(x ",spin_off"), cellr(x ",base"), on / off,
					base ? sprintf("%.3f", on / base) : "-", 100 * s
			}
		}' | sort | rst_table "Ordinary buffered reads into RAM (MB/s) and holder churn (dm_linear_200, md8_asm_stop: per second), 5 rounds, median (min-max):" \
			test spin_on spin_off unpatched on/off on/unpatched widest_spread
done
} | sed 's/ *$//' >"$report"

# The targets, per rig: the worst ratio over the points each concerns.
{
echo "Targets"
echo "-------"
echo
echo "Each figure is the worst ratio of medians over the points the target"
echo "concerns, with the point; '*' marks a ratio one of whose medians spread"
echo "by more than 25%, and 'n marked' counts such points among those judged."
echo
for rig in "${rigs[@]}"; do
	csv=$dir/spin-$rig.csv
	awk -F, -v rig=$rig "$lib"'
	function judge(name, goal, val, where, nmark,   v) {
		v = val == 1e9 ? "-" : sprintf("%.2f %s", val, (val >= goal + 0) ? "met" : "MISSED")
		printf "%s|%s|>= %s|%s|%s|%d marked\n", rig, name, goal, v, where, nmark
	}
	function shown(name, val, where, nmark,   v) {
		v = val == 1e9 ? "-" : sprintf("%.2f shown", val)
		printf "%s|%s (not judged)|-|%s|%s|%d marked\n", rig, name, v, where, nmark
	}
	END {
		m1 = m2 = m3 = m4 = m5 = m6 = m7 = m8 = m9 = 1e9
		k1 = k2 = k3 = k4 = k5 = k6 = k7 = k8 = k9 = 0
		nsm = split("spin spin_qd1 spin_qd8 spin_qd32 fixed_qd1 fixed_qd8 fixed_qd32", sm, " ")
		for (i = 0; i < np; i++) {
			p = pts[i]; split(p, f, ",")
			# Matched depths: every SPIN mode against O_DIRECT and the
			# page cache at its own depth, where the point has them.
			for (j = 1; j <= nsm; j++) {
				s = sm[j]
				if (!has(p, s)) continue
				b = base(s, "p2p")
				if (has(p, b)) {
					q = med[p, s] / med[p, b]; mq = ratio(p, s, b) ~ /\*/
					k8 += mq; if (q < m8) { m8 = q; w8 = p " " s " vs " b (mq ? " *" : "") }
				}
				b = base(s, "pagecache")
				if (has(p, b)) {
					q = med[p, s] / med[p, b]; mq = ratio(p, s, b) ~ /\*/
					k9 += mq; if (q < m9) { m9 = q; w9 = p " " s " vs " b (mq ? " *" : "") }
				}
			}
			if (has(p, "spin") && has(p, "spin_cal")) {
				q = med[p, "spin"] / med[p, "spin_cal"]; mq = ratio(p, "spin", "spin_cal") ~ /\*/
				k7 += mq; if (q < m7) { m7 = q; w7 = p (mq ? " *" : "") }
			}
			if (f[1] !~ /^(residency|size|random|jobs|drive0|drive1)$/ || !has(p, "spin")) continue
			b = bestm(p); r = med[p, "spin"] / med[p, b]; mk = ratio(p, "spin", b) ~ /\*/
			k1 += mk; if (r < m1) { m1 = r; w1 = p " vs " b (mk ? " *" : "") }
			if (f[1] == "residency" && f[2] == "contig" && f[3] == 100) {
				m2 = med[p, "spin"] / med[p, "pagecache"]; w2 = p
				k2 = ratio(p, "spin", "pagecache") ~ /\*/
			}
			if (rig == "throttled" && f[1] == "residency" && f[2] == "scatter" && f[3] >= 30 && f[3] <= 70) {
				# The best baseline at depth 1: O_DIRECT, bounce, page cache.
				b = ""
				for (j = split("p2p bounce pagecache", a1, " "); j > 0; j--)
					if (has(p, a1[j]) && (b == "" || med[p, a1[j]] > med[p, b])) b = a1[j]
				q = med[p, "spin"] / med[p, b]; mq = ratio(p, "spin", b) ~ /\*/
				k3 += mq; if (q < m3) { m3 = q; w3 = p " vs " b (mq ? " *" : "") }
			}
			if (f[1] == "size" && f[3] == 0 && has(p, "p2p")) {
				q = med[p, "spin"] / med[p, "p2p"]; mq = ratio(p, "spin", "p2p") ~ /\*/
				k6 += mq; if (q < m6) { m6 = q; w6 = p (mq ? " *" : "") }
				if (bytes(f[4]) <= 65536) {
					k5 += mq; if (q < m5) { m5 = q; w5 = p (mq ? " *" : "") }
				}
			}
		}
		judge("SPIN vs O_DIRECT at the same depth, every point", "0.97", m8, w8, k8)
		judge("SPIN vs the page cache at the same depth, every point", "0.97", m9, w9, k9)
		shown("SPIN vs best baseline of any depth", m1, w1, k1)
		judge("fully cached routed read vs router off", "0.97", m2, w2, k2)
		if (rig == "throttled")
			judge("30-70% scattered band vs best baseline at depth 1", "1.2", m3, w3, k3)
		judge("P-readahead vs P2P-only, sequential <= 64 KiB", "5", m5, w5, k5)
		judge("P-readahead vs P2P-only, any size", "0.97", m6, w6, k6)
		judge("learned model vs calibrated model, every point", "0.97", m7, w7, k7)
	}' "$csv"
	cat "$dir/residency-$rig-contig.dat" "$dir/residency-$rig-scatter.dat" |
		grep . >/dev/null || continue
	cat "$dir/residency-$rig-contig.dat" "$dir/residency-$rig-scatter.dat" |
		awk -v rig=$rig '{ r = $14 / $20; if (!n++ || r < m) { m = r; w = $1 } }
		END { printf "%s|fraction of the overlap bound T(r)|>= 0.9|%.2f %s|residency %s%%|-\n", rig, m, (m >= 0.9 ? "met" : "MISSED"), w }'
done | rst_table "Targets against results:" rig target goal worst at spread
} | sed 's/ *$//' >>"$report"

# The size rows (bench-cliff): cached reads into device memory and RAM
# by request size, on the patched kernel (router on, off) and the
# unpatched one; then the 8 MiB rate over the 1 MiB rate.
if [ -s "$dir/cliff-spin.csv" ]; then
	cliff_lib='
	function sortv(k,   i, j, x) {
		for (i = 1; i <= n[k]; i++) a[i] = v[k, i]
		for (i = 2; i <= n[k]; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
	}
	function med(k) { if (!(k in n)) return 0; sortv(k); return a[int((n[k] + 1) / 2)] }
	function cell(k,   m) { if (!(k in n)) return "-"; m = med(k); return sprintf("%g (%g-%g)", m, a[1], a[n[k]]) }
	function sp(k,   m) { if (!(k in n)) return 0; m = med(k); return m ? (a[n[k]] - a[1]) / m : 0 }
	function rat(k8, k1,   r) {
		if (!med(k1)) return "-"
		r = sprintf("%.2f", med(k8) / med(k1))
		return (sp(k8) > 0.25 || sp(k1) > 0.25) ? r "*" : r
	}
	$2 == "read" {
		c = $6 == "none" ? "base" : $6; p = $3 "|" $5 "|" $4
		if (!(p in seen)) { seen[p] = 1; o[np++] = p }
		k = p "|" c; n[k]++; v[k, n[k]] = $8 + 0
	}'
	{
	echo
	echo "Cached reads by request size"
	echo "----------------------------"
	echo
	base=/dev/null
	[ -s "$dir/cliff-base.csv" ] && base=$dir/cliff-base.csv
	grep -h '^cliff,cpu,' "$dir/cliff-spin.csv" "$base" | sed 's/^cliff,cpu,/CPU: /' || true
	grep -h '^cliff,folios,' "$dir/cliff-spin.csv" | sed 's/^cliff,folios,/folio sizes, /' || true
	echo
	cat "$dir/cliff-spin.csv" "$base" |
		awk -F, "$cliff_lib"'
		END { for (i = 0; i < np; i++) { p = o[i]
			printf "%s|%s|%s|%s\n", p, cell(p "|on"), cell(p "|off"), cell(p "|base") } }' |
		rst_table "MB/s, median (min-max) of the rounds:" folios dest bs spin_on spin_off unpatched
	echo
	cat "$dir/cliff-spin.csv" "$base" |
		awk -F, "$cliff_lib"'
		END { for (i = 0; i < np; i++) { split(o[i], f, "|"); fd = f[1] "|" f[2]
			if (f[3] != "8M" || done[fd]++) continue
			printf "%s|%s|%s|%s\n", fd, rat(fd "|8M|on", fd "|1M|on"),
				rat(fd "|8M|off", fd "|1M|off"), rat(fd "|8M|base", fd "|1M|base") } }' |
		rst_table "8 MiB over 1 MiB, ratio of medians ('*': a median spread by more than 25%):" \
			folios dest spin_on spin_off unpatched
	echo
	{ grep -h '^cliff,copy,' "$dir/cliff-spin.csv" || true; } | awk -F, '{ printf "%s|%s|%s|%s|%s\n", $3, $4, $5, $6, $8 }' |
		rst_table "User-space copies into device memory (spin-copy, one run each), MB/s:" \
			method chunk src_offset bs MB/s
	} | sed 's/ *$//' >>"$report"
fi

# Plots: medians, with min-max error bars.
if command -v gnuplot >/dev/null; then
	# column of mode N's median in a .dat: residency 2 + 3 * N, size 3 + 3 * N
	for rig in "${rigs[@]}"; do
		for pat in contig scatter; do
			gnuplot <<GP
set terminal png size 800,500 noenhanced
set output "$dir/residency-$rig-$pat.png"
set title "$rig rig, $pat residency, 1 MiB sequential reads into device memory"
set xlabel "file resident in the page cache (%)"
set ylabel "MB/s (median, min-max bars)"
set key top left
set yrange [0:*]
set xrange [-5:105]
f = "$dir/residency-$rig-$pat.dat"
plot f u 1:2:3:4 w yerrorlines t "p2p (O_DIRECT, QD 1)", \
     f u 1:5:6:7 w yerrorlines t "p2p_qd8 (O_DIRECT, io_uring QD 8)", \
     f u 1:8:9:10 w yerrorlines t "CPU bounce", \
     f u 1:11:12:13 w yerrorlines t "page cache, router off", \
     f u 1:14:15:16 w yerrorlines lw 2 t "SPIN", \
     f u 1:17:18:19 w yerrorlines dt 2 t "SPIN, default model", \
     f u 1:20 w l dt 3 lc rgb "black" t "overlap bound"
GP
		done
		for res in 0 50; do
			[ -s "$dir/size-$rig-$res.dat" ] || continue
			gnuplot <<GP
set terminal png size 800,500 noenhanced
set output "$dir/size-$rig-$res.png"
set title "$rig rig, sequential reads into device memory, $res% resident (scattered)"
set xlabel "request size"
set ylabel "MB/s (median, min-max bars)"
set logscale x 2
set key top left
set yrange [0:*]
f = "$dir/size-$rig-$res.dat"
plot f u 1:3:4:5:xtic(2) w yerrorlines t "p2p (O_DIRECT, QD 1)", \
     f u 1:6:7:8 w yerrorlines t "p2p_qd8 (O_DIRECT, io_uring QD 8)", \
     f u 1:9:10:11 w yerrorlines t "CPU bounce", \
     f u 1:12:13:14 w yerrorlines t "page cache, router off", \
     f u 1:15:16:17 w yerrorlines lw 2 t "SPIN"
GP
		done
	done
	gnuplot <<GP
set terminal png size 800,500 noenhanced
set output "$dir/readahead.png"
set title "P-readahead: SPIN over O_DIRECT (QD 1), sequential reads, cold cache (medians)"
set xlabel "request size"
set ylabel "speed-up over O_DIRECT (x)"
set logscale x 2
set yrange [0:*]
plot $(for rig in "${rigs[@]}"; do [ -s "$dir/size-$rig-0.dat" ] && printf '"%s" u 1:($15/$3):xtic(2) w lp t "%s rig", ' "$dir/size-$rig-0.dat" "$rig"; done) 5 w l dt 2 lc rgb "black" t "5x"
GP
fi
cat "$report"
