#!/usr/bin/env bash
# Measures aimon-gw serve against a stdlib floor (bench/floor: decode, a
# no-op Echo, encode; no checks) on the same input, in interleaved rounds,
# and prints the ratio. Usage: bench/serve.sh [LINES] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-200000}
rounds=${2:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/aimon-gw" ./cmd/aimon-gw
go build -o "$tmp/floor" ./bench/floor
# About 10% of the calls send times as a string, which the gate refuses.
awk -v n="$lines" 'BEGIN { for (i = 0; i < n; i++) {
	if (i % 10 == 9) printf "{\"type\":\"tool_use\",\"id\":\"c%d\",\"name\":\"Echo\",\"input\":{\"message\":\"m%d\",\"times\":\"2\"}}\n", i, i;
	else printf "{\"type\":\"tool_use\",\"id\":\"c%d\",\"name\":\"Echo\",\"input\":{\"message\":\"m%d\",\"times\":2}}\n", i, i } }' > "$tmp/in.jsonl"
# Both must give the same content on every valid call.
"$tmp/floor" < "$tmp/in.jsonl" > "$tmp/floor.out"
"$tmp/aimon-gw" serve --log-level error < "$tmp/in.jsonl" > "$tmp/gw.out"
paste -d'\t' "$tmp/floor.out" "$tmp/gw.out" | awk -F'\t' 'NR % 10 != 0 && $1 != $2 { bad++ } END { if (bad) { print bad " valid calls differ"; exit 1 } }'
now() { date +%s%N; }
total_floor=0 total_gw=0 pipe_floor=0 pipe_gw=0
for r in $(seq "$rounds"); do
	t0=$(now); "$tmp/floor" < "$tmp/in.jsonl" > /dev/null; t1=$(now)
	"$tmp/aimon-gw" serve --log-level error < "$tmp/in.jsonl" > /dev/null; t2=$(now)
	total_floor=$((total_floor + t1 - t0)); total_gw=$((total_gw + t2 - t1))
	# As an agent reads it: standard output a pipe.
	t0=$(now); "$tmp/floor" < "$tmp/in.jsonl" | cat > /dev/null; t1=$(now)
	"$tmp/aimon-gw" serve --log-level error < "$tmp/in.jsonl" | cat > /dev/null; t2=$(now)
	pipe_floor=$((pipe_floor + t1 - t0)); pipe_gw=$((pipe_gw + t2 - t1))
done
awk -v f="$total_floor" -v g="$total_gw" -v pf="$pipe_floor" -v pg="$pipe_gw" -v n="$((lines * rounds))" 'BEGIN {
	printf "floor       %.2f µs/call\naimon-gw    %.2f µs/call\nratio       %.2f× the floor\n", f / n / 1000, g / n / 1000, g / f
	printf "through a pipe: floor %.2f, aimon-gw %.2f µs/call, %.2f× the floor\n", pf / n / 1000, pg / n / 1000, pg / pf }'
