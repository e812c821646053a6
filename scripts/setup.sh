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
  faketime doxygen
)
# The Kafka and SQS test servers are Java programs fetched with Maven.
command -v java >/dev/null || APT_PACKAGES+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || APT_PACKAGES+=(maven)

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
echo "setup: all dependencies present"
