#!/usr/bin/env bash
# PgBouncer in transaction pooling on 127.0.0.1, in front of a PostgreSQL,
# for harvest tests and benchmarks (Debian's pgbouncer package).
#
#   scripts/services/pgbouncer.sh start   # prints PGBOUNCER_PORT=<port>
#   scripts/services/pgbouncer.sh status  # exit 0 iff a query through it answers
#   scripts/services/pgbouncer.sh stop    # stop and delete the state dir
#
# Every database name is forwarded to the server (a `*` entry), as user
# harvest, so a test's fresh database is reachable through the pooler
# without reconfiguring it.
#
# Env:
#   HARVEST_PGBOUNCER_PORT   listen port (default 16432)
#   HARVEST_PGBOUNCER_DIR    state dir (default /tmp/harvest-pgbouncer-$PORT)
#   HARVEST_PG_PORT          the PostgreSQL port it forwards to (required)
#   HARVEST_PGBOUNCER_POOL   server connections per database (default 20)
#   HARVEST_SERVICE_TIMEOUT  readiness deadline in seconds (default 30)
set -euo pipefail

SVC_NAME=pgbouncer
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

PORT="${HARVEST_PGBOUNCER_PORT:-16432}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "HARVEST_PGBOUNCER_PORT must be a number, got '$PORT'"
STATE_DIR="${HARVEST_PGBOUNCER_DIR:-/tmp/harvest-pgbouncer-$PORT}"
TIMEOUT="${HARVEST_SERVICE_TIMEOUT:-30}"
POOL="${HARVEST_PGBOUNCER_POOL:-20}"
MARKER=.harvest-pgbouncer
PIDFILE="$STATE_DIR/pgbouncer.pid"
LOGFILE="$STATE_DIR/pgbouncer.log"

ready() {
  psql -X -q -At "postgresql://harvest@127.0.0.1:$PORT/postgres" -c "SELECT 1" >/dev/null 2>&1
}

wait_ready() {
  local deadline=$(( $(now_s) + TIMEOUT ))
  until ready; do
    pid_alive "$PIDFILE" || { tail -20 "$LOGFILE" >&2 || true; die "pgbouncer exited; log above"; }
    (( $(now_s) < deadline )) || { tail -20 "$LOGFILE" >&2 || true; die "not ready after ${TIMEOUT}s"; }
    sleep 0.2
  done
}

cmd_start() {
  local t0=$EPOCHREALTIME
  need_cmd pgbouncer "scripts/setup.sh installs it"
  [[ -n "${HARVEST_PG_PORT:-}" ]] || die "HARVEST_PG_PORT (the PostgreSQL to forward to) is required"
  if pid_alive "$PIDFILE"; then
    log "already running (pid $(<"$PIDFILE"))"
    wait_ready
    echo "PGBOUNCER_PORT=$PORT"
    return 0
  fi
  port_open "$PORT" && die "port $PORT is already in use; set HARVEST_PGBOUNCER_PORT"
  safe_rm_state "$STATE_DIR" "$MARKER"
  mkdir -p "$STATE_DIR"
  touch "$STATE_DIR/$MARKER"
  # auth_type any: the pooler logs in as the user its database entry names
  # (the test cluster trusts local connections); nothing here is a secret.
  cat >"$STATE_DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$HARVEST_PG_PORT user=harvest

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 2000
max_db_connections = 0
server_reset_query =
# A query waits this long for a server connection before it fails (the
# default, 120 s, would hold every caller that long through a database
# outage): harvest sees an outage within seconds (docs/operations.md).
query_wait_timeout = 5
# After a failed login to the server (the database restarting), PgBouncer
# waits this long before it tries again; its default, 15 s, holds every
# client that long after the database is back (docs/operations.md).
server_login_retry = 1
ignore_startup_parameters = extra_float_digits,options
logfile = $LOGFILE
pidfile = $PIDFILE
log_connections = 0
log_disconnections = 0
INI
  [[ $(id -u) -eq 0 ]] && chown -R postgres:postgres "$STATE_DIR"
  log "starting pgbouncer (transaction pooling) on 127.0.0.1:$PORT -> PostgreSQL :$HARVEST_PG_PORT"
  # as_pg: pgbouncer, like PostgreSQL, refuses to run as root.
  as_pg pgbouncer -d "$STATE_DIR/pgbouncer.ini" >/dev/null 2>&1 \
    || { tail -20 "$LOGFILE" >&2 || true; die "pgbouncer did not start"; }
  wait_ready
  log "ready in $(since "$t0")s (pid $(<"$PIDFILE"))"
  echo "PGBOUNCER_PORT=$PORT"
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
    log "running (pid $(<"$PIDFILE")) on 127.0.0.1:$PORT"
    echo "PGBOUNCER_PORT=$PORT"
    return 0
  fi
  log "not running or not answering"
  return 1
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) die "usage: $0 start|stop|status" ;;
esac
