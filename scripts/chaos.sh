#!/usr/bin/env bash
# The chaos suite (issue 14): the quickstart apps, unmodified, under faults
# while records arrive, against a private PostgreSQL, Kafka broker and SQS
# server this script starts and stops itself. Each scenario ends with one line
#   CHAOS scenario=<name> records=<n> executions=<n> duplicates=<n> lost=<n> dead_letters=<n> resume_max_s=<x> RESULT=PASS|FAIL
# counted from the stores themselves (executions in PostgreSQL, the group's
# committed offsets on the broker, the SQS queues' depths).
#
#   scripts/chaos.sh [scenario...] [--seed S] [--bin DIR]
#
# Scenarios (default: all):
#   kill      the Kafka quickstart kill -9-ed $KILLS times at random points, restarted each time
#   broker    the Kafka broker stopped (SIGTERM) and later crashed (SIGKILL), restarted each time
#   database  PostgreSQL crashed (pg_ctl -m immediate stop) twice and restarted
#   pause     the app SIGSTOP-ed for $PAUSE_S s (past its 30 s run leases and the
#             group's 10 s session timeout), then SIGCONT
#   replicas  three apps in one consumer group: scaled 1 -> 3, one kill -9-ed, one
#             added, then scaled down to 1 (SIGTERM) while records flow
#   sqs       the SQS quickstart kill -9-ed $SQS_KILLS times, then SIGSTOP-ed past the
#             queue's 60 s visibility timeout (redelivery), then SIGCONT
#   all       every scenario: these and those of scripts/chaos/
#
# Every scenario mixes $POISON undecodable records in; they must end as exactly
# $POISON dead letters (harvest_connector_dead_letters for Kafka, the redrive
# DLQ for SQS). PASS: duplicates=0, lost=0, dead_letters=$POISON, every run
# completed, nothing left on the broker, no app exiting on its own, and
# resume_max_s <= $RESUME_LIMIT_S (the time from a fault's end until new
# executions, or signals for SQS, are committed again; max over the faults).
#
# More scenarios live in scripts/chaos/: sqs.sh, topology.sh (readonly,
# diskfull, failover, failover_async), pooler.sh (pooler), network.sh
# (net_latency, net_bandwidth, net_reset, net_blackhole, net_commit_reset,
# net_drop), clock.sh, cluster.sh; each file's header
# says what its scenarios do.
#
# The seed (printed as `CHAOS seed=<s>`) fixes every random choice: kill and
# fault times, down times, where the poison sits. Each scenario draws from
# seed + an offset of its own (seed_offset), so `scripts/chaos.sh kill --seed S`
# replays the kill schedule of `scripts/chaos.sh all --seed S`.
#
# Env: RECORDS (Kafka records per scenario, default 10000), KILLS (default 10),
#      SQS_RECORDS (default RECORDS/5), SQS_KILLS (default 3), POISON (default 5),
#      PAUSE_S (default 50), SQS_PAUSE_S (default 65), RESUME_LIMIT_S (default 10).
# --bin DIR: use the example binaries in DIR (kafka_connector_quickstart,
#      kafka_orders_tool, sqs_connector_quickstart) instead of building
#      build/chaos (the ctest variant passes the dev build's).
# Exits non-zero if any scenario fails; its logs are kept and their path printed.
set -Eeuo pipefail
# A failing command aborts the run (set -e): say which one, and keep the logs.
trap 'rc=$?; FAILED=1; echo "chaos: aborted in ${SCENARIO:-setup}: \"$BASH_COMMAND\" failed (exit $rc)" >&2' ERR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"

