#!/usr/bin/env bash
# Installs every system dependency of dspark from Debian 12 packages. Idempotent: packages that
# are already installed are skipped, so a second run does nothing.
set -euo pipefail
pkgs=(build-essential cmake g++ git pkg-config
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      python3 python3-venv python3-pip
      clang libclang-rt-14-dev
      libopenblas-dev
      libboost-dev  # header-only Boost.Asio + Beast: the HTTP event loop and parser of dspark serve
      xz-utils      # decompresses the shipped regen ids (suffix index of the SmolLM2 default, training data)
      prometheus  # promtool lints /metrics; the cluster test runs a Prometheus on loopback
      haproxy     # the cluster test's load balancer (deploy/haproxy/dspark.cfg)
      chromium)   # the chat page test drives headless Chromium
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup_deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
