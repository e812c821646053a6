#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, combined broker+controller) for harvest tests.
#
#   scripts/services/kafka.sh start            # prints KAFKA_BOOTSTRAP=127.0.0.1:<port>
#   scripts/services/kafka.sh status           # exit 0 iff the broker answers metadata
#   scripts/services/kafka.sh stop             # stop and delete the state dir
#   scripts/services/kafka.sh topic NAME [PARTITIONS]   # create a topic (idempotent)
#   scripts/services/kafka.sh halt [--kill]    # stop the broker, keep its state (SIGTERM,
#                                              # or SIGKILL with --kill: a crash)
#   scripts/services/kafka.sh resume           # start it again on the state a halt kept
#
# Env:
#   HARVEST_KAFKA_PORT     broker port (default 19092); controller uses PORT+1
#   HARVEST_KAFKA_DIR      state dir (default /tmp/harvest-kafka-$PORT)
#   HARVEST_KAFKA_VERSION  Kafka version (default: first of 4.4.0 4.1.0 4.0.0 that resolves)
#   HARVEST_CACHE_DIR      jar cache (default ~/.cache/harvest) -> kafka-<version>/libs
#   HARVEST_KAFKA_HEAP     JVM heap flags (default "-Xms256m -Xmx512m")
#   HARVEST_SERVICE_TIMEOUT readiness deadline in seconds (default 60)
#   HARVEST_KAFKA_PROXIED_PORT, HARVEST_KAFKA_ADVERTISED_PORT (both or neither):
#                          a second listener, PROXIED, on 127.0.0.1:PROXIED_PORT that
#                          advertises 127.0.0.1:ADVERTISED_PORT, for a TCP fault proxy
#                          (toxiproxy.sh) listening there and forwarding to PROXIED_PORT:
#                          clients bootstrapped through the proxy stay on it; clients
#                          of PORT are unaffected
#   HARVEST_KAFKA_EXTRA_CONFIG  a file appended to server.properties (a later key
#                          overrides an earlier one, so it may redefine listeners=...,
#                          as scripts/services/tls.sh does for a SASL_SSL listener)
#   HARVEST_KAFKA_FORMAT_ARGS  extra arguments (split on whitespace) for the KRaft
#                          storage format, e.g. --add-scram 'SCRAM-SHA-512=[name=u,password=p]'
set -euo pipefail

SVC_NAME=kafka
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

PORT="${HARVEST_KAFKA_PORT:-19092}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "HARVEST_KAFKA_PORT must be a number, got '$PORT'"
CONTROLLER_PORT=$((PORT + 1))
STATE_DIR="${HARVEST_KAFKA_DIR:-/tmp/harvest-kafka-$PORT}"
BOOTSTRAP="127.0.0.1:$PORT"
TIMEOUT="${HARVEST_SERVICE_TIMEOUT:-60}"
HEAP="${HARVEST_KAFKA_HEAP:--Xms256m -Xmx512m}"
LOG4J_VERSION="${HARVEST_LOG4J_VERSION:-2.24.3}"
MARKER=.harvest-kafka
PIDFILE="$STATE_DIR/kafka.pid"
LOGFILE="$STATE_DIR/kafka.log"
PROXIED_PORT="${HARVEST_KAFKA_PROXIED_PORT:-}"
ADVERTISED_PORT="${HARVEST_KAFKA_ADVERTISED_PORT:-}"
EXTRA_CONFIG="${HARVEST_KAFKA_EXTRA_CONFIG:-}"
[[ -z "$EXTRA_CONFIG" || -r "$EXTRA_CONFIG" ]] || die "HARVEST_KAFKA_EXTRA_CONFIG '$EXTRA_CONFIG' is not a readable file"
# shellcheck disable=SC2206
FORMAT_ARGS=(${HARVEST_KAFKA_FORMAT_ARGS:-})
[[ -z "$PROXIED_PORT$ADVERTISED_PORT" || ( "$PROXIED_PORT" =~ ^[0-9]+$ && "$ADVERTISED_PORT" =~ ^[0-9]+$ ) ]] ||
  die "HARVEST_KAFKA_PROXIED_PORT and HARVEST_KAFKA_ADVERTISED_PORT must be set together, as numbers"

kafka_deps() {
  local v=$1
  cat <<EOF
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$v</version></dependency>
    <!-- Kafka 4 logs via SLF4J 1.x -> log4j2; without a binding it starts silently. -->
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
EOF
}

