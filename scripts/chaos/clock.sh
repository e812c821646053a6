# The drifting-clock scenarios of scripts/chaos.sh (sourced by it, not run).
#
#   clock_ahead   two Kafka quickstart replicas in one consumer group (dynamic
#                 membership), r1's wall clock $CLOCK_SKEW_S (600 s) ahead
#                 (libfaketime)
#   clock_behind  the same with r1's wall clock $CLOCK_SKEW_S behind
#
# r1 runs with LD_PRELOAD=libfaketimeMT.so.1 FAKETIME=±$CLOCK_SKEW_S (and a
# cnd_timedwait shim, see clock_shim; built with cc): only
# CLOCK_REALTIME (system_clock) moves, as with a host whose NTP drifted;
# CLOCK_MONOTONIC (steady_clock, librdkafka's timers) stays true
# (FAKETIME_DONT_FAKE_MONOTONIC=1). The skew r1 really runs with is read
# back from its API (last_pass_at of GET /connectors is its wall clock).
# Faults while records flow, each forcing lease takeovers across the skew:
#   1. the true-clock replica r0 is kill -9-ed at a moment it holds run leases
#      (it is SIGSTOP-ed at random moments until the database shows it holding
#      some: its runs take milliseconds) and stays down until the skewed r1
#      has taken every one of them over, which it may only do once their
#      leases lapsed by the database's clock; then r0 is restarted;
#   2. r1 is SIGSTOP-ed for $CLOCK_PAUSE_S s (default 15, less than the 30 s
#      run lease: nobody may take its runs over) and SIGCONT-ed;
#   3. the skewed r1 is kill -9-ed the same way, holding leases, and r0 must
#      take them all over; r1 is then restarted.
#
# A trigger on harvest_run_leases records every claim and takeover in
# chaos_lease_audit (old and new owner, the old lease's expiry, the
# database's now()). On top of the usual PASS conditions:
#   early_steals=0     no run taken from a holder whose lease had not expired
#                      (by the database's now()) - a skewed replica judging
#                      expiry by its own clock would do that
#   double_completed=0 no run completed twice (a trigger counts completions)
#   retried=0          no run with attempt > 1 (the workflow never fails)
#   takeovers=<n>      runs claimed again after their lease lapsed: exactly the
#                      runs r0 held at its kill, each taken by r1, plus exactly
#                      those r1 held at its kill, each taken by r0 (to=<n> and
#                      from=<n> are the two counts; each must be at least 1)
#   r1_share=<x>       r1's share of all claims; between 0.1 and 0.9, or the
#                      skewed replica did not really share the work
#   skew_s=<x>         r1's wall clock minus the true one, as seen; must be
#                      within 15 s of the requested skew, or faketime did not take
# The quickstart's workflow uses no durable timers, so "timers fire once" is
# not exercised here.
ALL+=(clock_ahead clock_behind)

CLOCK_SKEW_S=${CLOCK_SKEW_S:-600}
CLOCK_PAUSE_S=${CLOCK_PAUSE_S:-15}
FAKETIME_LIB=${FAKETIME_LIB:-}

find_faketime_lib() {
  local d
  [[ -n $FAKETIME_LIB ]] && return 0
  for d in /usr/lib/x86_64-linux-gnu/faketime /usr/lib/aarch64-linux-gnu/faketime /usr/lib/faketime /usr/local/lib/faketime; do
    [[ -e $d/libfaketimeMT.so.1 ]] && { FAKETIME_LIB=$d/libfaketimeMT.so.1; return 0; }
  done
  FAKETIME_LIB=$(dpkg -L libfaketime 2>/dev/null | grep -m1 'libfaketimeMT.so.1$' || true)
  [[ -n $FAKETIME_LIB ]] || { log "libfaketime missing: apt-get install -y faketime"; return 1; }
}

# libfaketime 0.9.10 (Debian bookworm) fakes clock_gettime/timespec_get and
# converts pthread_cond_timedwait's deadline back, but not C11 cnd_timedwait,
# which librdkafka waits with: under +2 min every librdkafka timed wait took
# 2 min longer (consumer session "timed out after 120102 ms", the group stuck
# for ~113 s), under -2 min they return at once. A real skewed host has one
# consistent clock, so the harness preloads a shim routing cnd_timedwait
# through (libfaketime's) pthread_cond_timedwait, as glibc's does internally.
clock_shim() {
  CND_SHIM="$STATE/cnd_timedwait_shim.so"
  [[ -f $CND_SHIM ]] && return 0
  command -v cc >/dev/null || { log "cc missing: cannot build the cnd_timedwait shim"; return 1; }
  cc -O2 -shared -fPIC -pthread -x c -o "$CND_SHIM" - <<'C'
#include <errno.h>
#include <pthread.h>
#include <threads.h>
int cnd_timedwait(cnd_t *c, mtx_t *m, const struct timespec *ts) {
  int r = pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, ts);
  return r == 0 ? thrd_success : r == ETIMEDOUT ? thrd_timedout : thrd_error;
}
C
}

