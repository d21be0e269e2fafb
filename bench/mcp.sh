#!/usr/bin/env bash
# Measures what aimon-gw adds to an Echo call on the MCP path Codex and
# Gemini CLI drive, over stdio and over streamable HTTP, beside a bare
# go-sdk server on each, in interleaved rounds (bench/mcp; issue 43).
# Usage: bench/mcp.sh [-calls N] [-rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/aimon-gw" ./cmd/aimon-gw
go build -o "$tmp/bench-mcp" ./bench/mcp
"$tmp/bench-mcp" -gw "$tmp/aimon-gw" "$@"
