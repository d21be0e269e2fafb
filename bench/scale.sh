#!/usr/bin/env bash
# Measures issue 32's rows on a policy's size and on the search tools, each
# as a ratio to its anchor, in one run:
#   - serve as a whole process, a 1,000-tool policy against a 10-tool one:
#     exec to the tool list (the first line of output) and peak resident
#     memory (bench/procs), loaded afresh (--cache off) and restored from
#     a warm record of the load cache;
#     a call's cost at 1,000 tools is bench/rows.sh's in-process row, since
#     20,000 calls' processor time less a start-up's varies by as much as
#     the calls cost;
#   - in process (bench/scale): start, list_tools, a call and the live heap,
#     1,000 tools against 10; a saved edit to the new generation in force,
#     500 tools against 2; the same reusing what the generation in force
#     compiled against from scratch; start and live heap of 1,000 tools
#     whose inputs all differ against 10 such;
#   - a refused call under two lists of 1,000 Read and Bash entries each
#     against the same under 10 (internal/core/allow);
#   - Grep against rg and Glob against fd, run as processes on a copy of Go's
#     net sources (a literal, a regular expression with a literal prefix,
#     an absent word, a literal without regard to case, one with its
#     literal inside), the same with workers against the walk alone, and
#     Read of a 4 KiB file against os.ReadFile (internal/exec/builtin).
# Processor-time ratios are the steady ones on a shared machine; wall-time
# ones are what a caller waits. rg and fd (Debian: ripgrep, fd-find) must be
# installed. Usage: bench/scale.sh [RUNS]; PROCS_ONLY=1 stops after the
# processes.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
if ! command -v rg > /dev/null || ! { command -v fdfind || command -v fd; } > /dev/null; then
	echo "bench/scale.sh compares Grep and Glob with rg and fd: install ripgrep and fd-find" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/aimon-gw" ./cmd/aimon-gw
go build -o "$tmp/procs" ./bench/procs
# A policy of N built-in tools declared in a few ways, each allowed by name.
policy() {
	mkdir -p "$tmp/p$1/cue.mod"
	printf 'module: "example.com/p@v0"\nlanguage: version: "v0.12.0"\n' > "$tmp/p$1/cue.mod/module.cue"
	awk -v n="$1" 'BEGIN {
		print "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {"
		for (i = 0; i < n; i++) {
			if (i % 4 < 2) printf "\tTool%d: schema.#Echo\n", i
			else if (i % 4 == 2) printf "\tTool%d: schema.#Read & {input: file_path: =~\"^/srv/\"}\n", i
			else printf "\tTool%d: schema.#Grep & {timeout: \"20s\"}\n", i
		}
		printf "}\n\nagent: \"allowed-tools\": ["
		for (i = 0; i < n; i++) printf "%s\"Tool%d\"", (i ? ", " : ""), i
		print "]" }' > "$tmp/p$1/policy.cue"
}
policy 10
policy 1000
calls=20000
echo '{"type":"list_tools"}' > "$tmp/list.jsonl"
awk -v n="$calls" 'BEGIN { print "{\"type\":\"list_tools\"}"; for (i = 0; i < n; i++)
	printf "{\"type\":\"tool_use\",\"id\":\"c%d\",\"name\":\"Tool5\",\"input\":{\"message\":\"Grüße, \\\"%d\\\" $HOME\",\"times\":2}}\n", i, i }' > "$tmp/calls.jsonl"
# A loaded machine must not turn a slow load into a refusal; both must
# answer every call. gw loads afresh; cached starts from the record that
# its first start wrote.
gw="$tmp/aimon-gw serve --log-level error --load-timeout 10m --cache off --policy"
cached="$tmp/aimon-gw serve --log-level error --load-timeout 10m --cache $tmp/cache --policy"
for n in 10 1000; do
	for i in 1 2; do
		$tmp/aimon-gw serve --log-level debug --cache "$tmp/cache" --policy "$tmp/p$n" < "$tmp/list.jsonl" 2> "$tmp/start$i.log" > /dev/null
	done
	if ! grep -q 'the policy is recorded' "$tmp/start1.log" || ! grep -q 'restored from its record' "$tmp/start2.log"; then
		echo "serve on the $n-tool policy does not start from its record" >&2
		exit 1
	fi
	ok=$($gw "$tmp/p$n" < "$tmp/calls.jsonl" | grep -c '"is_error":false' || true)
	if [ "$ok" != "$calls" ]; then
		echo "serve on the $n-tool policy answered $ok of $calls calls" >&2
		exit 1
	fi
