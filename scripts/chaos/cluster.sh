# The Kafka-cluster scenario of scripts/chaos.sh (sourced by it, not run).
#
#   cluster   a three-node KRaft cluster (RF 3, min ISR 2) under the Kafka
#             quickstart: the broker leading most of orders.placed's
#             partitions kill -9-ed and restarted, then the active controller
#             (the quorum leader) kill -9-ed and restarted, while records flow.
#
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

# cluster_fault WHAT NODE: kill -9 NODE, restart it after a seeded pause,
# note when executions resume, and wait until its replicas are back in sync.
cluster_fault() {
  local what=$1 node=$2 t_kill t during
  log "kill -9 node $node ($what)"
  cluster_svc halt "$node" --kill
  t_kill=$(now)
  sleep "$(rand_s 1 4)"
  cluster_svc resume "$node"
  t=$(now)
  log "node $node back ($(elapsed "$t_kill")s after the kill); active controller now $(cluster_svc controller)"
  note_resume "$(await_progress "$t" kafka_executions "$RECORDS")"
  cluster_svc wait-isr 90 || log "node $node's replicas did not rejoin every ISR within 90 s"
  log "recoveries so far: $(app_recoveries app)"
}

scenario_cluster() {
  local producer_rc=0 counts leader ctl recoveries limit faults=2
  cluster_start
  fresh_database
  kafka_records "$STATE/$SCENARIO.records" "$SCENARIO" "$RECORDS"
  kafka_app app HARVEST_INSTANCE_ID=$APP_ID
  kafka_produce "$STATE/$SCENARIO.records" 50

  sleep "$(rand_s 3 6)"
  # The broker leading most of the consumed partitions (ties: the lowest id).
  counts=$(cluster_svc leaders orders.placed | awk '{ n[$2]++ } END { for (b in n) print n[b], b }' | sort -k1,1nr -k2,2n)
  leader=$(head -n1 <<<"$counts" | awk '{ print $2 }')
  log "partitions led per broker: $(tr '\n' ' ' <<<"$counts")"
  cluster_fault "leader of $(head -n1 <<<"$counts" | awk '{ print $1 }') of 8 partitions" "$leader"

  sleep "$(rand_s 2 5)"
  ctl=$(cluster_svc controller)
  cluster_fault "active controller" "$ctl"

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
  [[ $LINE == *RESULT=PASS ]] || FAILED=1
  LINE=${LINE/ RESULT=/ recoveries=$recoveries RESULT=}
  echo "$LINE"
  cluster_svc stop
  CLUSTER_UP=0
}
