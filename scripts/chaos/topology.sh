# Database topology scenarios of scripts/chaos.sh (sourced by it, not run).
#
#   readonly        the cluster turned read-only (default_transaction_read_only
#                   through ALTER SYSTEM and a reload, as a primary fenced for
#                   a failover looks) for $READONLY_S s, then writable again
#   diskfull        the scenario's database in a tablespace on a small tmpfs
#                   that fills mid-stream; after $DISKFULL_S s it is grown
#   failover        a primary and a synchronous streaming standby; the app's
#                   URL names both with target_session_attrs=read-write; the
#                   standby falls behind (the primary's WAL sender stopped),
#                   the primary's processes are all SIGKILL-ed mid-stream and,
#                   after a gap with no primary at all, the standby is promoted
#   failover_async  the same with an asynchronous standby: what it loses (records
#                   acked on commits the standby never received) is counted in
#                   lost= and tolerated, and the scenario says how far the
#                   standby was behind when the primary died
#
# Each must end with no dead letter but the poison, no consumer rebuild (the
# app's "rebuilding the source" log lines, counted into the scenario's log)
# and resume within $RESUME_LIMIT_S s of the fault's end.
ALL+=(readonly diskfull failover failover_async)

READONLY_S=${READONLY_S:-15}
DISKFULL_S=${DISKFULL_S:-15}

# rebuilds: consumer rebuilds the scenario's apps logged; a store that refuses
# writes is an outage, never a stall, so any is a failure.
rebuilds() { cat "$LOGS/$SCENARIO".*.log 2>/dev/null | grep -c "rebuilding the source" || true; }
check_no_rebuilds() {
  local n
  n=$(rebuilds)
  log "consumer rebuilds: $n"
  ((n == 0)) || UNEXPECTED+=("rebuilds=$n")
}

# admin_sql QUERY: on the suite's cluster as a writable session, whatever the
# cluster's default says.
admin_sql() { PGOPTIONS="-c default_transaction_read_only=off" psql "$PG_ADMIN" -qXtAc "$1"; }

# ---- readonly ----

set_cluster_read_only() {
  admin_sql "ALTER SYSTEM SET default_transaction_read_only = $1" >/dev/null
  admin_sql "SELECT pg_reload_conf()" >/dev/null
}
# stalled_for SECONDS: the executions count did not move over SECONDS.
stalled_for() {
  local before
  before=$(kafka_executions)
  sleep "$1"
  [[ $(kafka_executions) == "$before" ]]
}

drive_readonly() {
  case $1 in
    start)
      kafka_app app HARVEST_INSTANCE_ID=$APP_ID
      CLEANUP_HOOKS+=("set_cluster_read_only off") ;;
    faults)
      local t dead
      sleep "$(rand_s 3 6)"
      log "cluster read-only for ${READONLY_S}s"
      set_cluster_read_only on
      sleep 2
      stalled_for $((READONLY_S - 2)) || { log "executions grew while the database was read-only"; UNEXPECTED+=(writes-while-read-only); }
      dead=$(sql "SELECT count(*) FROM harvest_connector_dead_letters")
      set_cluster_read_only off
      t=$(now)
      log "cluster writable again ($dead dead letters so far)"
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")" ;;
    stop)
      stop_app app
      check_no_rebuilds ;;
  esac
}
scenario_readonly() { kafka_scenario drive_readonly $((READONLY_S + 25)); }

# ---- diskfull ----

DISK_DIR=""
disk_release() {
  [[ -n $DISK_DIR ]] || return 0
  umount -l "$DISK_DIR" 2>/dev/null || true
}
# A database whose tablespace is a tmpfs of its own, sized once the app has
# migrated it so that it fills after a share of the stream.
diskfull_database() {
  local db="chaos_${SCENARIO}_$RANDOM"
  DISK_DIR="$STATE/disk"
  mkdir -p "$DISK_DIR"
  mount -t tmpfs -o size=256m,mode=0755 tmpfs "$DISK_DIR"
  CLEANUP_HOOKS+=(disk_release)
  mkdir "$DISK_DIR/ts"
  chown postgres:postgres "$DISK_DIR/ts"
  psql "$PG_ADMIN" -qXc "CREATE TABLESPACE chaos_disk LOCATION '$DISK_DIR/ts'" >/dev/null
  psql "$PG_ADMIN" -qXc "CREATE DATABASE $db TABLESPACE chaos_disk" >/dev/null
  export HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/$db"
  export HARVEST_PROFILE=dev
}
disk_used_kb() { df -k --output=used "$DISK_DIR" | tail -1 | tr -d ' '; }

drive_diskfull() {
  case $1 in
    start) kafka_app app HARVEST_INSTANCE_ID=$APP_ID ;;
    faults)
      local t used i
      sleep "$(rand_s 2 4)"
      used=$(disk_used_kb)
      # Room for about a quarter of the stream (a record's rows and index
      # entries take about 1 KB there).
      mount -o remount,size=$((used + RECORDS / 4 + 256))k "$DISK_DIR"
      log "tablespace disk shrunk to $((used + RECORDS / 4 + 256)) KiB (${used} KiB used)"
      for ((i = 0; i < 120; i++)); do
        stalled_for 2 && break
      done
      if (($(kafka_executions) >= RECORDS)); then
        log "the disk never filled"
        UNEXPECTED+=(disk-never-full)
      fi
      log "disk full: executions stalled at $(kafka_executions) ($(disk_used_kb) KiB used)"
      sleep "$DISKFULL_S"
      mount -o remount,size=1g "$DISK_DIR"
      t=$(now)
      log "disk grown to 1 GiB"
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")" ;;
    stop)
      stop_app app
      check_no_rebuilds ;;
  esac
}
scenario_diskfull() {
  if [[ $(id -u) -ne 0 ]]; then
    log "needs root to mount a tmpfs"
    LINE="CHAOS scenario=diskfull RESULT=FAIL (not root: cannot mount the small disk)"
    return
  fi
  kafka_scenario drive_diskfull 40 diskfull_database
}

