#!/usr/bin/env bash
# Builds the API reference: Doxygen over the supported headers
# (docs/Doxyfile, the list in docs/compatibility.md) into
# build/apidocs/html. Any warning fails it — an undocumented public class,
# function or field among them.
#   scripts/apidocs.sh [OUTPUT_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"
command -v doxygen >/dev/null || scripts/setup.sh
export HARVEST_APIDOCS_OUT="${1:-$HARVEST_ROOT/build/apidocs}"
mkdir -p "$HARVEST_APIDOCS_OUT"
doxygen docs/Doxyfile
echo "apidocs: $HARVEST_APIDOCS_OUT/html/index.html"
