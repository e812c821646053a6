#!/usr/bin/env bash
# Installs every build and test dependency from the machine's package
# registries. Idempotent: on a machine that has everything it only checks.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libpq-dev postgresql pgbouncer
  librdkafka-dev libcurl4-openssl-dev libssl-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libre2-dev
  prometheus-cpp-dev libcli11-dev libcpp-httplib-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  kcat curl
  faketime doxygen iptables stunnel4 openssl procps
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

# The chaos suite's network scenarios put Toxiproxy between the app and its
# services; scripts/services/toxiproxy.sh builds the pinned toxiproxy-server
# with `go install`, which needs Go 1.23 or later (its go.mod says go 1.23.0).
# Debian 12's own golang-go is 1.19, too old even to read that go.mod;
# bookworm-backports has golang-go 1.23. Backports are never chosen on their
# own (apt ranks the suite below the release), so adding it changes no other
# package: only the one asked for with -t comes from it.
GO_MIN_MINOR=23
go_recent() {
  local v minor
  v=$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null) || return 1  # go1.23.5
  [[ $v =~ ^go1\.([0-9]+) ]] || return 1
  minor=${BASH_REMATCH[1]}
  ((minor >= GO_MIN_MINOR))
}
GO_APT=()
if ! go_recent; then
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [[ $codename == bookworm ]]; then
    GO_APT=(-t bookworm-backports golang-go)
  else
    GO_APT=(golang-go)
  fi
fi

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
if ((${#missing[@]})) || ((${#GO_APT[@]})); then
  if [[ ${GO_APT[0]:-} == -t ]] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "setup: adding Debian's bookworm-backports suite (for golang-go >= 1.$GO_MIN_MINOR)"
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
      $SUDO tee /etc/apt/sources.list.d/harvest-bookworm-backports.sources >/dev/null
  fi
  $SUDO apt-get update -qq
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ((${#GO_APT[@]})); then
  echo "setup: installing Go >= 1.$GO_MIN_MINOR (apt-get install ${GO_APT[*]})"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${GO_APT[@]}" >/dev/null
  hash -r
  go_recent || {
    echo "setup: Go >= 1.$GO_MIN_MINOR is still not the first 'go' on PATH ($(command -v go || echo none)); Toxiproxy cannot be built" >&2
    exit 1
  }
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
