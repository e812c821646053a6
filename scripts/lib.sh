# shellcheck shell=bash
# Shared helpers for every harvest script (sourced, not run): the top-level
# scripts (test.sh, demo.sh, bench.sh, chaos.sh and the scenario files it
# sources, ...), the service scripts in services/ and tests' shell drivers.
# Sourcing it only defines the functions and variables below: it prints
# nothing, starts nothing and sets no shell option.
#
# Conventions: machine-readable results (KAFKA_BOOTSTRAP=..., SQS_ENDPOINT=...)
# go to stdout; every progress/error message goes to stderr, so callers can do
#   eval "$(scripts/services/kafka.sh start)"

# ------------------------------------------------------------ paths, settings

# shellcheck disable=SC2034  # used by the scripts that source this file
HARVEST_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Cache of fetched jars and binaries (services/: kafka-<v>/, elasticmq-<v>/, ...).
HARVEST_CACHE_DIR="${HARVEST_CACHE_DIR:-$HOME/.cache/harvest}"
# The tag of log and die; each service script sets it before sourcing this.
SVC_NAME="${SVC_NAME:-service}"

# -------------------------------------------------------------------- logging

log() { printf '[%s] %s\n' "$SVC_NAME" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$SVC_NAME" "$*" >&2; exit 1; }

# need_cmd CMD [HINT]: die unless CMD is on PATH.
need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH${2:+ ($2)}"
}

# ----------------------------------------------------------------------- time

# now_s: seconds counter for deadlines.
now_s() { date +%s; }
# since T0 (from $EPOCHREALTIME) -> elapsed seconds with one decimal, e.g. "3.4".
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------------- ports

# port_open PORT -> 0 if something accepts TCP connections on 127.0.0.1:PORT.
# Pure bash: a refused connect means nothing listens.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port <preferred>: the preferred TCP port if nothing listens on it (and
# on the next one, which the Kafka controller takes), else the first such
# port above it.
free_port() {
  local p="$1"
  while port_open "$p" || port_open "$((p + 1))"; do
    p=$((p + 2))
  done
  echo "$p"
}

# ------------------------------------------------------------------ processes

# pid_alive PIDFILE -> 0 if the pid in PIDFILE is a live process.
pid_alive() {
  local pidfile=$1 pid
  [[ -s "$pidfile" ]] || return 1
  pid=$(<"$pidfile")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # A zombie still answers kill -0; treat it as dead.
  [[ "$(ps -o stat= -p "$pid" 2>/dev/null)" != Z* ]]
}

# stop_pidfile PIDFILE [TERM_TIMEOUT_S]: SIGTERM, wait, then SIGKILL.
stop_pidfile() {
  local pidfile=$1 timeout=${2:-30} pid deadline
  if ! pid_alive "$pidfile"; then
    return 0
  fi
  pid=$(<"$pidfile")
  log "stopping pid $pid (SIGTERM, ${timeout}s grace)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$(( $(now_s) + timeout ))
  while pid_alive "$pidfile"; do
    if (( $(now_s) >= deadline )); then
      log "pid $pid still alive after ${timeout}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      # Gone before returning, so a restart never finds it still running.
      deadline=$(( $(now_s) + 10 ))
      while kill -0 "$pid" 2>/dev/null && (( $(now_s) < deadline )); do sleep 0.1; done
      break
    fi
    sleep 0.2
  done
}

# safe_rm_state DIR MARKER: remove a state dir only if it is one we created
# (contains MARKER), so a mistyped HARVEST_*_DIR can never wipe something else.
safe_rm_state() {
  local dir=$1 marker=$2
  [[ -n "$dir" && "$dir" != "/" ]] || die "refusing to remove state dir '$dir'"
  [[ -d "$dir" ]] || return 0
  if [[ -e "$dir/$marker" ]]; then
    rm -rf -- "$dir"
  else
    die "state dir $dir exists but was not created by this script (no $marker); remove it by hand"
  fi
}