# skewed_app NAME OFFSET_S: a quickstart replica whose wall clock is OFFSET_S off.
# A sanitizer build (the dev preset links libasan) needs the ASan runtime
# first in LD_PRELOAD; its clock_gettime interceptor then calls on into
# libfaketime's. LeakSanitizer hangs at exit under libfaketime (seen: the
# replica ignored SIGTERM for 60 s), so leak checking is off for it.
skewed_app() {
  local sign=+ off=$2 preload asan
  ((off < 0)) && { sign=-; off=$((-off)); }
  asan=$(ldd "$BIN/kafka_connector_quickstart" 2>/dev/null | awk '$1 ~ /^libasan\.so/ { print $3; exit }')
  preload=${asan:+$asan:}$CND_SHIM:$FAKETIME_LIB
  start_app "$1" KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" LD_PRELOAD="$preload" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    FAKETIME="$sign${off}s" FAKETIME_DONT_FAKE_MONOTONIC=1 -- "$BIN/kafka_connector_quickstart"
}

clock_api() {
  local line
  line=$(grep -o 'HTTP API listening on http://[^ ]*' "$LOGS/$SCENARIO.$1.log" 2>/dev/null | tail -n1)
  [[ -n $line ]] && echo "${line#HTTP API listening on }"
}

# app_skew NAME: the app's wall clock minus ours, in seconds (from the
# last_pass_at its API reports, which is at most a pass old, hence the
# tolerance); empty when it does not answer.
app_skew() {
  local api at
  api=$(clock_api "$1") || return 0
  at=$(curl -sf --max-time 5 "$api/connectors" | grep -o '"last_pass_at": *"[^"]*"' | head -n1 | sed 's/.*: *"\(.*\)"/\1/')
  [[ -n $at ]] || return 0
  echo $(($(date -d "$at" +%s) - $(date +%s)))
}

