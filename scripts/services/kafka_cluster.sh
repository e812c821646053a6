#!/usr/bin/env bash
# A three-node Apache Kafka cluster (KRaft, every node broker+controller,
# static quorum) for harvest's fault tests. The jars are kafka.sh's, from the
# same cache; the single-node kafka.sh is unchanged.
#
#   scripts/services/kafka_cluster.sh start      # prints KAFKA_BOOTSTRAP=127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3
#   scripts/services/kafka_cluster.sh status     # exit 0 iff every node answers and sees all three brokers
#   scripts/services/kafka_cluster.sh stop       # stop every node and delete the state dir
#   scripts/services/kafka_cluster.sh topic NAME [PARTITIONS] [RF]   # create a topic (RF 3 by default), idempotent
#   scripts/services/kafka_cluster.sh halt ID [--kill]   # stop node ID (1..3), keep its state (SIGTERM, or SIGKILL: a crash)
#   scripts/services/kafka_cluster.sh resume ID  # start node ID again on its kept state, wait until it answers
#   scripts/services/kafka_cluster.sh leaders TOPIC      # one line per partition: "<partition> <leader id>"
#   scripts/services/kafka_cluster.sh controller # the active controller's (quorum leader's) node id
#   scripts/services/kafka_cluster.sh wait-isr [SECONDS] # until every partition has its full ISR again (default 60 s)
#   scripts/services/kafka_cluster.sh port ID    # node ID's broker port
#   scripts/services/kafka_cluster.sh produced TOPIC     # records on TOPIC so far (the sum of its partitions' end offsets)
#   scripts/services/kafka_cluster.sh coordinator GROUP  # the node coordinating consumer group GROUP
#   scripts/services/kafka_cluster.sh in-isr ID TOPIC    # how many of TOPIC's partitions still list node ID in their ISR
#
# Layout: node i (1..3) serves PLAINTEXT on PORT+2(i-1) and its controller
# listener on PORT+2(i-1)+1, so the cluster takes the six ports PORT..PORT+5.
# Replication: default.replication.factor=3, min.insync.replicas=2; the
# internal topics (offsets, transactions, share state) RF 3, min ISR 2.
# unclean.leader.election.enable stays false (Kafka's default).
#
# Env:
#   HARVEST_KAFKA_CLUSTER_PORT  first port (default 19192)
#   HARVEST_KAFKA_CLUSTER_DIR   state dir (default /tmp/harvest-kafka-cluster-$PORT); node i in node<i>/
#   HARVEST_KAFKA_CLUSTER_HEAP  JVM heap flags per node (default "-Xms128m -Xmx384m")
#   HARVEST_KAFKA_VERSION, HARVEST_CACHE_DIR, HARVEST_SERVICE_TIMEOUT as for kafka.sh
set -euo pipefail

SVC_NAME=kafka-cluster
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

NODES=3
PORT="${HARVEST_KAFKA_CLUSTER_PORT:-19192}"
[[ "$PORT" =~ ^[0-9]+$ ]] || die "HARVEST_KAFKA_CLUSTER_PORT must be a number, got '$PORT'"
STATE_DIR="${HARVEST_KAFKA_CLUSTER_DIR:-/tmp/harvest-kafka-cluster-$PORT}"
TIMEOUT="${HARVEST_SERVICE_TIMEOUT:-60}"
HEAP="${HARVEST_KAFKA_CLUSTER_HEAP:--Xms128m -Xmx384m}"
LOG4J_VERSION="${HARVEST_LOG4J_VERSION:-2.24.3}"
MARKER=.harvest-kafka-cluster

broker_port() { echo $((PORT + 2 * ($1 - 1))); }
controller_port() { echo $((PORT + 2 * ($1 - 1) + 1)); }
node_dir() { echo "$STATE_DIR/node$1"; }
pidfile() { echo "$STATE_DIR/node$1/kafka.pid"; }
bootstrap() {
  local i out=()
  for ((i = 1; i <= NODES; i++)); do out+=("127.0.0.1:$(broker_port "$i")"); done
  (IFS=,; echo "${out[*]}")
}
BOOTSTRAP=$(bootstrap)
VOTERS=$(for ((i = 1; i <= NODES; i++)); do printf '%s%d@127.0.0.1:%d' "$([[ $i -gt 1 ]] && echo ,)" "$i" "$(controller_port "$i")"; done)

