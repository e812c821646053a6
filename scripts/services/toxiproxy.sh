#!/usr/bin/env bash
# Toxiproxy (Shopify's TCP fault proxy) on 127.0.0.1, for network-fault tests:
# put a proxy between harvest and PostgreSQL or a Kafka broker, then add
# latency, bandwidth limits, resets or a blackhole through its HTTP API.
#
#   scripts/services/toxiproxy.sh start     # prints TOXIPROXY_URL=http://127.0.0.1:<port>
#   scripts/services/toxiproxy.sh status    # exit 0 iff the API answers
#   scripts/services/toxiproxy.sh stop      # stop and delete the state dir
#   scripts/services/toxiproxy.sh proxy NAME LISTEN_PORT UPSTREAM_HOST:PORT
#                                           # create (or replace) a proxy on 127.0.0.1:LISTEN_PORT
#   scripts/services/toxiproxy.sh toxic NAME TYPE [STREAM] [key=value...]
#                                           # add a toxic, e.g. `toxic pg latency latency=200 jitter=50`;
#                                           # STREAM is upstream|downstream|both (default both:
#                                           # two toxics, TYPE_up and TYPE_down)
#   scripts/services/toxiproxy.sh untoxic NAME TOXIC_NAME   # remove one toxic
#   scripts/services/toxiproxy.sh clear NAME                # remove every toxic of a proxy
#   scripts/services/toxiproxy.sh enable|disable NAME       # disable drops its connections (RST/FIN)
#   scripts/services/toxiproxy.sh list                      # proxies and toxics, as JSON
#
# Toxic types of v2 (attributes; times in ms, rate in KB/s): latency (latency,
# jitter), bandwidth (rate), slow_close (delay), timeout (timeout; 0 = hold
# and drop data until removed: a blackhole), reset_peer (timeout: RST after),
# slicer (average_size, size_variation, delay), limit_data (bytes).
# Every helper also reads an optional toxicity=0..1 (default 1).
#
# Env:
#   HARVEST_TOXIPROXY_PORT     API port (default 8474)
#   HARVEST_TOXIPROXY_DIR      state dir (default /tmp/harvest-toxiproxy-$PORT)
#   HARVEST_TOXIPROXY_VERSION  Go module version (default v2.12.0)
#   HARVEST_CACHE_DIR          binary cache (default ~/.cache/harvest) -> toxiproxy-<version>/bin
#   HARVEST_SERVICE_TIMEOUT    readiness deadline in seconds (default 30)
set -euo pipefail

SVC_NAME=toxiproxy
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

PORT="${HARVEST_TOXIPROXY_PORT:-8474}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "HARVEST_TOXIPROXY_PORT must be a number, got '$PORT'"
VERSION="${HARVEST_TOXIPROXY_VERSION:-v2.12.0}"
STATE_DIR="${HARVEST_TOXIPROXY_DIR:-/tmp/harvest-toxiproxy-$PORT}"
TIMEOUT="${HARVEST_SERVICE_TIMEOUT:-30}"
URL="http://127.0.0.1:$PORT"
BIN_DIR="$HARVEST_CACHE_DIR/toxiproxy-$VERSION/bin"
SERVER="$BIN_DIR/server"  # `go install .../cmd/server` names the binary after its package dir
MARKER=.harvest-toxiproxy
PIDFILE="$STATE_DIR/toxiproxy.pid"
LOGFILE="$STATE_DIR/toxiproxy.log"

# ensure_server: the pinned toxiproxy-server, built once from the Go module
# proxy into the cache; a cached binary never touches the network.
ensure_server() {
  [[ -x "$SERVER" && -f "$BIN_DIR/.complete" ]] && return 0
  need_cmd go "install Go (>= 1.22) to build toxiproxy-server from the Go module proxy"
  mkdir -p "$BIN_DIR"
  (
    exec 9>"$BIN_DIR/.lock" || exit 1
    flock 9 || exit 1
    [[ -x "$SERVER" && -f "$BIN_DIR/.complete" ]] && exit 0
    log "go install github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION -> $BIN_DIR (log: $BIN_DIR/install.log)"
    # GOFLAGS cleared: a caller's -mod=vendor or similar must not leak in.
    GOBIN="$BIN_DIR" GOFLAGS= go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION" \
      >"$BIN_DIR/install.log" 2>&1 || { tail -n 5 "$BIN_DIR/install.log" >&2; exit 1; }
    touch "$BIN_DIR/.complete"
  ) || die "could not install toxiproxy-server $VERSION"
}

need_curl() { need_cmd curl "apt-get install -y curl"; }

# api METHOD PATH [JSON]: one API call; prints the body, fails on HTTP >= 400.
api() {
  local method=$1 path=$2 body=${3:-} out code
  out=$(curl -sS --max-time 10 -X "$method" -H 'Content-Type: application/json' \
    ${body:+--data "$body"} -w '\n%{http_code}' "$URL$path") || die "$method $path: toxiproxy API unreachable at $URL"
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  ((code < 400)) || die "$method $path -> HTTP $code: $out"
  printf '%s' "$out"
}

ready() { curl -sf --max-time 2 "$URL/version" >/dev/null 2>&1; }

wait_ready() {
  local deadline=$(( $(now_s) + TIMEOUT ))
  until ready; do
    pid_alive "$PIDFILE" || { tail -n 20 "$LOGFILE" >&2 || true; die "toxiproxy-server exited; log above"; }
    (( $(now_s) < deadline )) || { tail -n 20 "$LOGFILE" >&2 || true; die "not ready on $URL after ${TIMEOUT}s"; }
    sleep 0.2
  done
}