ALL=(kill broker database pause replicas sqs)
# Each file in scripts/chaos/ defines scenario_<name> for its scenarios (each
# ending with finish_line) and appends the new names to ALL, after the ones
# above, so no scenario's seed position ever moves.
for f in "$HARVEST_ROOT"/scripts/chaos/*.sh; do
  # shellcheck source=/dev/null
  source "$f"
done
SCENARIOS=()
SEED=""
BIN=""
while (($#)); do
  case "$1" in
    --seed) SEED=${2:?--seed needs a value}; shift 2 ;;
    --seed=*) SEED=${1#--seed=}; shift ;;
    --bin) BIN=${2:?--bin needs a directory}; shift 2 ;;
    all) SCENARIOS+=("${ALL[@]}"); shift ;;
    *)
      [[ " ${ALL[*]} " == *" $1 "* ]] && { SCENARIOS+=("$1"); shift; continue; }
      echo "chaos: unknown argument '$1' (scenarios: ${ALL[*]} all; --seed S; --bin DIR)" >&2; exit 2 ;;
  esac
done
((${#SCENARIOS[@]})) || SCENARIOS=("${ALL[@]}")
[[ -z $SEED ]] && SEED=$(((RANDOM << 15) | RANDOM))
[[ $SEED =~ ^[0-9]+$ ]] || { echo "chaos: --seed must be a number" >&2; exit 2; }

RECORDS=${RECORDS:-10000}
KILLS=${KILLS:-10}
SQS_RECORDS=${SQS_RECORDS:-$((RECORDS / 5))}
SQS_KILLS=${SQS_KILLS:-3}
POISON=${POISON:-5}
PAUSE_S=${PAUSE_S:-50}
SQS_PAUSE_S=${SQS_PAUSE_S:-65}
RESUME_LIMIT_S=${RESUME_LIMIT_S:-10}
echo "CHAOS seed=$SEED"

# ---- the binaries ----
if [[ -z $BIN ]]; then
  scripts/setup.sh
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
  export CCACHE_BASEDIR="$HARVEST_ROOT"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  cmake -S . -B build/chaos -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHARVEST_TESTS=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build build/chaos -j2 --target kafka_connector_quickstart kafka_orders_tool sqs_connector_quickstart
  BIN=build/chaos/examples
fi
BIN=$(cd "$BIN" && pwd)
for b in kafka_connector_quickstart kafka_orders_tool sqs_connector_quickstart; do
  [[ -x $BIN/$b ]] || { echo "chaos: $BIN/$b is missing" >&2; exit 1; }
done

# ---- private services, and every process this script starts ----
STATE="$(mktemp -d /tmp/harvest-chaos.XXXXXX)"
chmod 755 "$STATE"
PG_DIR="$STATE/pg"
LOGS="$STATE/logs"
mkdir -p "$LOGS"
export HARVEST_KAFKA_DIR="$STATE/kafka" HARVEST_SQS_DIR="$STATE/sqs"
# A broker restarted mid-run on a loaded 2-core box can take longer than a
# service's usual readiness deadline; a slow restart is not a finding.
export HARVEST_SERVICE_TIMEOUT="${HARVEST_SERVICE_TIMEOUT:-180}"
KAFKA_UP=0
SQS_UP=0
declare -A APPS=()  # name -> pid of a live app started here
BG_PIDS=()          # producers started here
FAILED=0
CLEANUP_HOOKS=()  # commands a scenario file adds to stop what it started
LOSS_TOLERATED=0

cleanup() {
  local name pid hook
  for name in "${!APPS[@]}"; do
    pid=${APPS[$name]}
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${BG_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  ((KAFKA_UP)) && scripts/services/kafka.sh stop >/dev/null 2>&1 || true
  ((SQS_UP)) && scripts/services/sqs.sh stop >/dev/null 2>&1 || true
  for hook in "${CLEANUP_HOOKS[@]}"; do $hook >/dev/null 2>&1 || true; done
  stop_pg "$PG_DIR"
  if ((FAILED)); then
    local keep="/tmp/harvest-chaos-logs.$SEED.$$"
    mv "$LOGS" "$keep" && echo "chaos: logs of the failed run kept in $keep" >&2
  fi
  rm -rf "$STATE"
}
trap cleanup EXIT

log() { echo "chaos[$SCENARIO]: $*" >&2; }
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# rand_s LO HI: a seeded random duration in seconds, one decimal.
rand_s() { awk -v lo="$1" -v hi="$2" -v r="$RANDOM" 'BEGIN { printf "%.1f", lo + (hi - lo) * r / 32767 }'; }
max_of() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }

PG_PORT="$(free_port 27432)"
# The suite crashes PostgreSQL's processes, not the machine: a commit harvest
# acknowledged must survive that, which takes synchronous_commit=on (with it
# off, an immediate stop forgets the last commits still in WAL buffers, and
# their records, already acked, look lost). fsync and full_page_writes only
# guard against an OS crash, which the suite does not inject, and stay off.
PG_SETTINGS="-c synchronous_commit=on"
start_pg "$PG_DIR" "$PG_PORT" "$PG_SETTINGS"
PG_ADMIN="postgresql://harvest@127.0.0.1:$PG_PORT/postgres"
echo "chaos: PostgreSQL on 127.0.0.1:$PG_PORT, logs in $LOGS" >&2

# sql QUERY: one value from the scenario's database; empty while it is down.
sql() { psql "$HARVEST_DATABASE_URL" -qXtAc "$1" 2>/dev/null || true; }

fresh_database() {
  local db="chaos_${SCENARIO}_$RANDOM"
  psql "$PG_ADMIN" -qXc "CREATE DATABASE $db" >/dev/null
  export HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/$db"
  export HARVEST_PROFILE=dev
}

# A fresh broker per Kafka scenario: the quickstart's topic and group names
# are fixed, and a static member left behind by one scenario would hold
# partitions of the next for a session timeout.
fresh_broker() {
  if ((KAFKA_UP)); then scripts/services/kafka.sh stop >/dev/null 2>&1; fi
  HARVEST_KAFKA_PORT="$(free_port 27092)"
  export HARVEST_KAFKA_PORT
  KAFKA_UP=1
  eval "$(scripts/services/kafka.sh start 2>>"$LOGS/kafka-service.log")"
  export KAFKA_BOOTSTRAP
  "$BIN/kafka_orders_tool" topic >>"$LOGS/kafka-service.log" 2>&1
}

ensure_sqs() {
  ((SQS_UP)) && return 0
  HARVEST_SQS_PORT="$(free_port 27324)"
  export HARVEST_SQS_PORT
  SQS_UP=1
  eval "$(scripts/services/sqs.sh start 2>>"$LOGS/sqs-service.log")"
  export AWS_ENDPOINT_URL_SQS="$SQS_ENDPOINT"
}

# start_app NAME [VAR=value...] -- COMMAND...: an app process, logged to NAME.log.
start_app() {
  local name=$1
  shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  # Port 0: the app's API binds a port the kernel picks. A port chosen here
  # could be taken before the app binds it (the probe sees listeners only,
  # not another process's outgoing connection on that local port), and the
  # app then exits "Address already in use": a kill with no resume.
  env "${envs[@]}" HARVEST_HTTP_PORT=0 "$@" >>"$LOGS/$SCENARIO.$name.log" 2>&1 &
  APPS[$name]=$!
}

kill9_app() {
  local pid=${APPS[$1]}
  kill -0 "$pid" 2>/dev/null || { log "app $1 (pid $pid) had already exited"; UNEXPECTED+=("$1"); }
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "APPS[$1]"
}

# stop_app NAME: SIGTERM, the app must exit 0 within 60 s.
stop_app() {
  local pid=${APPS[$1]} rc=0 i
  if ! kill -0 "$pid" 2>/dev/null; then
    log "app $1 (pid $pid) had exited on its own"
    UNEXPECTED+=("$1")
  else
    kill -TERM "$pid"
    for ((i = 0; i < 600; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "app $1 did not exit 60 s after SIGTERM"
      kill -KILL "$pid" 2>/dev/null || true
      UNEXPECTED+=("$1")
    fi
  fi
  wait "$pid" 2>/dev/null || rc=$?
  if ((rc != 0)); then
    log "app $1 exited with status $rc"
    UNEXPECTED+=("$1")
  fi
  unset "APPS[$1]"
}

# Apps that died by themselves (or exited non-zero on SIGTERM) fail the scenario.
check_alive() {
  local name
  for name in "${!APPS[@]}"; do
    kill -0 "${APPS[$name]}" 2>/dev/null && continue
    log "app $name (pid ${APPS[$name]}) exited on its own"
    UNEXPECTED+=("$name")
    wait "${APPS[$name]}" 2>/dev/null || true
    unset "APPS[$name]"
  done
}

# await_progress T0 COUNT_FN TARGET: seconds from T0 (a fault's end) until
# COUNT_FN's value grows, or reaches TARGET (nothing left to do); 999 after 120 s.
await_progress() {
  local t0=$1 fn=$2 target=$3 c0 c i
  c0=""
  for ((i = 0; i < 1200; i++)); do
    c=$($fn)
    if [[ -n $c ]]; then
      if [[ -z $c0 ]]; then
        c0=$c
        ((c0 >= target)) && { elapsed "$t0"; return; }
      elif ((c > c0 || c >= target)); then
        elapsed "$t0"
        return
      fi
    fi
    check_alive
    sleep 0.1
  done
  echo 999
}
note_resume() {
  RESUME_MAX=$(max_of "$RESUME_MAX" "$1")
  log "progress resumed ${1}s after the fault ended"
}

# ---- Kafka ----

# kafka_records FILE PREFIX N: N orders PREFIX-000001.. with $POISON
# undecodable records at seeded positions, as key<TAB>value lines for `kafka_orders_tool send`.
kafka_records() {
  local file=$1 prefix=$2 n=$3 positions="" i
  for ((i = 0; i < POISON; i++)); do positions+="$((RANDOM * 32768 + RANDOM)) "; done
  awk -v n="$n" -v prefix="$prefix" -v pos="$positions" 'BEGIN {
    split(pos, p, " ")
    for (i in p) poison[(p[i] % n) + 1]++
    for (i = 1; i <= n; i++) {
      for (j = 0; j < poison[i]; j++) { k++; printf "poison-%s-%d\tthis is not JSON %d\n", prefix, k, k }
      id = sprintf("%s-%06d", prefix, i)
      printf "%s\t{\"order_id\":\"%s\",\"total_cents\":%d}\n", id, id, 1000 + i
    }
  }' >"$file"
}

# kafka_produce FILE SECONDS: streams FILE to orders.placed over about SECONDS,
# in the background (PRODUCER). Idempotent producer, long delivery timeout:
# a broker outage delays records, never duplicates or drops them.
kafka_produce() {
  local file=$1 secs=$2 lines ticks per dir
  lines=$(wc -l <"$file")
  ticks=$((secs * 10))
  per=$(((lines + ticks - 1) / ticks))
  dir="$STATE/chunks.$SCENARIO"
  mkdir -p "$dir"
  split -l "$per" -a 5 "$file" "$dir/c."
  (
    for f in "$dir"/c.*; do
      cat "$f"
      sleep 0.1
    done | KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" "$BIN/kafka_orders_tool" send 2>>"$LOGS/$SCENARIO.producer.log"
  ) &
  PRODUCER=$!
  BG_PIDS+=("$PRODUCER")
}

kafka_executions() { sql "SELECT count(*) FROM harvest_workflow_executions"; }
kafka_lag() { env -u HARVEST_INSTANCE_ID "$BIN/kafka_orders_tool" lag 2>/dev/null || true; }

kafka_settled() {
  { ((LOSS_TOLERATED)) ||
    [[ $(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'") == "$RECORDS" ]]; } &&
    [[ $(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status <> 'completed'") == 0 ]] &&
    [[ $(sql "SELECT count(*) FROM harvest_connector_dead_letters") -ge $POISON ]] &&
    [[ $(kafka_lag) == 0 ]]
}

# wait_settled FN SECONDS: polls FN until it holds or SECONDS pass.
wait_settled() {
  local fn=$1 secs=$2 i
  for ((i = 0; i < secs * 2; i++)); do
    $fn && return 0
    check_alive
    sleep 0.5
  done
  return 1
}

# kafka_verify: the CHAOS line from PostgreSQL and the broker.
kafka_verify() {
  local executions distinct good not_completed dead lag dup lost result=PASS
  executions=$(sql "SELECT count(*) FROM harvest_workflow_executions")
  distinct=$(sql "SELECT count(DISTINCT input->>'order_id') FROM harvest_workflow_executions")
  good=$(sql "SELECT count(DISTINCT input->>'order_id') FROM harvest_workflow_executions
              WHERE input->>'order_id' ~ '^$SCENARIO-[0-9]{6}$'
                AND (input->>'order_id')::text <= '$SCENARIO-$(printf %06d "$RECORDS")'")
  not_completed=$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status <> 'completed'
                       OR output IS DISTINCT FROM to_jsonb('fulfilled ' || (input->>'order_id'))")
  dead=$(sql "SELECT count(*) FROM harvest_connector_dead_letters")
  lag=$(kafka_lag)
  dup=$((executions - distinct))
  lost=$((RECORDS - good))
  local dead_lost=0
  if ((LOSS_TOLERATED)); then
    # A scenario that counts what it is known to lose (an asynchronous
    # standby's failover): orders and dead letters lost are counted in lost=,
    # and only duplicates, extra dead letters or a stray execution fail it.
    ((dead < POISON)) && dead_lost=$((POISON - dead)) && lost=$((lost + dead_lost))
    ((good == distinct)) || result=FAIL
  fi
  ((dup == 0 && dead + dead_lost == POISON)) || result=FAIL
  ((lost == 0 && distinct == RECORDS)) || ((LOSS_TOLERATED)) || result=FAIL
  [[ $not_completed == 0 ]] || { log "$not_completed runs not completed with the expected output"; result=FAIL; }
  [[ $lag == 0 ]] || { log "the group still owes '$lag' records (committed offsets short of the log end)"; result=FAIL; }
  if [[ $dead != "$POISON" ]]; then
    log "dead letters: $(sql "SELECT string_agg(reason || ':' || encode(payload, 'escape'), ', ') FROM harvest_connector_dead_letters")"
  fi
  finish_line "$RECORDS" "$executions" "$dup" "$lost" "$dead" "$result"
}

finish_line() {
  local result=$6
  ((${#UNEXPECTED[@]} == 0)) || { log "apps exiting on their own: ${UNEXPECTED[*]}"; result=FAIL; }
  awk -v r="$RESUME_MAX" -v lim="$RESUME_LIMIT_S" 'BEGIN { exit !(r + 0 <= lim + 0) }' || result=FAIL
  [[ $result == PASS ]] || FAILED=1
  LINE="CHAOS scenario=$SCENARIO records=$1 executions=$2 duplicates=$3 lost=$4 dead_letters=$5 resume_max_s=$RESUME_MAX RESULT=$result"
  echo "$LINE"
}

# kafka_scenario DRIVER SECONDS [DATABASE_FN]: a fresh broker and database
# (DATABASE_FN, default fresh_database, sets HARVEST_DATABASE_URL), the records
# streamed over about SECONDS while DRIVER injects its faults, then the
# stores checked once everything settled.
kafka_scenario() {
  local driver=$1 secs=$2 producer_rc=0
  fresh_broker
  "${3:-fresh_database}"
  kafka_records "$STATE/$SCENARIO.records" "$SCENARIO" "$RECORDS"
  $driver start
  kafka_produce "$STATE/$SCENARIO.records" "$secs"
  $driver faults
  wait "$PRODUCER" || producer_rc=$?
  ((producer_rc == 0)) || { log "the producer failed ($producer_rc)"; UNEXPECTED+=(producer); }
  # Leases (30 s) and a dead member's session (10 s) are the longest waits.
  wait_settled kafka_settled 120 || log "not settled after 120 s"
  $driver stop
  kafka_verify
}

APP_ID=chaos-0
kafka_app() { start_app "$1" KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" "${@:2}" -- "$BIN/kafka_connector_quickstart"; }

# kill: a stable instance id, so each restart gets its partitions back at once
# (static membership) and takes its own in-flight runs back without waiting
# for their leases.
drive_kill() {
  case $1 in
    start) kafka_app app HARVEST_INSTANCE_ID=$APP_ID ;;
    faults)
      local k t
      for ((k = 1; k <= KILLS; k++)); do
        sleep "$(rand_s 0.5 3.0)"
        kill9_app app
        log "kill $k/$KILLS"
        sleep "$(rand_s 0 1.5)"
        kafka_app app HARVEST_INSTANCE_ID=$APP_ID
        t=$(now)
        note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
      done ;;
    stop) stop_app app ;;
  esac
}

drive_broker() {
  case $1 in
    start) kafka_app app HARVEST_INSTANCE_ID=$APP_ID ;;
    faults)
      local how t
      for how in "" --kill; do
        sleep "$(rand_s 2 5)"
        log "broker halt ${how:-(SIGTERM)}"
        scripts/services/kafka.sh halt $how 2>>"$LOGS/kafka-service.log"
        sleep "$(rand_s 1 4)"
        scripts/services/kafka.sh resume >/dev/null 2>>"$LOGS/kafka-service.log"
        t=$(now)
        log "broker back"
        note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
      done ;;
    stop) stop_app app ;;
  esac
}

# pg_crash WHAT: the scenario's PostgreSQL crashed (pg_ctl -m immediate stop),
# started again 1-4 s later, and the resume noted.
pg_crash() {
  local t
  log "$1 (pg_ctl -m immediate stop)"
  as_pg "$(pg_bin pg_ctl)" -D "$PG_DIR" -m immediate stop >/dev/null
  sleep "$(rand_s 1 4)"
  start_pg "$PG_DIR" "$PG_PORT" "$PG_SETTINGS"
  t=$(now)
  log "PostgreSQL back"
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
}

drive_database() {
  case $1 in
    start) kafka_app app HARVEST_INSTANCE_ID=$APP_ID ;;
    faults)
      local k
      for ((k = 1; k <= 2; k++)); do
        sleep "$(rand_s 2 5)"
        pg_crash "PostgreSQL crash $k/2"
      done ;;
    stop) stop_app app ;;
  esac
}

drive_pause() {
  case $1 in
    start) kafka_app app HARVEST_INSTANCE_ID=$APP_ID ;;
    faults)
      local t
      sleep "$(rand_s 2 5)"
      log "SIGSTOP for ${PAUSE_S}s"
      kill -STOP "${APPS[app]}"
      sleep "$PAUSE_S"
      kill -CONT "${APPS[app]}"
      t=$(now)
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")" ;;
    stop) stop_app app ;;
  esac
}

# replicas: no instance ids. Scaling is dynamic membership: a replica stopped
# with SIGTERM leaves the group at once and its partitions move on, where a
# static member would hold them for the session timeout. The kill -9-ed
# replica's partitions move after the session timeout (10 s) and its runs
# finish on the others once their leases (30 s) lapse.
drive_replicas() {
  case $1 in
    start) kafka_app r0 ;;
    faults)
      local t orphans
      sleep "$(rand_s 3 6)"
      log "scale 1 -> 3"
      kafka_app r1
      kafka_app r2
      sleep "$(rand_s 5 9)"
      orphans=$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status <> 'completed'")
      kill9_app r1
      t=$(now)
      log "kill -9 r1 ($orphans runs not completed at that moment)"
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
      sleep "$(rand_s 2 5)"
      log "add r3"
      kafka_app r3
      sleep "$(rand_s 5 9)"
      log "scale 3 -> 1"
      stop_app r2
      stop_app r3
      t=$(now)
      note_resume "$(await_progress "$t" kafka_executions "$RECORDS")" ;;
    stop) stop_app r0 ;;
  esac
}

# seed_offset NAME: what a scenario adds to the seed: its index for the six
# above, a number derived from its name for the others, so adding a scenario
# file never changes the schedule another scenario replays.
seed_offset() {
  local i
  for i in 0 1 2 3 4 5; do [[ ${ALL[$i]} == "$1" ]] && { echo "$i"; return; }; done
  echo $(($(printf '%s' "$1" | cksum | cut -d' ' -f1) % 9973 + 6))
}

# ---- run ----
LINES=()
for SCENARIO in "${SCENARIOS[@]}"; do
  RANDOM=$((SEED + $(seed_offset "$SCENARIO")))
  RESUME_MAX=0
  UNEXPECTED=()
  t_scenario=$(now)
  log "start (records=$RECORDS kills=$KILLS poison=$POISON)"
  LINE="CHAOS scenario=$SCENARIO RESULT=FAIL (no verdict)"
  case $SCENARIO in
    kill) kafka_scenario drive_kill $((KILLS * 3 + 5)) ;;
    broker) kafka_scenario drive_broker 40 ;;
    database) kafka_scenario drive_database 30 ;;
    pause) kafka_scenario drive_pause $((PAUSE_S + 15)) ;;
    replicas) kafka_scenario drive_replicas 40 ;;
    *) "scenario_$SCENARIO" ;;
  esac
  [[ $LINE == *RESULT=PASS ]] || FAILED=1
  LINES+=("$LINE")
  log "done in $(elapsed "$t_scenario")s"
done
echo
echo "CHAOS seed=$SEED"
printf '%s\n' "${LINES[@]}"
exit "$FAILED"