# ensure_libs: sets KAFKA_VERSION and LIBS, fetching jars on first use.
ensure_libs() {
  local candidates v dest
  if [[ -n "${HARVEST_KAFKA_VERSION:-}" ]]; then
    candidates=("$HARVEST_KAFKA_VERSION")
  else
    candidates=(4.4.0 4.1.0 4.0.0)
  fi
  # Prefer any candidate that is already cached (warm start never hits the network).
  for v in "${candidates[@]}"; do
    if [[ -f "$HARVEST_CACHE_DIR/kafka-$v/.complete" ]]; then
      KAFKA_VERSION=$v; LIBS="$HARVEST_CACHE_DIR/kafka-$v/libs"; return 0
    fi
  done
  for v in "${candidates[@]}"; do
    dest="$HARVEST_CACHE_DIR/kafka-$v"
    if mvn_fetch "$dest" "$(kafka_deps "$v")"; then
      KAFKA_VERSION=$v; LIBS="$dest/libs"; break
    fi
    log "Kafka $v did not resolve from Maven Central"
    rm -rf -- "$dest"
  done
  [[ -n "${LIBS:-}" ]] || die "could not fetch any Kafka version (${candidates[*]})"
  # Sanity-check that the classes we launch are really there.
  command -v unzip >/dev/null 2>&1 || return 0
  local cls jar found
  for cls in kafka/Kafka.class kafka/tools/StorageTool.class; do
    found=
    for jar in "$LIBS"/kafka_2.13-*.jar; do
      if unzip -l "$jar" "$cls" >/dev/null 2>&1; then found=1; fi
    done
    [[ -n "$found" ]] || log "warning: $cls not found in $LIBS/kafka_2.13-*.jar"
  done
}

ensure_kcat() {
  if command -v kcat >/dev/null 2>&1; then KCAT=kcat; return; fi
  if command -v kafkacat >/dev/null 2>&1; then KCAT=kafkacat; return; fi
  log "kcat not found; installing Debian package 'kcat'"
  if [[ $(id -u) -ne 0 ]]; then die "kcat missing and not root; run: sudo apt-get install -y kcat"; fi
  { apt-get install -y -qq kcat >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }; } ||
    die "apt-get install kcat failed"
  KCAT=kcat
}

# ready: the broker answers a metadata request and reports itself as broker 1.
ready() {
  local out
  out=$(timeout 10 "$KCAT" -b "$BOOTSTRAP" -L -m 3 -t __harvest_probe 2>/dev/null) || return 1
  grep -q "broker 1 at 127.0.0.1:$PORT" <<<"$out"
}

java_opts() {
  # shellcheck disable=SC2206
  JAVA_OPTS=($HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$STATE_DIR/log4j2.properties"
    -Dkafka.logs.dir="$STATE_DIR")
}

write_config() {
  mkdir -p "$STATE_DIR/data"
  touch "$STATE_DIR/$MARKER"
  local listeners="" advertised="" protocols=""
  if [[ -n $PROXIED_PORT ]]; then
    listeners=",PROXIED://127.0.0.1:$PROXIED_PORT"
    advertised=",PROXIED://127.0.0.1:$ADVERTISED_PORT"
    protocols=",PROXIED:PLAINTEXT"
  fi
  cat >"$STATE_DIR/server.properties" <<EOF
# Generated by scripts/services/kafka.sh - single node KRaft, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT$listeners
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$protocols
log.dirs=$STATE_DIR/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
# log retention: Kafka defaults (168h, no size limit).
EOF
  if [[ -n "$EXTRA_CONFIG" ]]; then
    { echo "# ---- appended from HARVEST_KAFKA_EXTRA_CONFIG=$EXTRA_CONFIG ----"; cat "$EXTRA_CONFIG"; } \
      >>"$STATE_DIR/server.properties"
  fi
  cat >"$STATE_DIR/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $LOGFILE
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
EOF
  cat >"$STATE_DIR/log4j2-tools.properties" <<EOF
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
}

fail_with_log() {
  log "$1"
  if [[ -f "$LOGFILE" ]]; then
    log "---- last 40 lines of $LOGFILE ----"
    tail -n 40 "$LOGFILE" >&2 || true
  fi
  if [[ -s "$STATE_DIR/kafka.out" ]]; then
    log "---- last 20 lines of $STATE_DIR/kafka.out (stdout/stderr) ----"
    tail -n 20 "$STATE_DIR/kafka.out" >&2 || true
  fi
  exit 1
}

wait_ready() {
  local deadline=$(( $(now_s) + TIMEOUT ))
  until ready; do
    pid_alive "$PIDFILE" || fail_with_log "Kafka process exited before becoming ready"
    (( $(now_s) < deadline )) || fail_with_log "Kafka not ready on $BOOTSTRAP after ${TIMEOUT}s (state: $STATE_DIR)"
    sleep 0.5
  done
}