cmd_start() {
  local t0=$EPOCHREALTIME
  need_curl
  if pid_alive "$PIDFILE"; then
    log "already running (pid $(<"$PIDFILE"))"
    wait_ready
    echo "TOXIPROXY_URL=$URL"
    return 0
  fi
  port_open "$PORT" && die "port $PORT on 127.0.0.1 is already in use by a process this script did not start; set HARVEST_TOXIPROXY_PORT"
  ensure_server
  safe_rm_state "$STATE_DIR" "$MARKER"
  mkdir -p "$STATE_DIR"
  touch "$STATE_DIR/$MARKER"
  log "starting toxiproxy-server $VERSION on $URL, log $LOGFILE"
  # setsid: own session, so it survives the caller's process group being killed.
  setsid nohup "$SERVER" -host 127.0.0.1 -port "$PORT" >>"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_ready
  log "ready in $(since "$t0")s (pid $(<"$PIDFILE"))"
  echo "TOXIPROXY_URL=$URL"
}

cmd_stop() {
  if pid_alive "$PIDFILE"; then
    stop_pidfile "$PIDFILE" 10
    log "stopped"
  else
    log "not running"
  fi
  safe_rm_state "$STATE_DIR" "$MARKER"
}

cmd_status() {
  if pid_alive "$PIDFILE" && ready; then
    log "running (pid $(<"$PIDFILE")) on $URL"
    echo "TOXIPROXY_URL=$URL"
    return 0
  fi
  log "not running or not answering"
  return 1
}

# proxy NAME LISTEN_PORT UPSTREAM: replaces any proxy of that name.
cmd_proxy() {
  local name=${1:-} listen=${2:-} upstream=${3:-}
  [[ -n $name && $listen =~ ^[0-9]+$ && -n $upstream ]] || die "usage: $0 proxy NAME LISTEN_PORT UPSTREAM_HOST:PORT"
  need_curl
  curl -s --max-time 10 -X DELETE "$URL/proxies/$name" >/dev/null 2>&1 || true
  api POST /proxies "{\"name\":\"$name\",\"listen\":\"127.0.0.1:$listen\",\"upstream\":\"$upstream\",\"enabled\":true}" >/dev/null
  log "proxy $name: 127.0.0.1:$listen -> $upstream"
}

# toxic NAME TYPE [upstream|downstream|both] [key=value...]: numeric values
# go in as JSON numbers; toxicity=X sets the toxic's probability.
cmd_toxic() {
  local name=${1:-} type=${2:-} streams=both toxicity=1 attrs="" kv k v s toxic
  [[ -n $name && -n $type ]] || die "usage: $0 toxic NAME TYPE [upstream|downstream|both] [key=value...]"
  shift 2
  if [[ ${1:-} =~ ^(upstream|downstream|both)$ ]]; then streams=$1; shift; fi
  for kv in "$@"; do
    [[ $kv == *=* ]] || die "toxic attribute '$kv' is not key=value"
    k=${kv%%=*}; v=${kv#*=}
    if [[ $k == toxicity ]]; then toxicity=$v; continue; fi
    [[ $v =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || v="\"$v\""
    attrs+="${attrs:+,}\"$k\":$v"
  done
  [[ $streams == both ]] && streams="upstream downstream"
  need_curl
  for s in $streams; do
    toxic="${type}_${s%stream}"  # latency_up, latency_down
    api POST "/proxies/$name/toxics" \
      "{\"name\":\"$toxic\",\"type\":\"$type\",\"stream\":\"$s\",\"toxicity\":$toxicity,\"attributes\":{$attrs}}" >/dev/null
    log "proxy $name: +$toxic {$attrs}"
  done
}

cmd_untoxic() {
  [[ -n ${1:-} && -n ${2:-} ]] || die "usage: $0 untoxic NAME TOXIC_NAME"
  need_curl
  api DELETE "/proxies/$1/toxics/$2" >/dev/null
  log "proxy $1: -$2"
}

# clear NAME: removes every toxic of the proxy (and leaves it enabled).
cmd_clear() {
  local name=${1:-} t
  [[ -n $name ]] || die "usage: $0 clear NAME"
  need_curl
  for t in $(api GET "/proxies/$name/toxics" | grep -o '"name":"[^"]*"' | sed 's/"name":"\(.*\)"/\1/'); do
    api DELETE "/proxies/$name/toxics/$t" >/dev/null
  done
  log "proxy $name: toxics cleared"
}

cmd_enabled() {
  [[ -n ${2:-} ]] || die "usage: $0 enable|disable NAME"
  need_curl
  api POST "/proxies/$2" "{\"enabled\":$1}" >/dev/null
  log "proxy $2: enabled=$1"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  install) ensure_server; echo "TOXIPROXY_SERVER=$SERVER" ;;
  proxy) shift; cmd_proxy "$@" ;;
  toxic) shift; cmd_toxic "$@" ;;
  untoxic) shift; cmd_untoxic "$@" ;;
  clear) shift; cmd_clear "$@" ;;
  enable) cmd_enabled true "${2:-}" ;;
  disable) cmd_enabled false "${2:-}" ;;
  list) need_curl; api GET /proxies; echo ;;
  *) die "usage: $0 start|stop|status|install|proxy NAME LISTEN UPSTREAM|toxic NAME TYPE [STREAM] [k=v...]|untoxic NAME TOXIC|clear NAME|enable NAME|disable NAME|list" ;;
esac
