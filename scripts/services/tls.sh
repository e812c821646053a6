#!/usr/bin/env bash
# TLS-protected test services on 127.0.0.1 for the `tls`-labelled tests:
# PostgreSQL (hostssl + scram-sha-256), Kafka (SASL_SSL, SCRAM-SHA-512 and PLAIN) and
# SQS (ElasticMQ behind an stunnel TLS terminator), all serving a certificate
# for localhost / 127.0.0.1 signed by a throwaway CA made here.
#
#   scripts/services/tls.sh start    # prints TLS_*=... assignments (also in $DIR/env)
#   scripts/services/tls.sh status   # exit 0 iff every service answers over TLS
#   scripts/services/tls.sh stop     # stop everything and delete the state dir
#
#   eval "$(scripts/services/tls.sh start)"
#
# Printed (single-quoted, eval-safe):
#   TLS_DIR, TLS_CA (good CA), TLS_WRONG_CA (an unrelated CA), TLS_CERT/TLS_KEY
#   (the good server certificate), TLS_EXPIRED_CERT (signed by the good CA, expired),
#   TLS_PG_USER, TLS_PG_PASSWORD, TLS_PG_PORT, TLS_PG_URL (verify-full, good CA),
#   TLS_PG_EXPIRED_PORT, TLS_PG_EXPIRED_URL (a second cluster serving the expired cert),
#   TLS_KAFKA_BOOTSTRAP (SASL_SSL), TLS_KAFKA_EXPIRED_BOOTSTRAP (SASL_SSL listener of
#   the same broker serving the expired cert), TLS_KAFKA_PLAINTEXT_BOOTSTRAP,
#   TLS_KAFKA_USER, TLS_KAFKA_PASSWORD, TLS_KAFKA_MECHANISM (SCRAM-SHA-512; PLAIN
#   takes the same user and password), TLS_KAFKA_SCRAM_MECHANISM (SCRAM-SHA-512),
#   TLS_SQS_ENDPOINT (https), TLS_SQS_EXPIRED_ENDPOINT (https, expired cert),
#   TLS_SQS_PLAIN_ENDPOINT (ElasticMQ itself, http)
#
# Env:
#   HARVEST_TLS_DIR          state dir (default /tmp/harvest-tls)
#   HARVEST_TLS_KAFKA_VERSION Kafka version of the TLS broker (default 3.9.0: see kafka_env)
#   HARVEST_TLS_KAFKA_TOPICS topics to create, NAME:PARTITIONS ... (default
#                            "orders.placed:8"; empty: none)
#   HARVEST_SERVICE_TIMEOUT  readiness deadline per service (default 60)
# Needs: openssl, psql + PostgreSQL server binaries, java + the Kafka/ElasticMQ
# jars kafka.sh/sqs.sh cache, kcat, curl, stunnel (Debian package stunnel4).
set -euo pipefail

SVC_NAME=tls
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
source "$HERE/../lib.sh"

DIR="${HARVEST_TLS_DIR:-/tmp/harvest-tls}"
MARKER=.harvest-tls
TOPICS="${HARVEST_TLS_KAFKA_TOPICS-orders.placed:8}"
TIMEOUT="${HARVEST_SERVICE_TIMEOUT:-60}"
PG_USER=harvest_tls
KAFKA_USER=harvest

# ---------------------------------------------------------------- certificates

