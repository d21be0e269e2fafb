#!/usr/bin/env bash
# Measures one Claude Code hook decision as a whole process on
# examples/policies/team (issue 14): answered from its verified record,
# loaded afresh (--cache off), the same call through check, the binary's
# own start-up (version) and a stdlib floor (bench/floor: decode a line,
# encode a line), in interleaved rounds, as medians and ratios.
# Usage: bench/hook.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/aimon-gw" ./cmd/aimon-gw
go build -o "$tmp/floor" ./bench/floor
go build -o "$tmp/procs" ./bench/procs
export XDG_CACHE_HOME="$tmp/cache"
policy=examples/policies/team
printf '{"session_id":"s","cwd":"%s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"t"}\n' "$tmp" > "$tmp/hook.json"
printf '{"type":"tool_use","id":"t","name":"Bash","input":{"command":"git status"}}\n' > "$tmp/call.json"
# The record is written by the first call; both ways must answer alike.
cached=$("$tmp/aimon-gw" hook claude-code --policy "$policy" < "$tmp/hook.json")
fresh=$("$tmp/aimon-gw" hook claude-code --cache off --policy "$policy" < "$tmp/hook.json")
again=$("$tmp/aimon-gw" hook claude-code --policy "$policy" < "$tmp/hook.json")
if [ "$cached" != "$fresh" ] || [ "$again" != "$fresh" ]; then
	echo "the cached and the fresh hook answer differently:"; echo "$fresh"; echo "$again"; exit 1
fi
ls "$XDG_CACHE_HOME/aimon-gw"/*.json > /dev/null
"$tmp/procs" -n "$runs" -in "$tmp/hook.json" \
	"floor=$tmp/floor" \
	"version=$tmp/aimon-gw version" \
	"hook=$tmp/aimon-gw hook claude-code --policy $policy" \
	"hook-fresh=$tmp/aimon-gw hook claude-code --cache off --policy $policy" \
	"check<$tmp/call.json=$tmp/aimon-gw check --policy $policy -"
# What of the binary's own start-up is its packages' initialisation.
for i in $(seq 20); do GODEBUG=inittrace=1 "$tmp/aimon-gw" version 2>&1 >/dev/null; done |
	awk '/^init/ { s += $5 } END { printf "package init of the binary: %.2f ms per process (GODEBUG=inittrace, 20 runs)\n", s / 20 }'
