#!/usr/bin/env bash
# Measures one hook decision as a whole process (issues 14, 42, 43): Claude
# Code's on examples/policies/team, Codex's and Gemini CLI's on a policy of
# their shells, each answered from its verified record; Claude Code's
# loaded afresh (--cache off), the same call through check, the binary's
# own start-up (version), a stdlib floor (bench/floor: decode a line,
# encode a line) and Claude Code's HTTP hook (a POST to mcp --listen), in
# interleaved rounds (bench/procs), as medians and ratios to version, with
# the goals: each command hook at most 1.1x version, the HTTP hook's p50
# at most 1 ms. With BASE (a git revision), the binary built from it runs
# the same rows, prefixed base-, in the same rounds (a change's before and
# after in one run), with a cache of its own (--cache); with NEW (another
# revision) too, the rows without a prefix are of NEW, not of the work tree.
# Usage: bench/hook.sh [RUNS [BASE [NEW]]]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
base=${2:-}
new=${3:-}
tmp=$(mktemp -d)
servers=()
trap 'for s in "${servers[@]}"; do kill "$s" 2>/dev/null; done; wait; rm -rf "$tmp"' EXIT
# build REV BIN builds the gateway of a revision.
build() {
	mkdir "$tmp/src-$1"
	git archive "$1" | tar -x -C "$tmp/src-$1"
	(cd "$tmp/src-$1" && go build -o "$2" ./cmd/aimon-gw)
}
if [ -n "$new" ]; then build "$new" "$tmp/aimon-gw"; else go build -o "$tmp/aimon-gw" ./cmd/aimon-gw; fi
[ -z "$base" ] || build "$base" "$tmp/aimon-gw-base"
go build -o "$tmp/floor" ./bench/floor
go build -o "$tmp/procs" ./bench/procs
export XDG_CACHE_HOME="$tmp/cache"
team=examples/policies/team
# Codex's and Gemini CLI's shells, and a principal for the HTTP hook.
agents="$tmp/agents"
mkdir -p "$agents/cue.mod"
printf 'module: "example.com/bench@v0"\nlanguage: version: "v0.12.0"\n' > "$agents/cue.mod/module.cue"
cat > "$agents/policy.cue" <<'EOF'
package policy

import (
	"aimon.dev/gw/schema"
	"aimon.dev/gw/schema/geminicli"
)

tools: {
	Bash:              schema.#Bash
	run_shell_command: geminicli.#run_shell_command
}
agent: "allowed-tools": ["Bash(git:*)", "run_shell_command(git:*)"]
principals: bench: {subject: "bench", surface: ["agent"]}
EOF
printf '{"session_id":"s","cwd":"%s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"t"}\n' "$tmp" > "$tmp/hook.json"
printf '{"session_id":"s","turn_id":"t","cwd":"%s","hook_event_name":"PreToolUse","model":"m","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"c1"}\n' "$tmp" > "$tmp/codex.json"
printf '{"session_id":"s","transcript_path":"/t","cwd":"%s","hook_event_name":"BeforeTool","timestamp":"2026-12-02T21:00:39.687Z","tool_name":"run_shell_command","tool_input":{"command":"git status","description":"d"}}\n' "$tmp" > "$tmp/gemini.json"
printf '{"type":"tool_use","id":"t","name":"Bash","input":{"command":"git status"}}\n' > "$tmp/call.json"