kafka_deps() {
  local v=$1
  cat <<EOF
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$v</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
EOF
}

# ensure_libs: LIBS from kafka.sh's cache (same dir, same marker), fetched on first use.
ensure_libs() {
  local candidates v dest
  if [[ -n "${HARVEST_KAFKA_VERSION:-}" ]]; then candidates=("$HARVEST_KAFKA_VERSION"); else candidates=(4.4.0 4.1.0 4.0.0); fi
  for v in "${candidates[@]}"; do
    if [[ -f "$HARVEST_CACHE_DIR/kafka-$v/.complete" ]]; then
      KAFKA_VERSION=$v; LIBS="$HARVEST_CACHE_DIR/kafka-$v/libs"; return 0
    fi
  done
  for v in "${candidates[@]}"; do
    dest="$HARVEST_CACHE_DIR/kafka-$v"
    if mvn_fetch "$dest" "$(kafka_deps "$v")"; then KAFKA_VERSION=$v; LIBS="$dest/libs"; return 0; fi
    log "Kafka $v did not resolve from Maven Central"
    rm -rf -- "$dest"
  done
  die "could not fetch any Kafka version (${candidates[*]})"
}

ensure_kcat() {
  if command -v kcat >/dev/null 2>&1; then KCAT=kcat; return; fi
  if command -v kafkacat >/dev/null 2>&1; then KCAT=kafkacat; return; fi
  [[ $(id -u) -eq 0 ]] || die "kcat missing and not root; run: sudo apt-get install -y kcat"
  log "kcat not found; installing Debian package 'kcat'"
  { apt-get install -y -qq kcat >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }; } ||
    die "apt-get install kcat failed"
  KCAT=kcat
}

