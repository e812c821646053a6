# shellcheck shell=bash
# Shared helpers for scripts/services/*.sh. Sourced, not executed.
#
# Conventions: machine-readable results (KAFKA_BOOTSTRAP=..., SQS_ENDPOINT=...)
# go to stdout; every progress/error message goes to stderr, so callers can do
#   eval "$(scripts/services/kafka.sh start)"

HARVEST_CACHE_DIR="${HARVEST_CACHE_DIR:-$HOME/.cache/harvest}"
SVC_NAME="${SVC_NAME:-service}"

log() { printf '[%s] %s\n' "$SVC_NAME" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$SVC_NAME" "$*" >&2; exit 1; }

need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH${2:+ ($2)}"
}

# now_s: seconds counter for deadlines.
now_s() { date +%s; }
# since T0 (from $EPOCHREALTIME) -> elapsed seconds with one decimal, e.g. "3.4".
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# port_open PORT -> 0 if something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

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
