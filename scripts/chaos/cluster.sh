# The Kafka-cluster scenario of scripts/chaos.sh (sourced by it, not run).
#
#   cluster   a three-node KRaft cluster (RF 3, min ISR 2) under the Kafka
#             quickstart: the broker leading most of orders.placed's
#             partitions kill -9-ed and restarted, then the active controller
#             (the quorum leader) kill -9-ed and restarted, while records flow.
#
# Each node stays down $CLUSTER_DOWN_S s (default 25), and records produced
# while the partition leader is down must be started before it returns
# (started_while_down=<n>,<n>: executions committed between 10 s after each
# kill and the restart; required of the leader's fault, reported for the
# controller's). For both faults, runs must start again within 10 s of Kafka
# dropping the dead node from every ISR (fenced_resumed_s=<fenced>/<resumed>,
# seconds after each kill, sampled once a second).
# PASS as for the other Kafka scenarios, and no rebuild storm: the app's
# consumer rebuilds (harvest_connector_recoveries_total, see app_recoveries) at most
# $CLUSTER_RECOVERIES_PER_FAULT (default 2) per fault. The count is added to
# the CHAOS line as recoveries=<n>.
ALL+=(cluster)

CLUSTER_UP=0
cluster_svc() { scripts/services/kafka_cluster.sh "$@" 2>>"$LOGS/kafka-cluster.log"; }
cluster_cleanup() { ((CLUSTER_UP)) && scripts/services/kafka_cluster.sh stop; }
CLEANUP_HOOKS+=(cluster_cleanup)