# A trigger logging every change of a run's lease holder.
clock_audit() {
  psql "$HARVEST_DATABASE_URL" -qX -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE TABLE chaos_lease_audit (
  execution_id uuid, op text, old_status text, new_status text,
  old_owner text, new_owner text, old_expires timestamptz, new_expires timestamptz,
  db_now timestamptz, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION chaos_lease_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- A lease row exists while a worker holds the run: an insert is a claim,
  -- a change of owner a takeover.
  IF TG_OP = 'INSERT' THEN
    INSERT INTO chaos_lease_audit VALUES (NEW.execution_id, TG_OP, NULL, 'running', NULL,
                                          NEW.lease_owner, NULL, NEW.lease_expires_at, now());
  ELSIF NEW.lease_owner IS DISTINCT FROM OLD.lease_owner THEN
    INSERT INTO chaos_lease_audit VALUES (NEW.execution_id, TG_OP, 'running', 'running',
                                          OLD.lease_owner, NEW.lease_owner, OLD.lease_expires_at,
                                          NEW.lease_expires_at, now());
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER chaos_lease_audit AFTER INSERT OR UPDATE ON harvest_run_leases
  FOR EACH ROW EXECUTE FUNCTION chaos_lease_audit();
-- Every completion (the execution row's update to completed: a completion
-- writes no event row), so a run completed twice shows as two.
CREATE FUNCTION chaos_completion_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status = 'completed' AND (OLD.status IS DISTINCT FROM 'completed'
                                   OR NEW.completed_at IS DISTINCT FROM OLD.completed_at) THEN
    INSERT INTO chaos_lease_audit VALUES (NEW.id, 'COMPLETE', OLD.status, NEW.status, NULL, NULL,
                                          NULL, NULL, now());
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER chaos_completion_audit AFTER UPDATE ON harvest_workflow_executions
  FOR EACH ROW EXECUTE FUNCTION chaos_completion_audit();
SQL
}

# leases_of PID: runs whose lease the process PID holds (a lease owner reads
# <host>:<pid>:<random>/<claim>/<n>).
leases_of() { sql "SELECT count(*) FROM harvest_run_leases WHERE split_part(lease_owner, ':', 2) = '$1'"; }

# kill_holding NAME: kill -9 the app NAME at a moment it holds run leases;
# sets KILLED_PID and HELD (how many it held). It is SIGSTOP-ed at random
# moments until the database shows it holding some (frozen, it can neither
# finish nor renew them); HELD=0 if that never happened within 200 tries.
KILLED_PID=""
HELD=0
kill_holding() {
  local name=$1 i
  KILLED_PID=${APPS[$1]}
  HELD=0
  for ((i = 0; i < 200; i++)); do
    kill -STOP "$KILLED_PID"
    HELD=$(leases_of "$KILLED_PID")
    ((${HELD:-0} > 0)) && break
    kill -CONT "$KILLED_PID"
    sleep "$(rand_s 0.05 0.3)"
  done
  kill9_app "$name"
}

# await_taken PID SECONDS: until no run is leased by the dead process PID
# (the survivor took them all over); false after SECONDS.
await_taken() {
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    [[ $(leases_of "$1") == 0 ]] && return 0
    check_alive
    sleep 0.2
  done
  return 1
}

# takeovers_between FROM_PID TO_PID: takeovers of lapsed leases from one process to the other.
takeovers_between() {
  sql "SELECT count(*) FROM chaos_lease_audit WHERE op = 'UPDATE' AND old_status = 'running'
       AND old_expires < db_now AND split_part(old_owner, ':', 2) = '$1'
       AND split_part(new_owner, ':', 2) = '$2'"
}

clock_scenario() {
  local skew=$1 producer_rc=0 i t t_kill seen steals double retried takeovers early_takeovers ok=1 extra
  local r0_pid r1_pid r1b_pid held_r0 held_r1 to_skewed from_skewed share
  find_faketime_lib && clock_shim ||
    { LINE="CHAOS scenario=$SCENARIO RESULT=FAIL (libfaketime or cc missing)"; echo "$LINE"; return; }
  fresh_broker
  fresh_database
  kafka_records "$STATE/$SCENARIO.records" "$SCENARIO" "$RECORDS"
  kafka_app r0
  # The app migrates the schema at start; the audit trigger goes on before any record is produced.
  for ((i = 0; i < 300; i++)); do
    [[ $(sql "SELECT to_regclass('harvest_run_leases') IS NOT NULL") == t ]] && break
    sleep 0.1
  done
  clock_audit || { log "could not install the lease audit trigger"; ok=0; }
  skewed_app r1 "$skew"
  log "r1 runs with FAKETIME=${skew}s (LD_PRELOAD $FAKETIME_LIB)"
  sleep 2
  if ! kill -0 "${APPS[r1]}" 2>/dev/null; then
    log "r1 exited at start; the tail of its log:"
    tail -n 15 "$LOGS/$SCENARIO.r1.log" >&2 || true
  fi
  kafka_produce "$STATE/$SCENARIO.records" 120

  sleep "$(rand_s 4 7)"
  seen=$(app_skew r1)
  log "r1's wall clock is ${seen:-?}s off (r0's: $(app_skew r0)s)"

  t_kill=$(sql "SELECT now()")
  kill_holding r0
  held_r0=$HELD r0_pid=$KILLED_PID
  log "kill -9 r0 (true clock) holding $held_r0 run leases; it stays down until r1 took them over"
  t=$(now)
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
  await_taken "$r0_pid" 60 || log "r0's runs still leased to it 60 s after its kill"
  log "restart r0"
  kafka_app r0

  sleep "$(rand_s 4 7)"
  log "SIGSTOP r1 for ${CLOCK_PAUSE_S}s (its leases are 30 s)"
  kill -STOP "${APPS[r1]:-0}" 2>/dev/null || log "r1 is not running"
  sleep "$CLOCK_PAUSE_S"
  kill -CONT "${APPS[r1]:-0}" 2>/dev/null || true
  t=$(now)
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"

  sleep "$(rand_s 3 6)"
  kill_holding r1
  held_r1=$HELD r1_pid=$KILLED_PID
  log "kill -9 r1 (clock ${skew}s off) holding $held_r1 run leases; r0 must take them over"
  t=$(now)
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
  await_taken "$r1_pid" 60 || log "r1's runs still leased to it 60 s after its kill"
  log "restart r1"
  skewed_app r1 "$skew"
  r1b_pid=${APPS[r1]}

  wait "$PRODUCER" || producer_rc=$?
  ((producer_rc == 0)) || { log "the producer failed ($producer_rc)"; UNEXPECTED+=(producer); }
  # r0's orphans wait out their 30 s leases; r1 may need a session timeout to get partitions.
  wait_settled kafka_settled 150 || log "not settled after 150 s"
  [[ -z $seen ]] && seen=$(app_skew r1)
  stop_app r1
  stop_app r0
  kafka_verify >/dev/null

  steals=$(sql "SELECT count(*) FROM chaos_lease_audit WHERE op = 'UPDATE' AND old_status = 'running'
                AND old_owner IS NOT NULL AND old_expires >= db_now")
  takeovers=$(sql "SELECT count(*) FROM chaos_lease_audit WHERE op = 'UPDATE' AND old_status = 'running'
                   AND old_owner IS NOT NULL AND old_expires < db_now")
  to_skewed=$(takeovers_between "$r0_pid" "$r1_pid")
  from_skewed=$(takeovers_between "$r1_pid" "$(sql "SELECT split_part(new_owner, ':', 2) FROM chaos_lease_audit
                WHERE op = 'UPDATE' AND split_part(old_owner, ':', 2) = '$r1_pid' LIMIT 1")")
  # r1's share of every claim (fresh or taken over), by every r1 process.
  share=$(sql "SELECT round(count(*) FILTER (WHERE split_part(new_owner, ':', 2) IN ('$r1_pid', '$r1b_pid'))::numeric
               / nullif(count(*), 0), 2) FROM chaos_lease_audit WHERE op <> 'COMPLETE'")
  early_takeovers=$(sql "SELECT count(*) FROM chaos_lease_audit WHERE op = 'UPDATE' AND old_status = 'running'
                         AND old_owner IS NOT NULL AND db_now < '$t_kill'::timestamptz")
  double=$(sql "SELECT count(*) FROM (SELECT execution_id FROM chaos_lease_audit
                WHERE op = 'COMPLETE' GROUP BY execution_id HAVING count(*) > 1) d")
  retried=$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE attempt > 1")
  log "lease changes: $(sql "SELECT count(*) FROM chaos_lease_audit WHERE op <> 'COMPLETE'"); takeovers after expiry: $takeovers (min wait past expiry $(sql "SELECT coalesce(round(extract(epoch FROM min(db_now - old_expires))::numeric, 2)::text, '-') FROM chaos_lease_audit WHERE op = 'UPDATE' AND old_status = 'running' AND old_owner IS NOT NULL"))s)"
  # Lease owners read <host>:<pid>:<instance>/<claim>/<n>: one holder per process.
  log "runs claimed per process (lease owner prefix): $(sql "SELECT string_agg(o || '=' || n, ' ') FROM (SELECT split_part(new_owner, '/', 1) AS o, count(*) AS n FROM chaos_lease_audit WHERE op <> 'COMPLETE' GROUP BY 1 ORDER BY 1) x")"
  if [[ $steals != 0 ]]; then
    log "leases taken before they expired: $steals, e.g.:"
    psql "$HARVEST_DATABASE_URL" -qXc "SELECT execution_id, old_owner, new_owner, old_expires, db_now
      FROM chaos_lease_audit WHERE op = 'UPDATE' AND old_status = 'running' AND old_owner IS NOT NULL
      AND old_expires >= db_now ORDER BY at LIMIT 5" >&2 || true
    ok=0
  fi
  [[ $early_takeovers == 0 ]] || { log "$early_takeovers takeovers before r0 was killed"; ok=0; }
  if ((${held_r0:-0} < 1 || ${held_r1:-0} < 1)); then
    log "a replica held no lease when killed (r0: $held_r0, r1: $held_r1): no takeover was forced"
    ok=0
  fi
  [[ $to_skewed == "$held_r0" ]] || { log "r1 took over $to_skewed of the $held_r0 runs r0 held"; ok=0; }
  [[ $from_skewed == "$held_r1" ]] || { log "r0 took over $from_skewed of the $held_r1 runs r1 held"; ok=0; }
  [[ $takeovers == $((held_r0 + held_r1)) ]] || { log "$takeovers takeovers, $((held_r0 + held_r1)) forced"; ok=0; }
  awk -v s="${share:-0}" 'BEGIN { exit !(s >= 0.1 && s <= 0.9) }' || { log "r1's share of the claims: ${share:-?}"; ok=0; }
  [[ $double == 0 ]] || { log "$double runs completed twice"; ok=0; }
  [[ $retried == 0 ]] || { log "$retried runs retried (attempt > 1)"; ok=0; }
  if [[ -z $seen ]] || ((seen - skew > 15 || skew - seen > 15)); then
    log "r1's clock skew seen: '${seen}' s, wanted ${skew} s: faketime did not take effect"
    ok=0
  fi
  ((ok)) || LINE=${LINE/RESULT=PASS/RESULT=FAIL}
  [[ $LINE == *RESULT=PASS ]] || FAILED=1
  extra="skew_s=${seen:-?} early_steals=${steals:-?} takeovers=${takeovers:-?} to=${to_skewed:-?} from=${from_skewed:-?} r1_share=${share:-?} double_completed=${double:-?} retried=${retried:-?} timers=n/a"
  LINE=${LINE/ RESULT=/ $extra RESULT=}
  echo "$LINE"
}

scenario_clock_ahead() { clock_scenario "$CLOCK_SKEW_S"; }
scenario_clock_behind() { clock_scenario "-$CLOCK_SKEW_S"; }
