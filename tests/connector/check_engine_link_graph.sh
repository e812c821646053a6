#!/usr/bin/env bash
# CON-1: fails if the engine's link graph reaches a broker client.
#   $1: a binary linked against harvest_engine only   $2: the build dir
set -euo pipefail
probe="$1" build="$2"
fail=0
# 1. Shared libraries actually loaded.
if ldd "$probe" | grep -Ei 'rdkafka|libcurl'; then
  echo "FAIL: engine link graph loads a broker client library"; fail=1
fi
# 2. Symbols linked in (static libraries of ours included).
if nm -C "$probe" | grep -Ei 'rd_kafka|RdKafka|curl_easy|harvest::kafka|harvest::sqs'; then
  echo "FAIL: engine link graph contains broker client code"; fail=1
fi
# 3. The build graph: the engine target's link line names no broker library.
for f in $(find "$build" -path '*engine_link_probe.dir/link.txt'); do
  if grep -Ei 'rdkafka|curl|harvest_kafka|harvest_sqs' "$f"; then
    echo "FAIL: engine_link_probe's link line names a broker library"; fail=1
  fi
done
[[ $fail -eq 0 ]] && echo "engine link graph: no librdkafka, libcurl, kafka or sqs code"
exit $fail
