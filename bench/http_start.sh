#!/usr/bin/env bash
# Start requests/s through the HTTP API: wrk with 16 keep-alive connections
# against bench_http_start_server, unkeyed and keyed (a fresh key per request).
#   HARVEST_DATABASE_URL=postgresql://… bench/http_start.sh <build-dir> [seconds=10]
set -euo pipefail
build="${1:?build dir}" secs="${2:-10}"
command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null; }
port="${HARVEST_HTTP_PORT:-8089}"
HARVEST_HTTP_PORT="$port" HARVEST_LOG_LEVEL=warn "$build/bench/bench_http_start_server" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
script="$(mktemp)"
for mode in unkeyed keyed; do
  cat >"$script" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
  n = n + 1
  local key = ""
  if "$mode" == "keyed" then key = string.format(',"idempotency_key":"k-%d-%d-%d"', os.time(), math.random(1e9), n) end
  return wrk.format(nil, nil, nil, '{"input":{"pad":"' .. string.rep("x", 200) .. '"}' .. key .. '}')
end
LUA
  echo "== $mode"
  wrk -t2 -c16 -d"${secs}s" --latency -s "$script" "http://127.0.0.1:$port/api/harvest/workflows/bench/start" |
    grep -E 'Requests/sec|50%|99%|Non-2xx' || true
done
rm -f "$script"
