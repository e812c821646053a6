# The network scenarios of scripts/chaos.sh (issue 34, "a flaky network";
# sourced by it, not run): the Kafka quickstart reaches PostgreSQL and the
# broker only through Toxiproxy (scripts/services/toxiproxy.sh), whose toxics
# make the network slow, thin, resetting or silent while records flow.
#
#   net_latency       +200 ms (jitter 50) on every reply from PostgreSQL and
#                     the broker for NET_STRETCH_S; prints the p99 dispatch time
#                     under it (CHAOS-NOTE ... p99_dispatch_ms=, from the app's
#                     Prometheus histogram) and the p50/p99 of record -> run
#                     start from the stores
#   net_bandwidth     64 KB/s each way on both links for NET_STRETCH_S
#   net_reset         TCP resets (reset_peer) several times on each link
#   net_blackhole     both directions of the PostgreSQL link silently dropped
#                     for NET_BLACKHOLE_S (no RST, no FIN; the app's /healthz is
#                     probed halfway), then the Kafka link. Removing Toxiproxy's
#                     timeout toxic closes the connections it held (FIN), so
#                     resume_max_s measures the recovery from that, not whether
#                     the app notices a silent connection on its own: the note's
#                     *_blackhole_app_log_lines and *_healthz tell that
#   net_commit_reset  replies from PostgreSQL cut after a random byte count,
#                     over and over: some cuts land on a COMMIT's answer, so
#                     the app cannot know whether it committed
#
# Each scenario prints a `CHAOS-NOTE scenario=... key=value...` line after its
# CHAOS line. NET_KEEP_LOGS=DIR keeps a copy of every scenario's logs.
#
# The same PASS rule as every Kafka scenario. Only the app's traffic crosses
# the proxies: the producer, the lag probe and the verifying queries talk to
# the broker and PostgreSQL directly.
#
# Kafka through a TCP proxy: a client reconnects to the address the broker
# advertises, so the broker gets a second listener (PROXIED) advertising the
# proxy's port (kafka.sh's HARVEST_KAFKA_PROXIED_PORT/ADVERTISED_PORT); the
# app bootstraps through the proxy and stays on it.
#
# Env: NET_STRETCH_S (default 30), NET_BLACKHOLE_S (default 30), NET_RESETS
#      (resets per link, default 3), NET_CUTS_S (net_commit_reset's stretch,
#      default 40).
ALL+=(net_latency net_bandwidth net_reset net_blackhole net_commit_reset)

TOXI=scripts/services/toxiproxy.sh
NET_UP=0

# net_toxi ARGS...: toxiproxy.sh with its messages in the service log.
net_toxi() { "$TOXI" "$@" 2>>"$LOGS/toxiproxy-service.log" >/dev/null; }

# net_start_toxiproxy: one server for the whole run, stopped by cleanup.
net_start_toxiproxy() {
  ((NET_UP)) && return 0
  HARVEST_TOXIPROXY_PORT="$(free_port 28474)"
  export HARVEST_TOXIPROXY_PORT HARVEST_TOXIPROXY_DIR="$STATE/toxiproxy"
  CLEANUP_HOOKS+=("$TOXI stop")
  NET_UP=1
  eval "$("$TOXI" start 2>>"$LOGS/toxiproxy-service.log")"
  log "toxiproxy on $TOXIPROXY_URL"
}

# net_scenario DRIVER SECONDS: kafka_scenario with the broker's PROXIED
# listener; the driver's `start` calls net_proxies and net_app.
net_scenario() {
  net_start_toxiproxy
  NET_KAFKA_PROXY="$(free_port 28092)"
  HARVEST_KAFKA_ADVERTISED_PORT=$NET_KAFKA_PROXY
  HARVEST_KAFKA_PROXIED_PORT="$(free_port $((NET_KAFKA_PROXY + 2)))"
  NET_PG_PROXY="$(free_port $((HARVEST_KAFKA_PROXIED_PORT + 2)))"
  export HARVEST_KAFKA_ADVERTISED_PORT HARVEST_KAFKA_PROXIED_PORT
  kafka_scenario "$@"
  unset HARVEST_KAFKA_ADVERTISED_PORT HARVEST_KAFKA_PROXIED_PORT
}