# ---- failover ----

FO_PRIMARY=""
FO_STANDBY=""
failover_stop() {
  [[ -n $FO_PRIMARY ]] && stop_pg "$FO_PRIMARY"
  [[ -n $FO_STANDBY ]] && stop_pg "$FO_STANDBY"
  return 0
}
fo_sql() { psql "postgresql://harvest@127.0.0.1:$1/postgres" -qXtAc "$2" 2>/dev/null || true; }

# failover_pair sync|async: a primary and a streaming standby of it (a fresh
# pair per scenario), the scenario's database created on the primary, and an
# app URL naming both hosts.
failover_pair() {
  local mode=$1 db="chaos_${SCENARIO}_$RANDOM" p1 p2 sync_names="" i
  failover_stop
  FO_PRIMARY="$STATE/$SCENARIO-primary"
  FO_STANDBY="$STATE/$SCENARIO-standby"
  CLEANUP_HOOKS+=(failover_stop)
  p1=$(free_port 27500)
  [[ $mode == sync ]] && sync_names="-c synchronous_standby_names=standby1"
  start_pg "$FO_PRIMARY" "$p1" "-c synchronous_commit=on -c wal_level=replica -c max_wal_senders=5 $sync_names"
  p2=$(free_port $((p1 + 2)))
  mkdir -p "$FO_STANDBY"
  chown postgres:postgres "$FO_STANDBY"
  chmod 700 "$FO_STANDBY"
  as_pg "$(pg_bin pg_basebackup)" -h 127.0.0.1 -p "$p1" -U harvest -D "$FO_STANDBY" -X stream -c fast \
    >>"$LOGS/$SCENARIO.pg.log" 2>&1
  as_pg sh -c "echo \"primary_conninfo = 'host=127.0.0.1 port=$p1 user=harvest application_name=standby1'\" \
    >>'$FO_STANDBY/postgresql.auto.conf' && touch '$FO_STANDBY/standby.signal'"
  start_pg "$FO_STANDBY" "$p2" "-c synchronous_commit=on -c wal_level=replica -c max_wal_senders=5"
  for ((i = 0; i < 100; i++)); do
    [[ $(fo_sql "$p1" "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby1'
                       AND state = 'streaming' AND sync_state = '$mode'") == 1 ]] && break
    sleep 0.2
  done
  ((i < 100)) || { log "the standby did not stream ($mode)"; return 1; }
  fo_sql "$p1" "CREATE DATABASE $db" >/dev/null
  FO_P1=$p1
  FO_P2=$p2
  # libpq tries the hosts in order and keeps the first that takes writes:
  # the primary, or the standby once promoted.
  export HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$p1,127.0.0.1:$p2/$db?target_session_attrs=read-write&connect_timeout=2"
  export HARVEST_PROFILE=dev
  log "primary :$p1, $mode standby :$p2"
}
failover_sync() { failover_pair sync; }
failover_async() { failover_pair async; }

drive_failover() {
  case $1 in
    start) kafka_app app HARVEST_INSTANCE_ID=$APP_ID ;;
    faults)
      local t behind sender pm
      sleep "$(rand_s 4 8)"
      # The standby falls behind first, as one across a slow link does: the
      # primary's WAL sender is stopped for a few seconds, then the primary's
      # host dies (every process of the cluster SIGKILL-ed at once) before
      # it sends what it holds. A synchronous primary cannot commit meanwhile
      # (nothing is acked); an asynchronous one commits, and acks, on.
      sender=$(fo_sql "$FO_P1" "SELECT pid FROM pg_stat_replication LIMIT 1")
      [[ -n $sender ]] && kill -STOP "$sender"
      sleep "$(rand_s 2 4)"
      behind=$(fo_sql "$FO_P1" "SELECT coalesce(sum(pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)), 0)
                                FROM pg_stat_replication")
      pm=$(head -1 "$FO_PRIMARY/postmaster.pid")
      # shellcheck disable=SC2046
      kill -KILL "$pm" $(pgrep -P "$pm") 2>/dev/null || true
      log "primary crashed with the standby $behind bytes of WAL behind"
      sleep "$(rand_s 2 4)"
      as_pg "$(pg_bin pg_ctl)" -D "$FO_STANDBY" -w promote >/dev/null
      t=$(now)
      log "standby promoted"
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")" ;;
    stop)
      stop_app app
      check_no_rebuilds ;;
  esac
}
scenario_failover() { kafka_scenario drive_failover 30 failover_sync; }
scenario_failover_async() {
  LOSS_TOLERATED=1
  kafka_scenario drive_failover 30 failover_async
  LOSS_TOLERATED=0
}
