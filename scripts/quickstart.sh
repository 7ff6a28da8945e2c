#!/usr/bin/env bash
# Fresh Debian 12 -> a generation on the default model: dependencies, build, model download, run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
build/release/dspark get gemma3-270m
build/release/dspark generate --model gemma3-270m --chat -n 128 \
  -p "${1:-Explain in three sentences why the sky is blue.}"