# net_proxies: proxies `pg` and `kafka` for this scenario (any old ones replaced).
net_proxies() {
  net_toxi proxy pg "$NET_PG_PROXY" "127.0.0.1:$PG_PORT"
  net_toxi proxy kafka "$NET_KAFKA_PROXY" "127.0.0.1:$HARVEST_KAFKA_PROXIED_PORT"
  log "proxies: PostgreSQL 127.0.0.1:$NET_PG_PROXY -> :$PG_PORT, Kafka 127.0.0.1:$NET_KAFKA_PROXY -> :$HARVEST_KAFKA_PROXIED_PORT (advertised)"
}

# net_app: the quickstart, with both of its links through the proxies.
net_app() {
  kafka_app app HARVEST_INSTANCE_ID=$APP_ID KAFKA_BOOTSTRAP="127.0.0.1:$NET_KAFKA_PROXY" \
    HARVEST_DATABASE_URL="${HARVEST_DATABASE_URL/:$PG_PORT\//:$NET_PG_PROXY/}"
}

net_clear() { net_toxi clear pg; net_toxi clear kafka; }

# net_resume: after a fault's end, the time until executions commit again.
net_resume() {
  local t
  t=$(now)
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
}

# ---- dispatch times ----

# net_metrics_url: the app's /metrics (at the root, beside the API's prefix),
# from the address its log says it bound.
net_metrics_url() {
  local base
  base=$(grep -o 'HTTP API listening on http://[^ ]*' "$LOGS/$SCENARIO.app.log" | tail -n 1 | sed 's/.* on //')
  [[ -n $base ]] && echo "$(sed -E 's#^(http://[^/]+).*#\1#' <<<"$base")/metrics"
}

# net_healthz: "CODE BODY" of the app's /healthz within 5 s (000 if none).
net_healthz() {
  local url
  url=$(net_metrics_url) || { echo "000 (no URL)"; return; }
  url="$(sed -E 's#^(http://[^/]+).*#\1#' <<<"$url")/healthz"
  curl -s --max-time 5 -w ' %{http_code}' "$url" 2>/dev/null |
    awk '{ code = $NF; $NF = ""; print code, substr($0, 1, 200) }' || true
}

# net_dispatch_buckets: "le count" lines of harvest_connector_dispatch_seconds,
# summed over label sets; empty when the app serves no Prometheus exporter.
net_dispatch_buckets() {
  local url body
  url=$(net_metrics_url) || return 0
  body=$(curl -sf --max-time 10 "$url" 2>/dev/null) || return 0
  awk '
    /^harvest_connector_dispatch_seconds_bucket\{/ {
      match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
      n[le] += $NF
    }
    END { for (le in n) print le, n[le] }' <<<"$body" | sort -g
}

# net_p99 BEFORE AFTER: p99 in ms of the observations between two bucket
# snapshots, interpolated inside its bucket as histogram_quantile does;
# ">5000" when it lies in the +Inf bucket. Also prints the count.
net_p99() {
  [[ -s $2 ]] || { echo "n/a 0"; return; }
  awk -v q=0.99 '
    FNR == NR { before[$1] = $2; next }
    { le[++k] = $1; c[k] = $2 - before[$1] }
    END {
      total = c[k]
      if (total <= 0) { print "n/a 0"; exit }
      rank = q * total; prev_le = 0; prev_c = 0
      for (i = 1; i <= k; i++) {
        if (c[i] >= rank) {
          if (le[i] == "+Inf") { printf ">%d %d\n", prev_le * 1000, total; exit }
          v = prev_le + (le[i] - prev_le) * (rank - prev_c) / ((c[i] - prev_c) > 0 ? (c[i] - prev_c) : 1)
          printf "%.0f %d\n", v * 1000, total; exit
        }
        prev_le = le[i]; prev_c = c[i]
      }
    }' "$1" "$2"
}

# net_e2e_ms FROM_MS TO_MS: "p50 p99 n" in ms of record -> run start for the
# records produced between the two epoch-ms times: the record's Kafka
# CreateTime to its execution row's created_at (the start transaction's
# begin, PostgreSQL's clock on this same machine). Includes any time the
# record waited in the topic behind a slowed consumer.
net_e2e_ms() {
  local from=$1 to=$2
  {
    sql "SELECT input->>'order_id', (extract(epoch FROM created_at) * 1000)::bigint
         FROM harvest_workflow_executions" | tr '|' '\t' | sed 's/^/E\t/'
    timeout 60 kcat -C -b "$KAFKA_BOOTSTRAP" -t orders.placed -o beginning -e -q -f 'K\t%k\t%T\n' 2>/dev/null || true
  } | awk -F'\t' -v from="$from" -v to="$to" '
    $1 == "E" { created[$2] = $3; next }
    $1 == "K" && ($2 in created) && $3 >= from && $3 <= to { print created[$2] - $3 }' |
    sort -n | awk '{ v[NR] = $1 } END {
      if (!NR) { print "n/a n/a 0"; exit }
      print v[int(0.50 * NR + 0.999999)], v[int(0.99 * NR + 0.999999)], NR }'
}
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