# ----------------------------------------------------------------- PostgreSQL

# pg_bin <tool>: path of a PostgreSQL server binary (Debian keeps them off PATH).
pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }
  done
  command -v "$1"
}

# Runs a command as the owner of PostgreSQL clusters: PostgreSQL (and
# PgBouncer) refuse to run as root, so under root it runs as the `postgres`
# system user.
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# start_pg <dir> <port> [settings]: initdb (if needed) and start a cluster on
# 127.0.0.1. The test cluster trades durability for speed (fsync,
# synchronous_commit and full_page_writes off); `settings` ("-c name=value
# ...") come last and override those. On failure it prints the initdb or
# server log on stdout (callers that print results there redirect it).
start_pg() {
  local dir="$1" port="$2" settings="${3:-}"
  mkdir -p "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres:postgres "$dir"
  if [[ ! -f "$dir/PG_VERSION" ]]; then
    as_pg "$(pg_bin initdb)" -D "$dir" -U harvest --auth=trust -E UTF8 --no-locale >"$dir.initdb.log" 2>&1 \
      || { cat "$dir.initdb.log"; return 1; }
  fi
  as_pg "$(pg_bin pg_ctl)" -D "$dir" -w -t 60 -l "$dir/server.log" \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off $settings" \
    start >/dev/null || { tail -20 "$dir/server.log"; return 1; }
}

# stop_pg <dir>: immediate stop of the cluster in <dir>, if it runs; never fails.
stop_pg() {
  local dir="$1"
  [[ -f "$dir/postmaster.pid" ]] && as_pg "$(pg_bin pg_ctl)" -D "$dir" -m immediate stop >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------------- Maven

# mvn_fetch DEST_DIR DEPENDENCIES_XML
# Resolves the given <dependency> elements (and their runtime deps) from Maven
# Central with `mvn dependency:copy-dependencies` into DEST_DIR/libs.
# Idempotent: a DEST_DIR/.complete marker short-circuits later calls.
# Returns non-zero (without exiting) if resolution fails, so callers can try
# another version.
MAVEN_DEPENDENCY_PLUGIN="${MAVEN_DEPENDENCY_PLUGIN:-org.apache.maven.plugins:maven-dependency-plugin:3.6.1}"
mvn_fetch() {
  local dest=$1 deps=$2 rc=0
  [[ -f "$dest/.complete" && -d "$dest/libs" ]] && return 0
  need_cmd mvn "install Maven, e.g. apt-get install -y maven"
  mkdir -p "$dest"
  # NB: set -e does not apply inside a subshell that is the left side of ||,
  # so every step below checks its own status.
  (
    # Serialise concurrent fetches of the same artifact set.
    exec 9>"$dest/.lock" || exit 1
    flock 9 || exit 1
    [[ -f "$dest/.complete" && -d "$dest/libs" ]] && exit 0
    rm -rf "$dest/libs" "$dest/libs.tmp" || exit 1
    cat >"$dest/pom.xml" <<EOF || exit 1
<?xml version="1.0" encoding="UTF-8"?>
<!-- Throwaway pom written by harvest scripts/services; only used to fetch jars. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>harvest.local</groupId>
  <artifactId>service-fetch</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
$deps
  </dependencies>
</project>
EOF
    log "fetching jars from Maven Central into $dest/libs (log: $dest/mvn.log)"
    if ! mvn -B -f "$dest/pom.xml" "$MAVEN_DEPENDENCY_PLUGIN:copy-dependencies" \
        -DoutputDirectory="$dest/libs.tmp" -DincludeScope=runtime \
        >"$dest/mvn.log" 2>&1; then
      log "mvn dependency:copy-dependencies failed:"
      grep -m 2 -E "^\[ERROR\] .+" "$dest/mvn.log" >&2 || true
      rm -rf "$dest/libs.tmp"
      exit 1
    fi
    mv "$dest/libs.tmp" "$dest/libs" && touch "$dest/.complete"
  ) || rc=$?
  return "$rc"
}
