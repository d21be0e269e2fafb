#!/usr/bin/env bash
# Measures the shared gateway over HTTP (issue 30): Echo through HAProxy to
# one and three replicas of aimon-gw mcp --listen beside the go-sdk's own
# server, the same under a limit counted in Redis (issue 45), and the HTTP
# hook beside the command hook. Needs haproxy and redis-server.
# Usage: bench/http/run.sh [-calls N] [-workers N] [-hooks N]
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./bench/http "$@"
