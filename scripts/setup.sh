#!/usr/bin/env bash
# Installs every build and test dependency from the machine's package
# registries. Idempotent: on a machine that has everything it only checks.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libpq-dev postgresql pgbouncer
  librdkafka-dev libcurl4-openssl-dev libssl-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev
  prometheus-cpp-dev libcli11-dev libcpp-httplib-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  kcat curl
  faketime doxygen iptables stunnel4 openssl
  chromium
)
# The Kafka and SQS test servers are Java programs fetched with Maven.
command -v java >/dev/null || APT_PACKAGES+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || APT_PACKAGES+=(maven)
# The console's browser test runs on Node.js (tests/browser).
command -v node >/dev/null || APT_PACKAGES+=(nodejs)
command -v npm >/dev/null || APT_PACKAGES+=(npm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The browser test's npm packages (playwright-core drives the Chromium
# installed above; it downloads no browser), exactly as the lockfile pins
# them; reinstalled when the lockfile changes.
BROWSER_TESTS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/browser"
if [[ ! -f $BROWSER_TESTS/node_modules/.package-lock.json ||
  $BROWSER_TESTS/package-lock.json -nt $BROWSER_TESTS/node_modules/.package-lock.json ]]; then
  echo "setup: installing the browser test's npm packages"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$BROWSER_TESTS" --no-audit --no-fund >/dev/null
fi
echo "setup: all dependencies present"