# cluster_start: a fresh cluster on six free ports, KAFKA_BOOTSTRAP exported,
# the quickstart's topic (8 partitions) created with RF 3 (kafka_orders_tool
# topic would make it RF 1).
cluster_start() {
  local p=27192 i busy
  if ((CLUSTER_UP)); then cluster_svc stop; fi
  while :; do
    busy=0
    for ((i = 0; i < 6; i++)); do (: <"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && busy=1; done
    ((busy)) || break
    p=$((p + 6))
  done
  export HARVEST_KAFKA_CLUSTER_PORT=$p HARVEST_KAFKA_CLUSTER_DIR="$STATE/kafka-cluster"
  CLUSTER_UP=1
  eval "$(cluster_svc start)"
  export KAFKA_BOOTSTRAP
  cluster_svc topic orders.placed 8 3
  log "cluster on $KAFKA_BOOTSTRAP; orders.placed leaders (partition leader): $(cluster_svc leaders orders.placed | tr '\n' ' ')"
}

# app_api_url NAME: the app's HTTP API base, from the port its log says it bound.
app_api_url() {
  local line
  line=$(grep -o 'HTTP API listening on http://[^ ]*' "$LOGS/$SCENARIO.$1.log" | tail -n1)
  [[ -n $line ]] || return 1
  line=${line#HTTP API listening on }
  echo "${line%/}"
}

# app_recoveries NAME: consumer rebuilds so far, summed over the app's
# bindings; empty when the app does not answer. harvest_connector_recoveries_total
# from /metrics when the app exports Prometheus metrics; the quickstart
# configures no exporter (its /metrics answers 404), so otherwise the same
# count (ConnectorRuntime::recoveries() is the status's rebuild count) from
# GET <api>/connectors, field "rebuilds".
app_recoveries() {
  local api body
  api=$(app_api_url "$1") || return 0
  if body=$(curl -sf --max-time 5 "${api%/api/harvest}/metrics" || curl -sf --max-time 5 "$api/metrics"); then
    awk '/^harvest_connector_recoveries_total[{ ]/ { s += $NF } END { print s + 0 }' <<<"$body"
    return 0
  fi
  body=$(curl -sf --max-time 5 "$api/connectors") || return 0
  grep -o '"rebuilds": *[0-9]*' <<<"$body" | awk -F: '{ s += $2 } END { print s + 0 }'
}

# cluster_fault WHAT NODE: kill -9 NODE and keep it down $CLUSTER_DOWN_S s
# (default 25): once the cluster has fenced it (10 s: KRaft's broker session
# timeout is 9 s, and a killed active controller must be replaced first),
# records produced meanwhile must be started while it is still down, not
# after it returns (executions grow between 10 s and the restart; counted in
# DURING_OUTAGE). Until the fence, acks=all writes wait for the dead replica
# and a dead group coordinator holds the group: Kafka's own stall, not
# harvest's. MUST_FLOW (default 1) 0: the count is reported, not required
# (the active controller's kill: see scenario_cluster). Then restart it,
# note when executions resume, and wait until its replicas are back in sync.
DURING_OUTAGE=""
FENCE_TO_RESUME=""
CLUSTER_STALLED=0
cluster_fault() {
  local what=$1 node=$2 must_flow=${3:-1} t_kill t c1="" c2 p1="" p2 s isr ex last="" fenced="" resumed=""
  local down=${CLUSTER_DOWN_S:-25}
  log "kill -9 node $node ($what); group coordinator: node $(cluster_svc coordinator harvest-orders)"
  cluster_svc halt "$node" --kill
  t_kill=$(now)
  # Once a second: is the dead node still in a partition's ISR (a record is
  # visible to consumers only once every ISR member has it), and have runs
  # started since the last sample?
  for ((s = 1; s <= down; s++)); do
    sleep 1
    isr=$(cluster_svc in-isr "$node" orders.placed)
    ex=$(kafka_executions)
    [[ -z $fenced && $isr == 0 ]] && fenced=$s
    [[ -n $fenced && -z $resumed && -n $last && ${ex:-0} -gt ${last:-0} ]] && resumed=$s
    last=$ex
    if ((s == 10)); then
      c1=$ex
      p1=$(cluster_svc produced orders.placed)
    fi
  done
  c2=$(kafka_executions)
  p2=$(cluster_svc produced orders.placed)
  log "node $node down: executions $c1 -> $c2, records on the topic ${p1:-?} -> ${p2:-?} between 10 s and $down s after the kill; dropped from every ISR ${fenced:-not within $down} s after the kill; runs started again at ${resumed:-never within $down} s; group coordinator: node $(cluster_svc coordinator harvest-orders)"
  DURING_OUTAGE+="${DURING_OUTAGE:+,}$((${c2:-0} - ${c1:-0}))"
  if ((must_flow)) && ! ((${c2:-0} > ${c1:-0} || ${c2:-0} >= RECORDS)); then
    log "no record started while node $node was down"
    CLUSTER_STALLED=1
  fi
  # Whatever the node was, runs must start again within 10 s of Kafka
  # dropping it from the ISRs (from then on records are visible again), so
  # long as records remain to start. Not sooner: the consumer group's session
  # (10 s) may have run out meanwhile, its coordinator not answering, and
  # the rejoin and the refetch from the committed offsets follow.
  if [[ -n $fenced ]] && ((fenced + 10 <= down)) && ((${c2:-0} < RECORDS)) &&
    { [[ -z $resumed ]] || ((resumed > fenced + 10)); }; then
    log "runs did not start again within 10 s of node $node leaving the ISRs"
    CLUSTER_STALLED=1
  fi
  FENCE_TO_RESUME+="${FENCE_TO_RESUME:+,}${fenced:-?}/${resumed:-?}"
  cluster_svc resume "$node"
  t=$(now)
  log "node $node back ($(elapsed "$t_kill")s after the kill); active controller now $(cluster_svc controller)"
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
  cluster_svc wait-isr 90 || log "node $node's replicas did not rejoin every ISR within 90 s"
  log "recoveries so far: $(app_recoveries app)"
}

scenario_cluster() {
  local producer_rc=0 counts leader ctl recoveries limit faults=2
  DURING_OUTAGE=""
  FENCE_TO_RESUME=""
  CLUSTER_STALLED=0
  cluster_start
  fresh_database
  kafka_records "$STATE/$SCENARIO.records" "$SCENARIO" "$RECORDS"
  kafka_app app HARVEST_INSTANCE_ID=$APP_ID
  # Long enough that records still arrive through both outages.
  kafka_produce "$STATE/$SCENARIO.records" 110

  sleep "$(rand_s 3 6)"
  # The broker leading most of the consumed partitions (ties: the lowest id).
  counts=$(cluster_svc leaders orders.placed | awk '{ n[$2]++ } END { for (b in n) print n[b], b }' | sort -k1,1nr -k2,2n)
  leader=$(head -n1 <<<"$counts" | awk '{ print $2 }')
  log "partitions led per broker: $(tr '\n' ' ' <<<"$counts")"
  cluster_fault "leader of $(head -n1 <<<"$counts" | awk '{ print $1 }') of 8 partitions" "$leader"

  sleep "$(rand_s 2 5)"
  ctl=$(cluster_svc controller)
  # Not required to flow between 10 s and the restart: the dead node stays
  # in every partition's ISR until a new controller is elected and fences
  # it on its own clock (its broker session timeout, 9 s), and until then
  # no record reaches the high watermark, so there is nothing to consume.
  # That took 10-20 s in some runs. What is required (in cluster_fault):
  # runs start again within 10 s of the node leaving the ISRs.
  cluster_fault "active controller" "$ctl" 0

  wait "$PRODUCER" || producer_rc=$?
  ((producer_rc == 0)) || { log "the producer failed ($producer_rc)"; UNEXPECTED+=(producer); }
  wait_settled kafka_settled 120 || log "not settled after 120 s"
  recoveries=$(app_recoveries app)
  stop_app app
  kafka_verify >/dev/null
  limit=$((faults * ${CLUSTER_RECOVERIES_PER_FAULT:-2}))
  if [[ -z $recoveries ]]; then
    log "could not read harvest_connector_recoveries_total from the app's /metrics"
    LINE=${LINE/RESULT=PASS/RESULT=FAIL}
    recoveries=unknown
  elif ((recoveries > limit)); then
    log "rebuild storm: $recoveries consumer rebuilds for $faults faults (limit $limit)"
    LINE=${LINE/RESULT=PASS/RESULT=FAIL}
  fi
  ((CLUSTER_STALLED)) && LINE=${LINE/RESULT=PASS/RESULT=FAIL}
  [[ $LINE == *RESULT=PASS ]] || FAILED=1
  LINE=${LINE/ RESULT=/ recoveries=$recoveries started_while_down=$DURING_OUTAGE fenced_resumed_s=$FENCE_TO_RESUME RESULT=}
  echo "$LINE"
  cluster_svc stop
  CLUSTER_UP=0
}