# unticket prints an answer with each exec ticket replaced by what it is
# bound to (its claims, decoded) without the nonce and expiry that make
# every ticket one of its own; it fails on an answer without a ticket.
unticket() {
	local a=$1 t claims n=0
	while [[ $a =~ \'--ticket\'\ \'([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+\' ]]; do
		t=${BASH_REMATCH[1]//_//}
		t=${t//-/+}
		while ((${#t} % 4)); do t+='='; done
		claims=$(printf '%s' "$t" | base64 -d | jq -cS 'del(.n, .e)')
		a=${a/"${BASH_REMATCH[0]}"/"'--ticket' $claims"}
		n=$((n + 1))
	done
	((n > 0)) || { echo "the hook's answer holds no ticket: $1" >&2; return 1; }
	printf '%s\n' "$a"
}
# The record is written by the first call; the cached and the fresh way
# must answer alike, tickets bound to the same.
same() { # RUNTIME POLICY INPUT
	local cached fresh again
	cached=$(unticket "$("$tmp/aimon-gw" hook "$1" --policy "$2" < "$3")")
	fresh=$(unticket "$("$tmp/aimon-gw" hook "$1" --cache off --policy "$2" < "$3")")
	again=$(unticket "$("$tmp/aimon-gw" hook "$1" --policy "$2" < "$3")")
	if [ "$cached" != "$fresh" ] || [ "$again" != "$fresh" ]; then
		echo "the cached and the fresh hook $1 answer differently:"; echo "$fresh"; echo "$again"; exit 1
	fi
}
same claude-code "$team" "$tmp/hook.json"
same codex "$agents" "$tmp/codex.json"
same gemini-cli "$agents" "$tmp/gemini.json"
ls "$XDG_CACHE_HOME/aimon-gw"/*.json > /dev/null

# Claude Code's HTTP hook on a replica of mcp --listen (a free port is
# looked for among a few); listen BIN VAR sets VAR to its address.
export PROCS_BEARER=bench-token
printf 'sha256:%s bench\n' "$(printf %s "$PROCS_BEARER" | sha256sum | cut -d' ' -f1)" > "$tmp/tokens"
chmod 600 "$tmp/tokens"
listen() {
	local at pid
	for _ in 1 2 3 4 5; do
		at=127.0.0.1:$((20000 + RANDOM % 20000))
		"$1" mcp --listen "$at" --policy "$agents" --workdir "$tmp" --tokens "$tmp/tokens" --log-level error > /dev/null &
		pid=$!
		for _ in $(seq 100); do
			if curl -sf "http://$at/readyz" > /dev/null 2>&1; then
				servers+=("$pid")
				curl -sf -H "Authorization: Bearer $PROCS_BEARER" --data-binary @"$tmp/hook.json" "http://$at/hooks/claude-code" | grep -q '"allow"' ||
					{ echo "the HTTP hook of $1 does not allow the call" >&2; exit 1; }
				printf -v "$2" %s "$at"
				return
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	echo "mcp --listen of $1 did not start" >&2
	exit 1
}
listen "$tmp/aimon-gw" addr
rows=(
	"version=$tmp/aimon-gw version"
	"floor=$tmp/floor"
	"hook=$tmp/aimon-gw hook claude-code --policy $team"
	"codex<$tmp/codex.json=$tmp/aimon-gw hook codex --policy $agents"
	"gemini<$tmp/gemini.json=$tmp/aimon-gw hook gemini-cli --policy $agents"
	"hook-fresh=$tmp/aimon-gw hook claude-code --cache off --policy $team"
	"check<$tmp/call.json=$tmp/aimon-gw check --policy $team -"
	"http-hook=http://$addr/hooks/claude-code"
)
if [ -n "$base" ]; then
	b=$tmp/aimon-gw-base
	"$b" hook claude-code --cache "$tmp/cache-base" --policy "$team" < "$tmp/hook.json" > /dev/null
	"$b" hook codex --cache "$tmp/cache-base" --policy "$agents" < "$tmp/codex.json" > /dev/null
	listen "$b" baseaddr
	rows+=(
		"base-version=$b version"
		"base-hook=$b hook claude-code --cache $tmp/cache-base --policy $team"
		"base-codex<$tmp/codex.json=$b hook codex --cache $tmp/cache-base --policy $agents"
		"base-gemini<$tmp/gemini.json=$b hook gemini-cli --cache $tmp/cache-base --policy $agents"
		"base-http-hook=http://$baseaddr/hooks/claude-code"
	)
fi
# Each hook against its own binary's version, round by round.
anchors=()
for r in base-hook base-codex base-gemini base-http-hook; do anchors+=(-anchor "$r=base-version"); done
"$tmp/procs" -n "$runs" -in "$tmp/hook.json" "${anchors[@]}" "${rows[@]}" | tee "$tmp/rows"
awk '$1 ~ /^(base-)?(hook|codex|gemini)$/ { printf "goal: %-12s at most 1.10x version: %.2fx round by round, %.2fx of the medians (%s)\n", $1, $8, $5 / (($1 ~ /^base-/) ? b : 1), $8 + 0 <= 1.10 ? "holds" : "missed" }
	$1 == "base-version" { b = $5 }
	$1 ~ /http-hook$/ { printf "goal: %-12s p50 at most 1 ms: %.2f ms (%s)\n", $1, $3, $3 + 0 <= 1 ? "holds" : "missed" }' "$tmp/rows"
# What of the binary's own start-up is its packages' initialisation.
for i in $(seq 20); do GODEBUG=inittrace=1 "$tmp/aimon-gw" version 2>&1 >/dev/null; done |
	awk '/^init/ { s += $5 } END { printf "package init of the binary: %.2f ms per process (GODEBUG=inittrace, 20 runs)\n", s / 20 }'
