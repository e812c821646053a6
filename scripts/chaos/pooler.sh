# The pooler scenario of scripts/chaos.sh (sourced by it, not run).
#
#   pooler   the Kafka quickstart reaching PostgreSQL through PgBouncer in
#            transaction pooling (HARVEST_DATABASE_POOLER=transaction, LISTEN
#            on the direct URL, as a deployment behind a pooler runs it);
#            while records flow: the pooler kill -9-ed and restarted, then
#            PostgreSQL crashed behind the running pooler
#            (pg_ctl -m immediate stop) and restarted, then the app kill
#            -9-ed and restarted
#
# Each fault's resume (new executions committed again) counts towards
# resume_max_s; the scenario passes as the others do: 0 lost, 0 duplicated,
# only the poison dead-lettered, nothing owed to the broker.
ALL+=(pooler)

BOUNCER_PORT=""
BOUNCER_DIR=""

bouncer() {
  HARVEST_PG_PORT=$PG_PORT HARVEST_PGBOUNCER_PORT=$BOUNCER_PORT HARVEST_PGBOUNCER_DIR=$BOUNCER_DIR \
    scripts/services/pgbouncer.sh "$1" 2>>"$LOGS/pgbouncer-service.log"
}
bouncer_kill9() {
  local pid
  pid=$(cat "$BOUNCER_DIR/pgbouncer.pid" 2>/dev/null || true)
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  # Gone, and its port free again, before it is started anew.
  while [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

# pooled_database: a fresh database, reached by the app through the pooler;
# the scenario's own checks (sql) stay on the direct URL.
pooled_database() {
  fresh_database
  if [[ -z $BOUNCER_PORT ]]; then
    BOUNCER_PORT=$(free_port 27632)
    BOUNCER_DIR="$STATE/pgbouncer"
    bouncer start >/dev/null
    CLEANUP_HOOKS+=("bouncer stop")
  fi
  POOLED_URL="postgresql://harvest@127.0.0.1:$BOUNCER_PORT/${HARVEST_DATABASE_URL##*/}"
  log "the app reaches PostgreSQL through PgBouncer on 127.0.0.1:$BOUNCER_PORT"
}

pooled_app() {
  kafka_app app HARVEST_INSTANCE_ID=$APP_ID HARVEST_DATABASE_URL="$POOLED_URL" \
    HARVEST_DATABASE_POOLER=transaction HARVEST_LISTEN_URLS="$HARVEST_DATABASE_URL"
}

drive_pooler() {
  case $1 in
    start) pooled_app ;;
    faults)
      local t
      sleep "$(rand_s 2 5)"
      log "PgBouncer kill -9"
      bouncer_kill9
      sleep "$(rand_s 1 3)"
      bouncer start >/dev/null
      t=$(now)
      log "PgBouncer back"
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"

      sleep "$(rand_s 2 5)"
      pg_crash "PostgreSQL crash behind the pooler"

      sleep "$(rand_s 2 4)"
      kill9_app app
      log "app kill -9"
      sleep "$(rand_s 0 1.5)"
      pooled_app
      t=$(now)
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")" ;;
    stop) stop_app app ;;
  esac
}
scenario_pooler() { kafka_scenario drive_pooler 35 pooled_database; }