done
echo "== serve as a process: 1,000 tools against 10, loaded and restored ($runs runs each, interleaved)"
"$tmp/procs" -n "$runs" -in "$tmp/list.jsonl" \
	"list-10=$gw $tmp/p10" "list-1000=$gw $tmp/p1000" \
	"cached-10=$cached $tmp/p10" "cached-1000=$cached $tmp/p1000" \
	"calls-10<$tmp/calls.jsonl=$gw $tmp/p10" "calls-1000<$tmp/calls.jsonl=$gw $tmp/p1000" | tee "$tmp/procs.out"
awk '{ first[$1] = $9; cpu[$1] = $12; rss[$1] = $16 } END {
	printf "exec to the tool list: 1,000 tools loaded %.0f ms (%.0f ms cpu, %.0f MiB), %.2f× 10 tools loaded (%.2f× cpu)\n", first["list-1000"], cpu["list-1000"], rss["list-1000"], first["list-1000"] / first["list-10"], cpu["list-1000"] / cpu["list-10"]
	printf "exec to the tool list: 1,000 tools restored %.0f ms (%.0f ms cpu, %.0f MiB), %.2f× loaded (%.2f× cpu), %.2f× 10 tools loaded, %.2f× 10 tools restored\n", first["cached-1000"], cpu["cached-1000"], rss["cached-1000"], first["cached-1000"] / first["list-1000"], cpu["cached-1000"] / cpu["list-1000"], first["cached-1000"] / first["list-10"], first["cached-1000"] / first["cached-10"] }' "$tmp/procs.out"
if [ -n "${PROCS_ONLY:-}" ]; then
	exit 0
fi
echo "== in process: tools and reloads (bench/scale)"
go test ./bench/scale -run '^$' -bench '^Benchmark(ToolsScale|ReloadScale)$' -benchtime "${runs}x" | grep '^Benchmark' | tr '\t' '\n' | sed 's/^ *//'
# A reload that reuses what the generation in force compiled against one
# from scratch: 500 distinct tools, one changed, the list changed, every
# tool moved a line; 500 tools written alike.
go test ./bench/scale -run '^$' -bench '^BenchmarkReloadReuse$' -benchtime "$(((runs + 1) / 2))x" | grep '^Benchmark' | tr '\t' '\n' | sed 's/^ *//'
# 1,000 tools whose inputs all differ share no compiled input: the slow case.
go test ./bench/scale -run '^$' -bench '^BenchmarkDistinctToolsScale$' -benchtime "$(((runs + 2) / 3))x" | grep '^Benchmark' | tr '\t' '\n' | sed 's/^ *//'
echo "== a refusal under 1,000 allow entries against 10 (internal/core/allow)"
go test ./internal/core/allow -run '^$' -bench 'P10RefusalLongLists' -benchtime "$((runs * 8))x" | grep '^Benchmark'
echo "== Grep against rg, Glob against fd, Read against os.ReadFile (internal/exec/builtin)"
go test ./internal/exec/builtin -run '^$' -bench 'VsRipgrep|VsFd' -benchtime "$((runs * 3))x" | grep '^Benchmark'
echo "== Grep and Glob with N workers against the walk alone (below 1 they pay; searches use workers above 2 processors)"
go test ./internal/exec/builtin -run '^$' -bench '^BenchmarkSearchWorkers$' -benchtime "$((runs * 2))x" | grep '^Benchmark'
go test ./internal/exec/builtin -run '^$' -bench 'ReadSmall' -benchtime "$((runs * 300))x" | grep '^Benchmark'