java_opts() {  # java_opts DIR
  # shellcheck disable=SC2206
  JAVA_OPTS=($HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1 -Xss512k
    -XX:CICompilerCount=2 -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$1/log4j2.properties" -Dkafka.logs.dir="$1")
}
TOOL_OPTS=(-Xms64m -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true)

# tool CLASS ARGS...: a Kafka command-line tool against the cluster, WARN logs to stderr.
tool() {  # tool CLASS ARGS...; run under `timeout $TOOL_TIMEOUT` when that is set
  local cls=$1
  shift
  ensure_libs
  ${TOOL_TIMEOUT:+timeout "$TOOL_TIMEOUT"} java "${TOOL_OPTS[@]}" -Dlog4j2.configurationFile="$STATE_DIR/log4j2-tools.properties" \
    -cp "$LIBS/*" "$cls" "$@"
}

write_config() {  # write_config ID
  local i=$1 dir bp cp
  dir=$(node_dir "$i"); bp=$(broker_port "$i"); cp=$(controller_port "$i")
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<EOF
# Generated by scripts/services/kafka_cluster.sh - node $i of $NODES, KRaft, loopback only.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://127.0.0.1:$bp,CONTROLLER://127.0.0.1:$cp
advertised.listeners=PLAINTEXT://127.0.0.1:$bp
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
auto.create.topics.enable=false
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
share.coordinator.state.topic.num.partitions=3
# Small machine: few threads per node.
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
background.threads=2
num.recovery.threads.per.data.dir=1
# A dead follower leaves the ISR after 10 s (Kafka's default is 30 s).
replica.lag.time.max.ms=10000
EOF
  cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/kafka.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
EOF
}

write_tool_log_config() {
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

# metadata VIA_PORT: kcat's metadata listing from one node (all topics).
metadata() { timeout 10 "$KCAT" -b "127.0.0.1:$1" -L -m 5 2>/dev/null; }

# node_ready ID: the node answers metadata and lists itself.
node_ready() {
  local bp out
  bp=$(broker_port "$1")
  out=$(timeout 10 "$KCAT" -b "127.0.0.1:$bp" -L -m 3 -t __harvest_probe 2>/dev/null) || return 1
  grep -q "broker $1 at 127.0.0.1:$bp" <<<"$out"
}

# cluster_ready: some node lists all three brokers.
cluster_ready() {
  local out i
  out=$(timeout 10 "$KCAT" -b "$BOOTSTRAP" -L -m 3 -t __harvest_probe 2>/dev/null) || return 1
  for ((i = 1; i <= NODES; i++)); do
    grep -q "broker $i at 127.0.0.1:$(broker_port "$i")" <<<"$out" || return 1
  done
}

fail_with_log() {  # fail_with_log MESSAGE [ID]
  log "$1"
  local i
  for i in ${2:-$(seq 1 $NODES)}; do
    [[ -f "$(node_dir "$i")/kafka.log" ]] || continue
    log "---- node $i: last 25 lines of $(node_dir "$i")/kafka.log ----"
    tail -n 25 "$(node_dir "$i")/kafka.log" >&2 || true
    if [[ -s "$(node_dir "$i")/kafka.out" ]]; then
      log "---- node $i: last 10 lines of kafka.out ----"
      tail -n 10 "$(node_dir "$i")/kafka.out" >&2 || true
    fi
  done
  exit 1
}

launch_node() {  # launch_node ID
  local dir
  dir=$(node_dir "$1")
  java_opts "$dir"
  setsid nohup java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.Kafka "$dir/server.properties" \
    >>"$dir/kafka.out" 2>&1 </dev/null &
  echo $! >"$(pidfile "$1")"
  log "node $1 started (pid $!), broker 127.0.0.1:$(broker_port "$1"), controller 127.0.0.1:$(controller_port "$1")"
}

any_alive() {
  local i
  for ((i = 1; i <= NODES; i++)); do pid_alive "$(pidfile "$i")" && return 0; done
  return 1
}

check_id() {
  [[ "${1:-}" =~ ^[1-9][0-9]*$ ]] && (($1 <= NODES)) || die "node id must be 1..$NODES, got '${1:-}'"
}

cmd_start() {
  local t0=$EPOCHREALTIME i deadline cluster_id
  need_cmd java "install a JDK >= 17"
  ensure_kcat
  if any_alive; then
    for ((i = 1; i <= NODES; i++)); do
      pid_alive "$(pidfile "$i")" || die "node $i is down while others run; 'resume $i' or 'stop' first"
    done
    log "already running; waiting for readiness"
  else
    for ((i = 1; i <= NODES; i++)); do
      if port_open "$(broker_port "$i")" || port_open "$(controller_port "$i")"; then
        die "port $(broker_port "$i") or $(controller_port "$i") is in use by a process this script did not start; set HARVEST_KAFKA_CLUSTER_PORT"
      fi
    done
    ensure_libs
    safe_rm_state "$STATE_DIR" "$MARKER"
    mkdir -p "$STATE_DIR"
    touch "$STATE_DIR/$MARKER"
    write_tool_log_config
    cluster_id=-
    while [[ $cluster_id == -* ]]; do
      cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    echo "$cluster_id" >"$STATE_DIR/cluster.id"
    log "Kafka $KAFKA_VERSION: formatting $NODES nodes in $STATE_DIR (cluster id $cluster_id, voters $VOTERS)"
    for ((i = 1; i <= NODES; i++)); do
      write_config "$i"
      if ! tool kafka.tools.StorageTool format -t "$cluster_id" -c "$(node_dir "$i")/server.properties" \
          >"$(node_dir "$i")/format.log" 2>&1; then
        log "storage format of node $i failed:"
        tail -n 20 "$(node_dir "$i")/format.log" >&2
        exit 1
      fi
    done
    for ((i = 1; i <= NODES; i++)); do launch_node "$i"; done
  fi
  deadline=$(($(now_s) + TIMEOUT))
  until cluster_ready; do
    for ((i = 1; i <= NODES; i++)); do
      pid_alive "$(pidfile "$i")" || fail_with_log "node $i exited before the cluster became ready" "$i"
    done
    (($(now_s) < deadline)) || fail_with_log "cluster not ready on $BOOTSTRAP after ${TIMEOUT}s (state: $STATE_DIR)"
    sleep 0.5
  done
  log "ready in $(since "$t0")s"
  echo "KAFKA_BOOTSTRAP=$BOOTSTRAP"
}

cmd_stop() {
  local i
  for ((i = 1; i <= NODES; i++)); do
    if pid_alive "$(pidfile "$i")"; then kill -TERM "$(<"$(pidfile "$i")")" 2>/dev/null || true; fi
  done
  # Brokers shut down together: a controlled shutdown waits on a quorum that
  # is leaving too, so the grace period is short.
  for ((i = 1; i <= NODES; i++)); do stop_pidfile "$(pidfile "$i")" 15; done
  safe_rm_state "$STATE_DIR" "$MARKER"
  log "stopped"
}

cmd_status() {
  local i rc=0
  ensure_kcat
  for ((i = 1; i <= NODES; i++)); do
    if ! pid_alive "$(pidfile "$i")"; then
      log "node $i: not running"; rc=1
    elif node_ready "$i"; then
      log "node $i: running (pid $(<"$(pidfile "$i")")) on 127.0.0.1:$(broker_port "$i")"
    else
      log "node $i: process alive but not answering on 127.0.0.1:$(broker_port "$i")"; rc=1
    fi
  done
  ((rc == 0)) && cluster_ready && echo "KAFKA_BOOTSTRAP=$BOOTSTRAP"
  return "$rc"
}

cmd_halt() {
  local id=${1:-} pf pid
  check_id "$id"
  pf=$(pidfile "$id")
  pid_alive "$pf" || die "node $id is not running"
  pid=$(<"$pf")
  if [[ "${2:-}" == --kill ]]; then
    log "node $id: kill -9 pid $pid"
    kill -KILL "$pid"
    while pid_alive "$pf"; do sleep 0.1; done
  else
    stop_pidfile "$pf" 30
  fi
}

cmd_resume() {
  local id=${1:-} t0=$EPOCHREALTIME deadline
  check_id "$id"
  pid_alive "$(pidfile "$id")" && die "node $id is already running"
  [[ -e "$STATE_DIR/$MARKER" && -f "$(node_dir "$id")/server.properties" ]] || die "no kept state for node $id in $STATE_DIR"
  ensure_kcat
  ensure_libs
  launch_node "$id"
  deadline=$(($(now_s) + TIMEOUT))
  until node_ready "$id"; do
    pid_alive "$(pidfile "$id")" || fail_with_log "node $id exited before becoming ready" "$id"
    (($(now_s) < deadline)) || fail_with_log "node $id not ready after ${TIMEOUT}s" "$id"
    sleep 0.3
  done
  log "node $id ready in $(since "$t0")s"
}

# leaders TOPIC: "<partition> <leader>" per partition, from any live node.
cmd_leaders() {
  local topic=${1:?usage: leaders TOPIC}
  ensure_kcat
  timeout 10 "$KCAT" -b "$BOOTSTRAP" -L -t "$topic" -m 5 2>/dev/null |
    awk '$1 == "partition" { p = $2; sub(",", "", p); l = $4; sub(",", "", l); print p, l }'
}

# controller: the quorum leader's node id (MetadataQuorumCommand ... describe --status).
cmd_controller() {
  local out id
  out=$(tool org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$BOOTSTRAP" describe --status 2>&1) ||
    die "describe --status failed: $(tail -n 3 <<<"$out")"
  id=$(awk -F': *' '$1 == "LeaderId" { print $2 }' <<<"$out")
  [[ -n $id ]] || die "no LeaderId in: $out"
  echo "$id"
}

# wait-isr [SECONDS]: until, on a node's metadata, every partition's ISR has
# as many members as its replica list (a restarted node caught up).
cmd_wait_isr() {
  local secs=${1:-60} deadline t0=$EPOCHREALTIME short full=0
  ensure_kcat
  deadline=$(($(now_s) + secs))
  while :; do
    short=$(timeout 10 "$KCAT" -b "$BOOTSTRAP" -L -m 5 2>/dev/null | awk '
      $1 == "partition" { for (i = 1; i <= NF; i++) { v = $(i+1); sub(/,$/, "", v)
                                                      if ($i == "replicas:") r = split(v, a, ","); if ($i == "isrs:") s = split(v, b, ",") }
                          if (s < r) n++; seen++ }
      END { print (seen ? n + 0 : -1) }') || short=-1
    # Twice in a row: one node's metadata may lag the controller's by a moment.
    if [[ $short == 0 ]]; then
      ((++full >= 2)) && { log "every ISR full after $(since "$t0")s"; return 0; }
    else
      full=0
    fi
    (($(now_s) < deadline)) || { log "ISRs still short after ${secs}s ($short partitions)"; return 1; }
    sleep 0.5
  done
}

# produced TOPIC: the sum of TOPIC's end offsets, from any live node (empty
# when no node answers within 8 s).
cmd_produced() {
  local topic=${1:?usage: produced TOPIC}
  TOOL_TIMEOUT=8 tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$BOOTSTRAP" --topic "$topic" 2>/dev/null |
    awk -F: '{ s += $NF; n++ } END { if (n) print s }'
}

# in-isr ID TOPIC: how many of TOPIC's partitions list node ID in their ISR,
# on a live node's metadata (a dead node stays there until the active
# controller fences it).
cmd_in_isr() {
  local id=${1:?usage: in-isr ID TOPIC} topic=${2:?usage: in-isr ID TOPIC}
  ensure_kcat
  timeout 10 "$KCAT" -b "$BOOTSTRAP" -L -t "$topic" -m 5 2>/dev/null | awk -v id="$id" '
    $1 == "partition" { for (i = 1; i <= NF; i++) if ($i == "isrs:") { v = $(i+1); sub(/,$/, "", v)
                        n = split(v, a, ","); for (j = 1; j <= n; j++) if (a[j] == id) c++ } }
    END { print c + 0 }'
}

# coordinator GROUP: the node id of GROUP's coordinator (ConsumerGroupCommand
# --describe --state); empty when no node answers within 8 s.
cmd_coordinator() {
  local group=${1:?usage: coordinator GROUP}
  TOOL_TIMEOUT=8 tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$BOOTSTRAP" \
    --describe --group "$group" --state 2>/dev/null | awk 'match($0, /\([0-9]+\)/) { print substr($0, RSTART + 1, RLENGTH - 2); exit }'
}

cmd_topic() {
  local name=${1:-} partitions=${2:-1} rf=${3:-3}
  [[ -n "$name" ]] || die "usage: $0 topic NAME [PARTITIONS] [RF]"
  [[ "$partitions" =~ ^[0-9]+$ && "$rf" =~ ^[0-9]+$ ]] || die "PARTITIONS and RF must be numbers"
  tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
    --topic "$name" --partitions "$partitions" --replication-factor "$rf" --config min.insync.replicas=2 >&2 ||
    die "creating topic '$name' failed"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  halt) shift; cmd_halt "$@" ;;
  resume) shift; cmd_resume "$@" ;;
  leaders) shift; cmd_leaders "$@" ;;
  controller) cmd_controller ;;
  produced) shift; cmd_produced "$@" ;;
  coordinator) shift; cmd_coordinator "$@" ;;
  in-isr) shift; cmd_in_isr "$@" ;;
  wait-isr) shift; cmd_wait_isr "$@" ;;
  topic) shift; cmd_topic "$@" ;;
  port) check_id "${2:-}"; broker_port "$2" ;;
  *) echo "usage: $0 start|stop|status|topic NAME [PARTITIONS] [RF]|halt ID [--kill]|resume ID|leaders TOPIC|controller|wait-isr [S]|port ID" >&2; exit 2 ;;
esac