# ---- the scenarios ----

NET_STRETCH_S=${NET_STRETCH_S:-30}
NET_BLACKHOLE_S=${NET_BLACKHOLE_S:-30}
NET_RESETS=${NET_RESETS:-3}
NET_CUTS_S=${NET_CUTS_S:-40}

# p99 dispatch: from the app's harvest_connector_dispatch_seconds histogram
# (two snapshots around the stretch); the note also gives record -> run start
# times from the stores (net_e2e_ms), which include time spent in the topic.
drive_net_latency() {
  case $1 in
    start) net_proxies; net_app ;;
    faults)
      local before="$STATE/$SCENARIO.buckets0" after="$STATE/$SCENARIO.buckets1"
      sleep "$(rand_s 9 12)"
      net_dispatch_buckets >"$before"
      log "latency 200 ms (jitter 50) on every reply, both links, for ${NET_STRETCH_S}s"
      net_toxi toxic pg latency downstream latency=200 jitter=50
      net_toxi toxic kafka latency downstream latency=200 jitter=50
      NET_T_ON=$(now_ms)
      sleep "$NET_STRETCH_S"
      NET_T_OFF=$(now_ms)
      net_dispatch_buckets >"$after"
      net_clear
      net_resume
      read -r NET_P99 NET_LAT_N < <(net_p99 "$before" "$after")
      if [[ $NET_P99 == n/a ]]; then
        log "no dispatch histogram: the app's $(net_metrics_url || echo /metrics) serves no Prometheus exporter"
      fi ;;
    stop)
      local e2e e2e_before p50 p99 n p50b p99b nb
      e2e=$(net_e2e_ms "$NET_T_ON" "$((NET_T_OFF - 2000))")
      e2e_before=$(net_e2e_ms "$((NET_T_ON - 6000))" "$((NET_T_ON - 500))")
      read -r p50 p99 n <<<"$e2e"
      read -r p50b p99b nb <<<"$e2e_before"
      NET_NOTE="p99_dispatch_ms=$NET_P99 (histogram, $NET_LAT_N dispatches) p99_record_to_start_ms=$p99 p50_record_to_start_ms=$p50 records=$n; before the fault: p99=$p99b p50=$p50b records=$nb"
      log "under +200 ms: p99 dispatch $NET_P99 ms; record -> run start p50 $p50 ms, p99 $p99 ms over $n records (before: p50 $p50b, p99 $p99b ms over $nb)"
      stop_app app ;;
  esac
}

drive_net_bandwidth() {
  case $1 in
    start) net_proxies; net_app ;;
    faults)
      sleep "$(rand_s 4 7)"
      log "bandwidth 64 KB/s each way, both links, for ${NET_STRETCH_S}s"
      net_toxi toxic pg bandwidth rate=64
      net_toxi toxic kafka bandwidth rate=64
      sleep "$NET_STRETCH_S"
      net_clear
      net_resume ;;
    stop) stop_app app ;;
  esac
}

# net_reset: every connection on the link that carries data while the toxic
# is on gets an RST (reset_peer, timeout 0): new ones too, for the burst.
drive_net_reset() {
  case $1 in
    start) net_proxies; net_app ;;
    faults)
      local k link burst
      for ((k = 1; k <= NET_RESETS * 2; k++)); do
        link=$([[ $((k % 2)) == 1 ]] && echo pg || echo kafka)
        sleep "$(rand_s 2 5)"
        burst=$(rand_s 0.2 1.5)
        log "reset $(((k + 1) / 2))/$NET_RESETS on the $link link (every connection carrying data for ${burst}s)"
        net_toxi toxic "$link" reset_peer timeout=0
        sleep "$burst"
        net_toxi clear "$link"
        net_resume
      done ;;
    stop) stop_app app ;;
  esac
}

