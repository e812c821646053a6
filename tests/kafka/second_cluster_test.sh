#!/usr/bin/env bash
# Cluster identity: starts a second single-node Kafka (its own cluster id)
# beside the test broker and runs the cluster-identity test against both.
#   tests/kafka/second_cluster_test.sh TEST_BINARY     (ctest: kafka.second_cluster)
set -euo pipefail
BIN=$(realpath "${1:?usage: second_cluster_test.sh TEST_BINARY}")
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source scripts/lib.sh
: "${HARVEST_TEST_KAFKA_BOOTSTRAP:?the test broker (scripts/test.sh starts it)}"
PORT=$(free_port 29092)
export HARVEST_KAFKA_PORT=$PORT HARVEST_KAFKA_DIR="${TMPDIR:-/tmp}/harvest-kafka-second.$$"
cleanup() { scripts/services/kafka.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
eval "$(scripts/services/kafka.sh start)"
HARVEST_TEST_KAFKA_SECOND_BOOTSTRAP=$KAFKA_BOOTSTRAP "$BIN"
