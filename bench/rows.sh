#!/usr/bin/env bash
# Measures issue 32's per-call rows, each as the median of per-round
# processor-time ratios against its anchor in one run (the machine is
# shared; wall-time ratios beside them where a benchmark has them), with
# its goal:
#   - a decision under one surface of 1,000 Bash and 1,000 Read entries
#     against 10 + 10 (gateway Check), goal ≤ 1.2;
#   - an Echo call at 1,000 tools against 10 (gateway Serve), ≤ 1.1;
#   - a line with \u escapes (Python's json.dumps, Go's json.Marshal)
#     against the same text unescaped, in each line form, ≤ 1.1;
#   - an OpenAI Chat message of one call against a lone tool_use line of
#     the same content, ≤ 1.3;
#   - a refusal under a chain of 1,000-entry lists against 10, ≤ 1.2;
#   - Read of a 4 KiB file against os.ReadFile, ≤ 1.5;
#   - Grep against rg and Glob against fd as processes, ≤ 1.0;
#   - an upstream Echo call (a go-sdk server over stdio) through mcp, ≤
#     1.25, and through serve, ≤ 1.12, against a direct go-sdk client call,
#     beside an SDK-only proxy, a byte relay and mcp with every call left
#     to the SDK's server (issue 49; wall time, the server a process).
# The other rows of issue 49 follow, each beside its anchor in one run:
#   - a tools/call through mcp --listen against the go-sdk's stateful
#     streamable server for one session, wall and processor time, ≤ 1.0;
#   - aimon-gw's one decision, gate included, against Cedar-go deciding
#     the same 10-entry policy without a gate, ≤ 1.0, and at 1,000 entries
#     (bench/cedar, a module of its own);
#   - exec to the tool list of 1,000 tools loaded afresh (--cache off),
#     ≤ 300 ms, beside 10 tools; an editor's save of a 500-tool policy to
#     in force in a running serve, ≤ 250 ms, beside 2 tools;
#   - Grep against rg, wall and processor time, ≤ 1.0 (above);
#   - serve's Echo against the stdlib floor (bench/serve.sh), wall and
#     processor time, ≤ 1.5.
# bench/scale.sh measures the rows on a policy's load, memory and reload.
# The serve benchmarks take six times ROUNDS: with fewer, a collection
# that lands in one input's round moves its median by 0.1.
# Usage: bench/rows.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-40}
# pick prints, for each benchmark, the metrics whose unit matches $1.
pick() {
	awk -v want="$1" '/^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name)
		for (i = 3; i < NF; i++) if ($(i + 1) ~ want) printf "  %-28s %-32s %s\n", name, $(i + 1), $i }'
}
echo "== a decision under 1,000 entries, an Echo call at 1,000 tools (goals 1.2, 1.1)"
go test ./internal/runtime/gateway -run '^$' -bench '^BenchmarkP10EntriesPerCall$' -benchtime "${rounds}x" | pick '1000/10|µs/call'
go test ./internal/runtime/gateway -run '^$' -bench '^BenchmarkEchoPerCallTools$' -benchtime "$((rounds * 4))x" | pick '1000/10|µs/call'
echo "== \\u escapes against the same text unescaped (goal 1.1), forms against lone tool_use lines (Chat: 1.3)"
go test ./internal/runtime/gateway -run '^$' -bench '^BenchmarkServe(Echo|Forms)$' -benchtime "$((rounds * 6))x" | pick '^x:'
echo "== a refusal under 1,000 allow entries against 10 (goal 1.2)"
go test ./internal/core/allow -run '^$' -bench '^BenchmarkP10RefusalLongLists$' -benchtime "${rounds}x" | pick 'refusal'
echo "== Read of a 4 KiB file against os.ReadFile (goal 1.5), Grep against rg and Glob against fd (1.0)"
go test ./internal/exec/builtin -run '^$' -bench '^BenchmarkReadSmall$' -benchtime "$((rounds * 100))x" | pick 'Read'
go test ./internal/exec/builtin -run '^$' -bench '^Benchmark(GrepVsRipgrep|GlobVsFd)$' -benchtime "$(((rounds + 3) / 4))x" | pick '/(rg|fd)-'
echo "== an upstream Echo call through mcp (goal 1.25) and serve (1.12) against a direct go-sdk call; anchors: an SDK-only proxy, a byte relay, mcp with the SDK's server answering"
go test ./cmd/aimon-gw -run '^$' -bench '^BenchmarkUpstreamFrontEnds$' -benchtime "$((rounds * 10))x" | pick '/direct|direct-ns'
echo "== issue 49: mcp --listen's tools/call against the go-sdk's stateful server, one session (goal 1.0)"
go test ./internal/front/httpfront -run '^$' -bench '^BenchmarkListenCall$' -benchtime "${rounds}x" | pick '^x:'
echo "== issue 49: one decision with the gate against Cedar-go without one, 10 and 1,000 entries (goal 1.0)"
(cd bench/cedar && go test -run '^$' -bench '^BenchmarkDecisionVsCedar$' -benchtime "$(((rounds + 1) / 2))x") | pick '^x:|1000/10|µs'
echo "== issue 49: exec to the list of 1,000 tools, --cache off (goal 300 ms); a 500-tool edit to in force, as a process (goal 250 ms)"
go test ./bench/scale -run '^$' -bench '^BenchmarkStartProcess$' -benchtime "$(((rounds + 1) / 2))x" | pick 'ms'
go test ./bench/scale -run '^$' -bench '^BenchmarkReloadProcess$' -benchtime "$(((rounds + 1) / 2))x" | pick 'ms|500/2'
echo "== issue 49: serve's Echo against the stdlib floor, wall and processor time (goal 1.5)"
bench/serve.sh $((rounds * 2500)) 3