# net_blackhole: timeout 0 on both directions drops every byte, with no RST
# or FIN, until removed (removing it closes the connections it held).
# NET_BLACKHOLE_NOTES collects what the app logged while the link was silent.
drive_net_blackhole() {
  case $1 in
    start) net_proxies; net_app ;;
    faults)
      local link lines0 lines1 health
      NET_NOTE=""
      for link in pg kafka; do
        sleep "$(rand_s 3 6)"
        lines0=$(wc -l <"$LOGS/$SCENARIO.app.log")
        log "$(date +%T.%3N) blackhole on the $link link for ${NET_BLACKHOLE_S}s (data dropped, no RST)"
        net_toxi toxic "$link" timeout timeout=0
        sleep "$((NET_BLACKHOLE_S / 2))"
        # Does the app know? Its health check, mid-silence (000: no answer in 5 s).
        health=$(net_healthz)
        log "mid-silence /healthz: $health"
        NET_NOTE+="${link}_blackhole_healthz=${health%% *} "
        sleep "$((NET_BLACKHOLE_S - NET_BLACKHOLE_S / 2))"
        lines1=$(wc -l <"$LOGS/$SCENARIO.app.log")
        net_toxi clear "$link"
        log "$(date +%T.%3N) the $link link is back; the app logged $((lines1 - lines0)) lines during the silence (first 8 since it began:)"
        NET_NOTE+="${link}_blackhole_app_log_lines=$((lines1 - lines0)) "
        sed -n "$((lines0 + 1)),$((lines0 + 8))s/^/chaos[$SCENARIO]:   | /p" "$LOGS/$SCENARIO.app.log" >&2
        local t r
        t=$(now)
        r=$(await_progress "$t" kafka_executions "$RECORDS")
        note_resume "$r"
        NET_NOTE+="resume_after_${link}_blackhole_s=$r "
      done ;;
    stop) stop_app app ;;
  esac
}

# net_commit_reset: limit_data on the replies from PostgreSQL closes each
# connection after a random number of bytes (a reply cut mid-message, then
# FIN), in rounds with a new random limit each, so cuts land on every kind of
# reply, COMMITs' among them; a few rounds also hit the broker's replies
# (offset commits whose outcome the consumer cannot know).
drive_net_commit_reset() {
  case $1 in
    start) net_proxies; net_app ;;
    faults)
      local t_end rounds=0 bytes link
      sleep "$(rand_s 3 5)"
      log "replies cut after a random byte count, in rounds, for ${NET_CUTS_S}s"
      t_end=$(($(date +%s) + NET_CUTS_S))
      while (($(date +%s) < t_end)); do
        rounds=$((rounds + 1))
        link=$([[ $((rounds % 4)) == 0 ]] && echo kafka || echo pg)
        bytes=$((500 + RANDOM % 20000))
        net_toxi toxic "$link" limit_data downstream bytes=$bytes
        sleep "$(rand_s 1 3)"
        net_toxi clear "$link"
        sleep "$(rand_s 0.2 1)"
      done
      # A commit in doubt: a cut that fell after the app sent a COMMIT (or a
      # pipeline's sync point) and before its answer (store/pg.cpp logs each).
      NET_DOUBT=$(grep -c 'commit in doubt' "$LOGS/$SCENARIO.app.log" || true)
      NET_NOTE="rounds=$rounds commits_in_doubt=$NET_DOUBT outcome_writes_cut=$(grep -c 'cannot record outcome' "$LOGS/$SCENARIO.app.log" || true) intake_pauses=$(grep -c 'the store is unreachable; intake paused' "$LOGS/$SCENARIO.app.log" || true)"
      log "$rounds rounds: $NET_NOTE"
      net_resume ;;
    stop) stop_app app ;;
  esac
}

# net_pg_breaks: how often the app's log says a PostgreSQL connection broke
# under it (PostgreSQL itself logs nothing for a client that sends FIN).
net_pg_breaks() {
  grep -cE 'server closed the connection unexpectedly|no connection to the server|could not receive data from server|SSL SYSCALL' \
    "$LOGS/$SCENARIO.app.log" 2>/dev/null || true
}

