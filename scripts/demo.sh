#!/usr/bin/env bash
# The README's first command: installs, builds, starts a private PostgreSQL
# and runs a durable workflow end to end — started, crashed mid-run (SIGKILL),
# resumed by a new process without repeating its finished step, woken by a
# signal, completed — then prints its history. Stops what it started.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"

scripts/setup.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
cmake --preset release >/dev/null
cmake --build --preset release --target engine_demo

DEMO_DIR="${HARVEST_DEMO_DIR:-/tmp/harvest-demo-$(id -u)}"
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
chmod 755 "$DEMO_DIR"
PG_PORT="$(free_port 54329)"
trap 'stop_pg "$DEMO_DIR/pg"' EXIT
start_pg "$DEMO_DIR/pg" "$PG_PORT"
as_pg psql -q -h 127.0.0.1 -p "$PG_PORT" -U harvest -d postgres -c 'CREATE DATABASE harvest' >/dev/null
export HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/harvest"
export HARVEST_PROFILE=dev HARVEST_LOG_LEVEL=warn
DEMO="$HARVEST_ROOT/build/release/examples/engine_demo"

cd "$DEMO_DIR"
mkdir -p .harvest
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. start workflow 'onboarding' for user-42 (private PostgreSQL on 127.0.0.1:$PG_PORT)"
"$DEMO" start

step "2. a worker runs it and is killed (SIGKILL) right after its first step is recorded"
set +e
HARVEST_FAULT_POINTS=worker.after_step_recorded=kill "$DEMO" work waiting
rc=$?
set -e
echo "worker process exited with status $rc (137 = killed)"

step "3. a new worker resumes once the dead worker's lease lapses; it waits for approval"
"$DEMO" work waiting

step "4. send the 'approve' signal"
"$DEMO" signal

step "5. the run wakes up and completes"
"$DEMO" work completed

step "side effects actually performed (each step exactly once)"
cat .harvest/demo-effects.log

step "durable history"
"$DEMO" show
