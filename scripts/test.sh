#!/usr/bin/env bash
# Fresh Debian 12 -> all tests passing: dependencies, build, model download, ctest (unit + model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
build/release/dspark get gemma3-270m
export DSPARK_MODEL="${DSPARK_MODEL:-$(build/release/dspark get gemma3-270m --print-path)}"
ctest --preset release -j 1 "$@"