# net_run NAME SECONDS: the scenario, then its CHAOS-NOTE line: the driver's
# NET_NOTE, the app's broken-PostgreSQL-connection reports and its warnings.
# NET_KEEP_LOGS=DIR keeps a copy of the scenario's logs there, pass or fail.
net_run() {
  local warns
  NET_NOTE=""
  net_scenario "drive_$1" "$2"
  warns=$(grep -ciE '\b(warn|warning|error)\b' "$LOGS/$SCENARIO.app.log" 2>/dev/null || true)
  echo "CHAOS-NOTE scenario=$SCENARIO ${NET_NOTE:+$NET_NOTE }app_pg_connection_breaks=$(net_pg_breaks) app_log_warnings=$warns"
  if [[ -n ${NET_KEEP_LOGS:-} ]]; then
    mkdir -p "$NET_KEEP_LOGS"
    cp "$LOGS/$SCENARIO".* "$LOGS"/toxiproxy-service.log "$NET_KEEP_LOGS/" 2>/dev/null || true
    cp "$HARVEST_TOXIPROXY_DIR/toxiproxy.log" "$NET_KEEP_LOGS/$SCENARIO.toxiproxy.log" 2>/dev/null || true
  fi
}

scenario_net_latency() { net_run net_latency $((NET_STRETCH_S + 20)); }
scenario_net_bandwidth() { net_run net_bandwidth $((NET_STRETCH_S + 20)); }
scenario_net_reset() { net_run net_reset $((NET_RESETS * 10 + 10)); }
scenario_net_blackhole() { net_run net_blackhole $((NET_BLACKHOLE_S * 2 + 20)); }
# The scenario is about commits whose answer is lost: it fails unless at
# least one cut landed there (and nothing was lost or repeated).
scenario_net_commit_reset() {
  NET_DOUBT=0
  net_run net_commit_reset $((NET_CUTS_S + 10))
  if ((NET_DOUBT == 0)); then
    log "no cut landed between a commit and its answer: the scenario proved nothing"
    LINE=${LINE/RESULT=PASS/RESULT=FAIL}
  fi
  LINE=${LINE/ RESULT=/ commits_in_doubt=$NET_DOUBT RESULT=}
}

# ---- a blackhole below the proxy: packets vanish ----
#
#   net_drop  every packet of the app's PostgreSQL link, then of its Kafka
#             link, dropped by the kernel (iptables DROP on the proxy's port,
#             both directions) for NET_BLACKHOLE_S: no RST, no FIN, no ACK —
#             what a dead route or a silently failing middlebox does. Unlike
#             net_blackhole, nothing closes the connections when it ends: the
#             app must notice the silence itself (harvest's default TCP user
#             timeout and keepalives) and reconnect. Needs root and iptables.
ALL+=(net_drop)

net_drop_rules() {
  local op=$1 port=$2
  iptables "$op" OUTPUT -p tcp --dport "$port" -j DROP
  iptables "$op" OUTPUT -p tcp --sport "$port" -j DROP
}
NET_DROPPED=()
net_drop_release() {
  local port
  for port in "${NET_DROPPED[@]}"; do net_drop_rules -D "$port" 2>/dev/null || true; done
  NET_DROPPED=()
}

drive_net_drop() {
  case $1 in
    start)
      CLEANUP_HOOKS+=(net_drop_release)
      net_proxies
      net_app ;;
    faults)
      local link port lines0 t r
      NET_NOTE=""
      for link in pg kafka; do
        port=$([[ $link == pg ]] && echo "$NET_PG_PROXY" || echo "$NET_KAFKA_PROXY")
        sleep "$(rand_s 3 6)"
        lines0=$(wc -l <"$LOGS/$SCENARIO.app.log")
        log "$(date +%T.%3N) every packet on the $link link (port $port) dropped for ${NET_BLACKHOLE_S}s"
        NET_DROPPED+=("$port")
        net_drop_rules -I "$port"
        sleep "$NET_BLACKHOLE_S"
        net_drop_release
        log "$(date +%T.%3N) the $link link passes packets again; what the app logged meanwhile:"
        sed -n "$((lines0 + 1)),$((lines0 + 6))s/^/chaos[$SCENARIO]:   | /p" "$LOGS/$SCENARIO.app.log" >&2
        t=$(now)
        r=$(await_progress "$t" kafka_executions "$RECORDS")
        note_resume "$r"
        NET_NOTE+="resume_after_${link}_drop_s=$r "
      done ;;
    stop) stop_app app ;;
  esac
}
scenario_net_drop() {
  if ! command -v iptables >/dev/null || ! iptables -L OUTPUT -n >/dev/null 2>&1; then
    LINE="CHAOS scenario=net_drop RESULT=FAIL (needs root and iptables)"
    return
  fi
  net_run net_drop $((NET_BLACKHOLE_S * 2 + 20))
}
