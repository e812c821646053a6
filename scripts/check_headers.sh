#!/usr/bin/env bash
# Compiles every header of an installed harvest alone, each in its own
# translation unit (`#include <harvest/...>` and nothing else), with only the
# flags `pkg-config --cflags harvest` gives: a header that leans on an
# include it does not make, or on a file that is not installed, fails here.
#   scripts/check_headers.sh PREFIX
set -euo pipefail
PREFIX="${1:?usage: check_headers.sh PREFIX}"
CFLAGS="$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags harvest)"
export CFLAGS
cd "$PREFIX/include"
headers=$(find harvest -name '*.hpp' | sort)
count=$(echo "$headers" | wc -l)
check() {
  # shellcheck disable=SC2086
  echo "#include <$1>" | c++ -x c++ -fsyntax-only -Wall -Wextra $CFLAGS - ||
    { echo "check_headers: <$1> does not compile alone" >&2; return 1; }
}
export -f check
echo "$headers" | xargs -P "${HARVEST_TEST_JOBS:-2}" -I{} bash -c 'check {}'
echo "check_headers: $count installed headers each compile alone"