cmd_start() {
  local t0=$EPOCHREALTIME
  need_cmd java "install a JDK >= 17"
  ensure_kcat
  if pid_alive "$PIDFILE"; then
    log "already running (pid $(<"$PIDFILE")); waiting for readiness"
    wait_ready
    echo "KAFKA_BOOTSTRAP=$BOOTSTRAP"
    return 0
  fi
  if port_open "$PORT" || port_open "$CONTROLLER_PORT"; then
    die "port $PORT or $CONTROLLER_PORT on 127.0.0.1 is already in use by a process this script did not start (no live pid in $PIDFILE); set HARVEST_KAFKA_PORT to another port"
  fi
  ensure_libs
  # Stale state from a crashed run: start from scratch.
  safe_rm_state "$STATE_DIR" "$MARKER"
  write_config
  java_opts

  local cluster_id
  # 16 random bytes, base64url without padding = a Kafka Uuid string. One in
  # 64 begins with '-', which the storage tool's argument parser takes for an
  # option ("--cluster-id: expected one argument"): draw again.
  cluster_id=-
  while [[ $cluster_id == -* ]]; do
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
  done
  log "Kafka $KAFKA_VERSION: formatting KRaft storage in $STATE_DIR/data (cluster id $cluster_id)"
  if ! java "${JAVA_OPTS[@]}" -Dlog4j2.configurationFile="$STATE_DIR/log4j2-tools.properties" \
      -cp "$LIBS/*" kafka.tools.StorageTool format -t "$cluster_id" \
      -c "$STATE_DIR/server.properties" ${FORMAT_ARGS[@]+"${FORMAT_ARGS[@]}"} >"$STATE_DIR/format.log" 2>&1; then
    log "storage format failed:"
    tail -n 20 "$STATE_DIR/format.log" >&2
    exit 1
  fi

  launch "$t0"
}

# launch T0: runs the broker on the configured state dir and waits for it.
launch() {
  log "starting broker+controller on $BOOTSTRAP (controller 127.0.0.1:$CONTROLLER_PORT), log $LOGFILE"
  # setsid: own session, so it survives the caller's process group being killed.
  setsid nohup java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.Kafka "$STATE_DIR/server.properties" \
    >>"$STATE_DIR/kafka.out" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_ready
  log "ready in $(since "$1")s (pid $(<"$PIDFILE"))"
  echo "KAFKA_BOOTSTRAP=$BOOTSTRAP"
}

# halt [--kill]: the broker down with its logs and offsets kept, for outage
# tests; `resume` brings the same broker back.
cmd_halt() {
  pid_alive "$PIDFILE" || die "Kafka is not running"
  if [[ "${1:-}" == --kill ]]; then
    log "killing pid $(<"$PIDFILE") (SIGKILL)"
    kill -KILL "$(<"$PIDFILE")"
    while pid_alive "$PIDFILE"; do sleep 0.1; done
  else
    stop_pidfile "$PIDFILE" 30
  fi
}

cmd_resume() {
  local t0=$EPOCHREALTIME
  pid_alive "$PIDFILE" && die "Kafka is already running (pid $(<"$PIDFILE"))"
  [[ -e "$STATE_DIR/$MARKER" && -f "$STATE_DIR/server.properties" ]] || die "no kept state in $STATE_DIR (start it instead)"
  ensure_kcat
  ensure_libs
  java_opts
  launch "$t0"
}

cmd_stop() {
  if pid_alive "$PIDFILE"; then
    stop_pidfile "$PIDFILE" 30
    log "stopped"
  else
    log "not running"
    if port_open "$PORT"; then
      log "warning: something else listens on 127.0.0.1:$PORT; not touching it"
    fi
  fi
  safe_rm_state "$STATE_DIR" "$MARKER"
}

cmd_status() {
  if ! pid_alive "$PIDFILE"; then
    log "not running"
    return 1
  fi
  ensure_kcat
  if ready; then
    log "running (pid $(<"$PIDFILE")) and ready on $BOOTSTRAP"
    echo "KAFKA_BOOTSTRAP=$BOOTSTRAP"
    return 0
  fi
  log "process $(<"$PIDFILE") alive but not answering metadata on $BOOTSTRAP"
  return 1
}

cmd_topic() {
  local name=${1:-} partitions=${2:-1}
  [[ -n "$name" ]] || die "usage: $0 topic NAME [PARTITIONS]"
  [[ "$partitions" =~ ^[0-9]+$ ]] || die "PARTITIONS must be a number"
  pid_alive "$PIDFILE" || die "Kafka is not running (start it first)"
  ensure_libs
  java_opts
  java "${JAVA_OPTS[@]}" -Dlog4j2.configurationFile="$STATE_DIR/log4j2-tools.properties" \
    -cp "$LIBS/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
    --create --if-not-exists --topic "$name" --partitions "$partitions" --replication-factor 1 >&2 ||
    die "creating topic '$name' failed"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  topic) shift; cmd_topic "$@" ;;
  halt) shift; cmd_halt "$@" ;;
  resume) cmd_resume ;;
  *) echo "usage: $0 start|stop|status|topic NAME [PARTITIONS]|halt [--kill]|resume" >&2; exit 2 ;;
esac
