#!/usr/bin/env bash
# Fresh Debian 12 -> all tests passing: dependencies, build, model download, ctest (unit + model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
build/release/dspark get gemma3-270m
export DSPARK_MODEL="${DSPARK_MODEL:-$(build/release/dspark get gemma3-270m --print-path)}"
build/release/dspark get smollm2-135m
export DSPARK_SMOLLM2_MODEL="${DSPARK_SMOLLM2_MODEL:-$(build/release/dspark get smollm2-135m --print-path)}"
# The server test drives `dspark serve` with the official openai client (pinned in requirements.txt),
# installed into a private venv so the system Python stays untouched.
venv=build/pyenv-test
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import openai" 2>/dev/null ||
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$(grep '^openai==' requirements.txt)"
export DSPARK_TEST_PYTHON="$PWD/$venv/bin/python"
ctest --preset release -j 1 "$@"
