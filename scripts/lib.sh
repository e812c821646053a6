# Shared helpers for harvest's scripts (sourced, not run).

HARVEST_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# pg_bin <tool>: path of a PostgreSQL server binary (Debian keeps them off PATH).
pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }
  done
  command -v "$1"
}

# Runs a command as the owner of PostgreSQL clusters: PostgreSQL refuses to
# run as root, so under root it runs as the `postgres` system user.
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# free_port <preferred>: the preferred TCP port if nothing listens on it (and
# on the next one, which the Kafka controller takes), else the first such
# port above it. Pure bash: a refused connect means free.
free_port() {
  local p="$1"
  while (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null || (: <"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; do
    p=$((p + 2))
  done
  echo "$p"
}

# start_pg <dir> <port> [settings]: initdb (if needed) and start a cluster on
# 127.0.0.1. The test cluster trades durability for speed (fsync,
# synchronous_commit and full_page_writes off); `settings` ("-c name=value
# ...") come last and override those.
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

stop_pg() {
  local dir="$1"
  [[ -f "$dir/postmaster.pid" ]] && as_pg "$(pg_bin pg_ctl)" -D "$dir" -m immediate stop >/dev/null 2>&1 || true
}