# gen_certs: $DIR/ca.{pem,key}, wrong-ca.{pem,key}, server.{pem,key} (1 day),
# expired.{pem,key} (valid from 3 days ago to 2 days ago, signed by ca).
gen_certs() {
  local d="$DIR/certs"
  mkdir -p "$d/newcerts"
  : >"$d/index.txt"
  echo 1000 >"$d/serial"
  # openssl ca (not x509 -req): OpenSSL 3.0's x509 has no -not_before/-not_after,
  # and `ca -startdate/-enddate` makes an already-expired certificate without faketime.
  cat >"$d/ca.cnf" <<EOF
[ ca ]
default_ca = test_ca
[ test_ca ]
dir = $d
database = $d/index.txt
new_certs_dir = $d/newcerts
serial = $d/serial
default_md = sha256
policy = any_cn
unique_subject = no
copy_extensions = none
x509_extensions = server_ext
[ any_cn ]
commonName = supplied
[ server_ext ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
  local ca
  for ca in ca wrong-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3 \
      -keyout "$d/$ca.key" -out "$d/$ca.pem" -subj "/O=harvest tests/CN=harvest test $ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      2>/dev/null || die "openssl: creating $ca failed"
  done
  local name start end
  for name in server expired; do
    openssl req -new -newkey rsa:2048 -nodes -sha256 -keyout "$d/$name.key" -out "$d/$name.csr" \
      -subj "/O=harvest tests/CN=localhost" 2>/dev/null || die "openssl: CSR for $name failed"
    if [[ $name == server ]]; then
      start=$(date -u -d '1 hour ago' +%Y%m%d%H%M%SZ); end=$(date -u -d '1 day' +%Y%m%d%H%M%SZ)
    else
      start=$(date -u -d '3 days ago' +%Y%m%d%H%M%SZ); end=$(date -u -d '2 days ago' +%Y%m%d%H%M%SZ)
    fi
    openssl ca -batch -notext -config "$d/ca.cnf" -cert "$d/ca.pem" -keyfile "$d/ca.key" \
      -startdate "$start" -enddate "$end" -in "$d/$name.csr" -out "$d/$name.pem" \
      >"$d/$name.ca.log" 2>&1 || { cat "$d/$name.ca.log" >&2; die "openssl ca: signing $name failed"; }
  done
  openssl verify -CAfile "$d/ca.pem" "$d/server.pem" >/dev/null || die "server.pem does not verify"
  chmod 600 "$d"/*.key
  # Kafka: PKCS12 keystores (Java reads OpenSSL 3's default AES/PBKDF2 PKCS12).
  head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/keystore.password"
  for name in server expired; do
    openssl pkcs12 -export -name localhost -in "$d/$name.pem" -inkey "$d/$name.key" \
      -certfile "$d/ca.pem" -out "$d/$name.p12" -passout "file:$d/keystore.password" ||
      die "openssl pkcs12 ($name) failed"
  done
}

randhex() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# ------------------------------------------------------------------ PostgreSQL

# start_tls_pg NAME CERT PORT: a cluster in $DIR/NAME/data serving CERT (server
# or expired) with hostssl + scram-sha-256 for $PG_USER only.
start_tls_pg() {
  local name=$1 cert=$2 port=$3 base="$DIR/$1"
  mkdir -p "$base/ssl"
  cp "$DIR/certs/$cert.pem" "$base/ssl/server.pem"
  cp "$DIR/certs/$cert.key" "$base/ssl/server.key"
  cat >"$base/ssl/pg_hba.conf" <<EOF
# Generated by scripts/services/tls.sh: TCP only over TLS, only with a password.
# TYPE     DATABASE USER         ADDRESS       METHOD
local      all      all                        trust
hostssl    all      $PG_USER  127.0.0.1/32  scram-sha-256
hostnossl  all      all          0.0.0.0/0     reject
host       all      all          0.0.0.0/0     reject
EOF
  chmod 600 "$base/ssl/server.key"
  chmod 644 "$base/ssl/server.pem" "$base/ssl/pg_hba.conf"
  if [[ $(id -u) -eq 0 ]]; then chown -R postgres:postgres "$base/ssl"; fi
  log "starting PostgreSQL '$name' (ssl=on, $cert cert) on 127.0.0.1:$port"
  start_pg "$base/data" "$port" "-c ssl=on -c ssl_cert_file=$base/ssl/server.pem -c ssl_key_file=$base/ssl/server.key -c hba_file=$base/ssl/pg_hba.conf -c password_encryption=scram-sha-256" >&2 ||
    die "PostgreSQL '$name' did not start"
  echo "$port" >"$base/port"
  # Over the Unix socket (trust) as the bootstrap superuser.
  as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$base/data" -p "$port" -U harvest -d postgres >/dev/null <<SQL ||
CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$(<"$DIR/pg.password")';
CREATE DATABASE $PG_USER OWNER $PG_USER;
SQL
    die "creating role $PG_USER in '$name' failed"
}

pg_url() { # PORT
  echo "postgresql://$PG_USER:$(<"$DIR/pg.password")@localhost:$1/postgres?sslmode=verify-full&sslrootcert=$DIR/certs/ca.pem"
}

# -------------------------------------------------------------------- Kafka

# The TLS broker runs Kafka 3.9.0 by default: Kafka 3.9.1 and 4.x check the
# SCRAM nonce strictly (the CVE-2024-56128 fix), which librdkafka before 2.6.1
# (Debian 12 has 2.0.2, what harvest links) fails even with the right
# password; 3.9.0 completes SCRAM-SHA-512 with it.
kafka_env() {
  export HARVEST_KAFKA_PORT="$(<"$DIR/kafka.port")" HARVEST_KAFKA_DIR="$DIR/kafka"
  export HARVEST_KAFKA_VERSION="${HARVEST_TLS_KAFKA_VERSION:-3.9.0}"
}

start_tls_kafka() {
  local port tls_port exp_port pw ks_pw
  port=$(free_port 29092)
  tls_port=$(free_port $((port + 2)))
  exp_port=$(free_port $((tls_port + 2)))
  echo "$port" >"$DIR/kafka.port"; echo "$tls_port" >"$DIR/kafka-tls.port"; echo "$exp_port" >"$DIR/kafka-expired.port"
  pw=$(<"$DIR/kafka.password")
  ks_pw=$(<"$DIR/certs/keystore.password")
  # Appended to kafka.sh's server.properties; later keys win. PLAINTEXT stays
  # (kafka.sh's readiness probe, topic creation, inter-broker); CONTROLLER too.
  cat >"$DIR/kafka-tls.properties" <<EOF
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1)),SASL_SSL://127.0.0.1:$tls_port,EXPIRED://127.0.0.1:$exp_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://localhost:$tls_port,EXPIRED://localhost:$exp_port
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,EXPIRED:SASL_SSL
# SCRAM-SHA-512 (credential stored at format time) and PLAIN (same user and
# password, from the JAAS line). librdkafka < 2.6.1 (Debian 12 has 2.0.2)
# cannot complete SCRAM with Kafka >= 3.9.1/4.x (server-side nonce check,
# CVE-2024-56128 fix), hence Kafka 3.9.0 here (kafka_env).
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.expired.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_USER="$pw";
listener.name.expired.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_USER="$pw";
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$DIR/certs/server.p12
listener.name.sasl_ssl.ssl.keystore.password=$ks_pw
listener.name.sasl_ssl.ssl.key.password=$ks_pw
listener.name.expired.ssl.keystore.type=PKCS12
listener.name.expired.ssl.keystore.location=$DIR/certs/expired.p12
listener.name.expired.ssl.keystore.password=$ks_pw
listener.name.expired.ssl.key.password=$ks_pw
ssl.client.auth=none
EOF
  kafka_env
  log "starting Kafka (SASL_SSL on localhost:$tls_port, expired cert on :$exp_port, PLAINTEXT on 127.0.0.1:$port)"
  HARVEST_KAFKA_EXTRA_CONFIG="$DIR/kafka-tls.properties" \
  HARVEST_KAFKA_FORMAT_ARGS="--add-scram SCRAM-SHA-512=[name=$KAFKA_USER,password=$pw]" \
    "$HERE/kafka.sh" start >/dev/null || die "Kafka did not start"
  local spec
  for spec in $TOPICS; do
    "$HERE/kafka.sh" topic "${spec%%:*}" "${spec##*:}" 2>&1 | grep -v '^WARNING' >&2 || true
  done
  # The credential must be usable over SASL_SSL (metadata request, PLAIN: see above).
  local deadline=$(( $(now_s) + TIMEOUT ))
  until kafka_tls_ready; do
    (( $(now_s) < deadline )) || die "Kafka SASL_SSL listener localhost:$tls_port not answering metadata: $(kafka_tls_probe 2>&1 | tail -3)"
    sleep 0.5
  done
}

kafka_tls_probe() {
  timeout 15 kcat -b "localhost:$(<"$DIR/kafka-tls.port")" -X security.protocol=SASL_SSL \
    -X sasl.mechanisms=PLAIN -X sasl.username="$KAFKA_USER" -X sasl.password="$(<"$DIR/kafka.password")" \
    -X ssl.ca.location="$DIR/certs/ca.pem" -m 10 -L
}
kafka_tls_ready() { kafka_tls_probe 2>/dev/null | grep -q "broker 1 at localhost:$(<"$DIR/kafka-tls.port")"; }

# ---------------------------------------------------------------------- SQS

start_tls_sqs() {
  local port tls_port exp_port
  port=$(free_port 29324)
  tls_port=$(free_port $((port + 2)))
  exp_port=$(free_port $((tls_port + 2)))
  echo "$port" >"$DIR/sqs.port"; echo "$tls_port" >"$DIR/sqs-tls.port"; echo "$exp_port" >"$DIR/sqs-expired.port"
  log "starting ElasticMQ on 127.0.0.1:$port (queue URLs: https://localhost:$tls_port)"
  HARVEST_SQS_PORT=$port HARVEST_SQS_DIR="$DIR/sqs" HARVEST_SQS_IMPL=elasticmq \
  HARVEST_SQS_PUBLIC_URL="https://localhost:$tls_port" "$HERE/sqs.sh" start >/dev/null || die "ElasticMQ did not start"
  [[ "$(cat "$DIR/sqs/impl" 2>/dev/null)" == elasticmq ]] || log "warning: sqs.sh fell back to moto; queue URLs will say http://"
  local d="$DIR/certs"
  cat >"$DIR/stunnel.conf" <<EOF
; Generated by scripts/services/tls.sh: TLS terminators in front of ElasticMQ.
foreground = yes
pid =
output = $DIR/stunnel.log
debug = notice
[sqs]
accept = 127.0.0.1:$tls_port
connect = 127.0.0.1:$port
cert = $d/server.pem
key = $d/server.key
[sqs-expired]
accept = 127.0.0.1:$exp_port
connect = 127.0.0.1:$port
cert = $d/expired.pem
key = $d/expired.key
EOF
  log "starting stunnel: https://localhost:$tls_port (good cert), :$exp_port (expired cert) -> ElasticMQ"
  setsid nohup stunnel "$DIR/stunnel.conf" >>"$DIR/stunnel.out" 2>&1 </dev/null &
  echo $! >"$DIR/stunnel.pid"
  local deadline=$(( $(now_s) + TIMEOUT ))
  until sqs_tls_ready; do
    pid_alive "$DIR/stunnel.pid" || { tail -20 "$DIR/stunnel.log" "$DIR/stunnel.out" >&2 2>/dev/null; die "stunnel exited"; }
    (( $(now_s) < deadline )) || die "https://localhost:$tls_port not answering"
    sleep 0.2
  done
}

sqs_tls_ready() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$DIR/certs/ca.pem" -X POST \
    -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}' \
    "https://localhost:$(<"$DIR/sqs-tls.port")/") || return 1
  [[ $code == 200 ]]
}

# ------------------------------------------------------------------ commands

print_env() {
  local q="'"
  {
    echo "TLS_DIR='$DIR'"
    echo "TLS_CA='$DIR/certs/ca.pem'"
    echo "TLS_WRONG_CA='$DIR/certs/wrong-ca.pem'"
    echo "TLS_CERT='$DIR/certs/server.pem'"
    echo "TLS_KEY='$DIR/certs/server.key'"
    echo "TLS_EXPIRED_CERT='$DIR/certs/expired.pem'"
    echo "TLS_PG_USER='$PG_USER'"
    echo "TLS_PG_PASSWORD='$(<"$DIR/pg.password")'"
    echo "TLS_PG_PORT='$(<"$DIR/pg/port")'"
    echo "TLS_PG_URL=$q$(pg_url "$(<"$DIR/pg/port")")$q"
    echo "TLS_PG_EXPIRED_PORT='$(<"$DIR/pg-expired/port")'"
    echo "TLS_PG_EXPIRED_URL=$q$(pg_url "$(<"$DIR/pg-expired/port")")$q"
    echo "TLS_KAFKA_BOOTSTRAP='localhost:$(<"$DIR/kafka-tls.port")'"
    echo "TLS_KAFKA_EXPIRED_BOOTSTRAP='localhost:$(<"$DIR/kafka-expired.port")'"
    echo "TLS_KAFKA_PLAINTEXT_BOOTSTRAP='127.0.0.1:$(<"$DIR/kafka.port")'"
    echo "TLS_KAFKA_MECHANISM='SCRAM-SHA-512'"
    echo "TLS_KAFKA_SCRAM_MECHANISM='SCRAM-SHA-512'"
    echo "TLS_KAFKA_USER='$KAFKA_USER'"
    echo "TLS_KAFKA_PASSWORD='$(<"$DIR/kafka.password")'"
    echo "TLS_SQS_ENDPOINT='https://localhost:$(<"$DIR/sqs-tls.port")'"
    echo "TLS_SQS_EXPIRED_ENDPOINT='https://localhost:$(<"$DIR/sqs-expired.port")'"
    echo "TLS_SQS_PLAIN_ENDPOINT='http://127.0.0.1:$(<"$DIR/sqs.port")'"
  } >"$DIR/env.tmp"
  mv "$DIR/env.tmp" "$DIR/env"
  cat "$DIR/env"
}

pg_ready() { # NAME
  [[ -f "$DIR/$1/port" ]] && as_pg "$(pg_bin pg_isready)" -q -h "$DIR/$1/data" -p "$(<"$DIR/$1/port")"
}

all_ready() {
  [[ -f "$DIR/env" ]] || return 1
  pg_ready pg && pg_ready pg-expired || return 1
  psql -X -At "$(pg_url "$(<"$DIR/pg/port")")" -c 'select 1' >/dev/null 2>&1 || return 1
  kafka_tls_ready || return 1
  pid_alive "$DIR/stunnel.pid" && sqs_tls_ready
}

cmd_start() {
  local t0=$EPOCHREALTIME
  need_cmd openssl; need_cmd psql; need_cmd java; need_cmd kcat "apt-get install -y kcat"; need_cmd curl
  need_cmd stunnel "apt-get install -y stunnel4"
  if [[ -e "$DIR/$MARKER" ]]; then
    if all_ready; then
      log "already running ($DIR)"
      cat "$DIR/env"
      return 0
    fi
    log "stale or partial state in $DIR: stopping it and starting afresh"
    cmd_stop
  fi
  safe_rm_state "$DIR" "$MARKER"
  mkdir -p "$DIR"
  touch "$DIR/$MARKER"
  chmod 755 "$DIR"
  # On any failure below (die exits), tear down what was started.
  trap 'rc=$?; if [[ $rc -ne 0 ]]; then log "start failed; cleaning up"; cmd_stop || true; fi' EXIT
  gen_certs
  randhex >"$DIR/pg.password"
  randhex >"$DIR/kafka.password"
  local pg_port exp_port
  pg_port=$(free_port 25432)
  start_tls_pg pg server "$pg_port"
  exp_port=$(free_port $((pg_port + 2)))
  start_tls_pg pg-expired expired "$exp_port"
  psql -X -At "$(pg_url "$pg_port")" -c 'select 1' >/dev/null ||
    die "psql over TLS (verify-full) to 127.0.0.1:$pg_port failed"
  start_tls_kafka
  start_tls_sqs
  trap - EXIT
  log "ready in $(since "$t0")s; state and env file in $DIR"
  print_env
}

cmd_stop() {
  if [[ ! -d "$DIR" ]]; then log "not running"; return 0; fi
  [[ -e "$DIR/$MARKER" ]] || die "$DIR exists but was not created by this script (no $MARKER); remove it by hand"
  stop_pidfile "$DIR/stunnel.pid" 10
  if [[ -f "$DIR/sqs.port" && -d "$DIR/sqs" ]]; then
    HARVEST_SQS_PORT="$(<"$DIR/sqs.port")" HARVEST_SQS_DIR="$DIR/sqs" "$HERE/sqs.sh" stop || true
  fi
  if [[ -f "$DIR/kafka.port" && -d "$DIR/kafka" ]]; then
    (kafka_env; "$HERE/kafka.sh" stop) || true
  fi
  local n
  for n in pg pg-expired; do
    [[ -d "$DIR/$n/data" ]] && stop_pg "$DIR/$n/data"
  done
  safe_rm_state "$DIR" "$MARKER"
  log "stopped; removed $DIR"
}

cmd_status() {
  if [[ -e "$DIR/$MARKER" ]] && all_ready; then
    log "running and answering over TLS ($DIR)"
    cat "$DIR/env"
    return 0
  fi
  log "not running (or not answering) in $DIR"
  return 1
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
