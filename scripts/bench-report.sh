#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Tables, target ratios and plots from the CSV files 'make bench' wrote.
set -euo pipefail

usage() {
	cat <<USAGE
Usage: $0 [--help] [DIR]

Reads DIR/spin-plain.csv, DIR/spin-throttled.csv and, if present,
DIR/regress-base.csv (DIR defaults to build/bench, where scripts/bench.sh
writes them) and writes:
  - DIR/report.rst: the tables (reStructuredText, for
    Documentation/spin/bench.rst) and the targets, each a ratio of two
    numbers from the same boot of the rig;
  - DIR/*.png (gnuplot): throughput against residency for each mode
    with the overlap bound T(r) = max(r*S/B_copy, (1-r)*S/B_p2p), where
    B_p2p is the mean O_DIRECT rate and B_copy the page-cache path at
    100% residency of the same run; throughput against request size;
    and the read-ahead speed-up over O_DIRECT.
Prints the report.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build/bench}
rigs=()
for r in plain throttled; do
	[ -s "$dir/spin-$r.csv" ] && rigs+=("$r")
done
[ ${#rigs[@]} -gt 0 ] || { echo "bench-report: no $dir/spin-*.csv" >&2; exit 1; }
report=$dir/report.rst

# One awk program per question; each reads a run's CSV
# (sweep,pattern,residency,bs,rw,jobs,mode,MB/s,extra).
bytes='function bytes(s) { return s ~ /k$/ ? s * 1024 : s ~ /M$/ ? s * 1048576 : s }'
best='function best(a, b, c) { return a > b ? (a > c ? a : c) : (b > c ? b : c) }'

residency_dat() {	# csv pattern -> res p2p bounce pagecache spin spin_default bound
	awk -F, -v pat="$2" '
	$1 == "residency" && $7 == "p2p" { bp += $8; np++ }
	$1 == "residency" && $7 == "pagecache" && $3 == 100 { bc += $8; nc++ }
	$1 == "residency" && $2 == pat { v[$3 "," $7] = $8; seen[$3] = 1 }
	END {
		bp /= np; bc /= nc
		for (r = 0; r <= 100; r += 10) {
			if (!(r in seen))
				continue
			x = r / 100
			t = x / bc > (1 - x) / bp ? x / bc : (1 - x) / bp
			sd = "NaN"
			if ((r ",spin_default") in v)
				sd = v[r ",spin_default"]
			printf "%d %s %s %s %s %s %.0f\n", r, v[r ",p2p"], v[r ",bounce"],
				v[r ",pagecache"], v[r ",spin"], sd, 1 / t
		}
	}' "$1"
}

size_dat() {	# csv residency -> bytes bs p2p bounce pagecache spin
	awk -F, -v res="$2" "$bytes"'
	$1 == "size" && $3 == res { v[$4 "," $7] = $8; if (!($4 in b)) { b[$4] = bytes($4); o[n++] = $4 } }
	END {
		for (i = 0; i < n; i++) {
			s = o[i]
			printf "%d %s %s %s %s %s\n", b[s], s, v[s ",p2p"], v[s ",bounce"],
				v[s ",pagecache"], v[s ",spin"]
		}
	}' "$1"
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

rst_table() {	# title, header words, then rows on stdin (space-separated)
	local title=$1
	shift
	awk -v title="$title" -v hdr="$*" '
	{ rows[n++] = $0 }
	END {
		nh = split(hdr, h, " ")
		for (i = 1; i <= nh; i++) w[i] = length(h[i])
		for (r = 0; r < n; r++) {
			nf = split(rows[r], f, " ")
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
			nf = split(rows[r], f, " "); line = ""
			for (i = 1; i <= nh; i++) line = line (i > 1 ? "  " : "") sprintf("%-" w[i] "s", f[i])
			print line
		}
		print rule; print ""
	}'
}

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
	for pat in contig scatter; do
		awk '{ b = $2 > $3 ? $2 : $3; b = b > $4 ? b : $4
		       printf "%s%% %s %s %s %s %s %s %.2f %.2f\n", $1, $2, $3, $4, $5, $6,
		       $7, $5 / b, $5 / $7 }' "$dir/residency-$rig-$pat.dat" |
			sed 's/ NaN / - /' |
			rst_table "Residency, $pat, 1 MiB sequential reads (MB/s):" \
				resident p2p bounce pagecache spin spin_default bound spin/best spin/bound
	done
	for res in 0 50; do
		awk '{ b = $3 > $4 ? $3 : $4; b = b > $5 ? b : $5
		       printf "%s %s %s %s %s %.2f %.2f\n", $2, $3, $4, $5, $6, $6 / b, $6 / $3 }' \
			"$dir/size-$rig-$res.dat" |
			rst_table "Request size, sequential, $res% resident (scattered) (MB/s):" \
				bs p2p bounce pagecache spin spin/best spin/p2p
	done
	awk -F, "$best"'
	$1 == "random" || $1 == "jobs" || $1 == "app" {
		k = $1 " " $4 " " $3 "% " $6; v[k "," $7] = $8
		if (!(k in seen)) { seen[k] = 1; o[n++] = k }
	}
	END {
		for (i = 0; i < n; i++) {
			k = o[i]; b = best(v[k ",p2p"], v[k ",bounce"], v[k ",pagecache"])
			printf "%s %s %s %s %s %.2f\n", k, v[k ",p2p"], v[k ",bounce"],
				v[k ",pagecache"], v[k ",spin"], v[k ",spin"] / b
		}
	}' "$csv" | rst_table "Random reads, 4 jobs, and the log scanner (MB/s):" \
		sweep bs resident jobs p2p bounce pagecache spin spin/best
	awk -F, '$1 ~ /^(residency|size|random|jobs)$/ && $7 ~ /^spin/ {
		delete x
		split($9, e, " "); for (i in e) { split(e[i], kv, "="); x[kv[1]] = kv[2] }
		printf "%s %s %s%% %s%% %s %s %s %s %s %s\n", $1, $2, $3, x["resident"], $4,
			$5, $6, $7, x["dma_MiB"], x["copy_MiB"] " " x["ra_hit_MiB"] }' "$csv" |
		rst_table "Where SPIN's bytes came from (router counters, MiB):" \
			sweep pattern asked resident bs rw jobs mode dma copy ra_hit
	# Regression rows: medians of five rounds.
	base=/dev/null
	[ $rig = plain ] && [ -s "$dir/regress-base.csv" ] && base=$dir/regress-base.csv
	grep -h '^regress,' "$csv" "$base" |
		awk -F, '{ k = $2 "," $3; n[k]++; v[k, n[k]] = $5; t[$2] = 1 }
		function med(k,   i, j, x, a) {
			for (i = 1; i <= n[k]; i++) a[i] = v[k, i]
			for (i = 2; i <= n[k]; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
			return a[int((n[k] + 1) / 2)]
		}
		END {
			for (x in t) {
				on = med(x ",spin_on"); off = med(x ",spin_off")
				base = 0
				if ((x ",base") in n)
					base = med(x ",base")
				printf "%s %s %s %s %.3f %s\n", x, on, off, base ? base : "-",
					on / off, base ? sprintf("%.3f", on / base) : "-"
			}
		}' | sort | rst_table "Ordinary buffered reads into RAM, medians of 5 (MB/s; unpatched: the plain rig):" \
			test spin_on spin_off unpatched on/off on/unpatched
done
} | sed 's/ *$//' >"$report"

# The targets, per rig.
{
echo "Targets"
echo "-------"
echo
for rig in "${rigs[@]}"; do
	csv=$dir/spin-$rig.csv
	awk -F, -v rig=$rig "$best $bytes"'
	$1 ~ /^(residency|size|random|jobs)$/ && $7 != "spin_default" {
		k = $1 " " $2 " " $3 "% " $4 " " $5 " j" $6; v[k "," $7] = $8
		if (!(k in seen)) { seen[k] = 1; o[n++] = k; sc[k] = ($1 == "residency" && $2 == "scatter" && $3 >= 30 && $3 <= 70); ra[k] = ($1 == "size" && $3 == 0 && bytes($4) <= 65536) }
	}
	END {
		m1 = m2 = m4 = 1e9
		for (i = 0; i < n; i++) {
			k = o[i]; r = v[k ",spin"] / best(v[k ",p2p"], v[k ",bounce"], v[k ",pagecache"])
			if (r < m1) { m1 = r; w1 = k }
			if (sc[k] && r < m2) { m2 = r; w2 = k }
			if (ra[k] && v[k ",spin"] / v[k ",p2p"] < m4) { m4 = v[k ",spin"] / v[k ",p2p"]; w4 = k }
		}
		printf "%s: SPIN >= 0.97x best baseline everywhere: min %.2f (%s) %s\n", rig, m1, w1, (m1 >= 0.97 ? "met" : "MISSED")
		printf "%s: SPIN >= 1.15x best baseline, 30-70%% scattered: min %.2f (%s) %s\n", rig, m2, w2, (m2 >= 1.15 ? "met" : "MISSED")
		printf "%s: P-readahead >= 5x O_DIRECT, <= 64 KiB sequential: min %.2f (%s) %s\n", rig, m4, w4, (m4 >= 5 ? "met" : "MISSED")
	}' "$csv"
	cat "$dir/residency-$rig-contig.dat" "$dir/residency-$rig-scatter.dat" |
		awk -v rig=$rig '{ r = $5 / $7; if (!n++ || r < m) { m = r; w = $1 } }
		END { printf "%s: SPIN >= 0.85x the overlap bound: min %.2f (at %s%%) %s\n", rig, m, w, (m >= 0.85 ? "met" : "MISSED") }'
done
echo
} | tee -a "$report" >/dev/null

# Plots.
if command -v gnuplot >/dev/null; then
	for rig in "${rigs[@]}"; do
		for pat in contig scatter; do
			gnuplot <<GP
set terminal png size 800,500 noenhanced
set output "$dir/residency-$rig-$pat.png"
set title "$rig rig, $pat residency, 1 MiB sequential reads into device memory"
set xlabel "file resident in the page cache (%)"
set ylabel "MB/s"
set key top left
set yrange [0:*]
plot "$dir/residency-$rig-$pat.dat" u 1:2 w lp t "p2p (O_DIRECT)", \
     "" u 1:3 w lp t "CPU bounce", "" u 1:4 w lp t "page cache, router off", \
     "" u 1:5 w lp lw 2 t "SPIN", "" u 1:6 w lp dt 2 t "SPIN, default model", \
     "" u 1:7 w l dt 3 lc rgb "black" t "overlap bound"
GP
		done
		for res in 0 50; do
			gnuplot <<GP
set terminal png size 800,500 noenhanced
set output "$dir/size-$rig-$res.png"
set title "$rig rig, sequential reads into device memory, $res% resident (scattered)"
set xlabel "request size"
set ylabel "MB/s"
set logscale x 2
set key top left
set yrange [0:*]
plot "$dir/size-$rig-$res.dat" u 1:3:xtic(2) w lp t "p2p (O_DIRECT)", \
     "" u 1:4 w lp t "CPU bounce", "" u 1:5 w lp t "page cache, router off", \
     "" u 1:6 w lp lw 2 t "SPIN"
GP
		done
	done
	gnuplot <<GP
set terminal png size 800,500 noenhanced
set output "$dir/readahead.png"
set title "P-readahead: SPIN over O_DIRECT, sequential reads, cold cache"
set xlabel "request size"
set ylabel "speed-up over O_DIRECT (x)"
set logscale x 2
set yrange [0:*]
plot $(for rig in "${rigs[@]}"; do printf '"%s" u 1:($6/$3):xtic(2) w lp t "%s rig", ' "$dir/size-$rig-0.dat" "$rig"; done) 5 w l dt 2 lc rgb "black" t "5x"
GP
fi
cat "$report"
