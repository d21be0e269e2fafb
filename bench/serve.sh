#!/usr/bin/env bash
# Measures aimon-gw serve against a stdlib floor (bench/floor: decode, a
# no-op Echo, encode; no checks) on the same input, in interleaved rounds,
# and prints the ratio in wall and processor time (user+system; the steady
# one on a loaded machine), with the spread of the rounds. Two inputs of
# lone tool_use lines: plain ASCII messages, and non-ASCII ones as Python's
# json.dumps writes them (every character past ASCII as a \u escape).
# BEFORE=path/to/an/older/aimon-gw adds that build to the same rounds.
# Usage: bench/serve.sh [LINES] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-200000}
rounds=${2:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/aimon-gw" ./cmd/aimon-gw
go build -o "$tmp/floor" ./bench/floor
progs=(floor aimon-gw)
if [ -n "${BEFORE:-}" ]; then
	cp "$BEFORE" "$tmp/before"
	progs+=(before)
fi
# About 10% of the calls send times as a string, which the gate refuses.
gen() { # message format
	awk -v n="$lines" -v msg="$1" 'BEGIN { for (i = 0; i < n; i++) {
	m = sprintf(msg, i)
	if (i % 10 == 9) printf "{\"type\":\"tool_use\",\"id\":\"c%d\",\"name\":\"Echo\",\"input\":{\"message\":\"%s\",\"times\":\"2\"}}\n", i, m;
	else printf "{\"type\":\"tool_use\",\"id\":\"c%d\",\"name\":\"Echo\",\"input\":{\"message\":\"%s\",\"times\":2}}\n", i, m } }'
}
gen 'm%d' > "$tmp/ascii.jsonl"
# "Grüße, 世界 — naïve café 🙂 #i" as Python writes it.
gen 'Gr\\u00fc\\u00dfe, \\u4e16\\u754c \\u2014 na\\u00efve caf\\u00e9 \\ud83d\\ude42 #%d' > "$tmp/python.jsonl"
run() { # prog input: aimon-gw's arguments, or none for the floor
	case $1 in
	floor) "$tmp/floor" ;;
	*) "$tmp/$1" serve --log-level error ;;
	esac < "$tmp/$2.jsonl"
}
# Each must give the same content as the floor on every valid call.
for in in ascii python; do
	run floor "$in" > "$tmp/floor.out"
	for p in "${progs[@]:1}"; do
		run "$p" "$in" > "$tmp/gw.out"
		paste -d'\t' "$tmp/floor.out" "$tmp/gw.out" | awk -F'\t' -v w="$p $in" 'NR % 10 != 0 && $1 != $2 { bad++ } END { if (bad) { print w ": " bad " valid calls differ"; exit 1 } }'
	done
done
TIMEFORMAT='%3R %3U %3S'
for r in $(seq "$rounds"); do
	for in in ascii python; do
		for p in "${progs[@]}"; do
			t=$( { time run "$p" "$in" > /dev/null; } 2>&1 )
			echo "$r $in null $p $t" >> "$tmp/times"
			# As an agent reads it: standard output a pipe.
			t=$( { time run "$p" "$in" | cat > /dev/null; } 2>&1 )
			echo "$r $in pipe $p $t" >> "$tmp/times"
		done
	done
done
# Per input and output: each program's µs per call (wall, processor) and
# its ratio to the floor over all rounds, with the lowest and highest
# round's ratio.
awk -v n="$((lines * rounds))" -v lines="$lines" '
{ k = $2 " " $3; wall[k, $4] += $5; cpu[k, $4] += $6 + $7; rw[$1, k, $4] = $5; rc[$1, k, $4] = $6 + $7; keys[k]; progs[$4]; rounds[$1] }
END {
	for (k in keys) for (p in progs) if (p != "floor") {
		lo = hi = clo = chi = ""
		for (r in rounds) {
			x = rw[r, k, p] / rw[r, k, "floor"]; c = rc[r, k, p] / rc[r, k, "floor"]
			if (lo == "" || x < lo) lo = x; if (hi == "" || x > hi) hi = x
			if (clo == "" || c < clo) clo = c; if (chi == "" || c > chi) chi = c
		}
		printf "%-12s %-9s wall %.2f× the floor (rounds %.2f–%.2f), processor %.2f× (%.2f–%.2f); µs/call wall %.2f vs %.2f, processor %.2f vs %.2f\n", k, p,
			wall[k, p] / wall[k, "floor"], lo, hi, cpu[k, p] / cpu[k, "floor"], clo, chi,
			wall[k, p] / n * 1e6, wall[k, "floor"] / n * 1e6, cpu[k, p] / n * 1e6, cpu[k, "floor"] / n * 1e6
	}
}' "$tmp/times" | sort
