#!/usr/bin/env bash
# Build a parser fuzzer with `cmake --preset fuzz` (clang++, ASan + UBSan + libFuzzer) and run it.
#   scripts/fuzz.sh gguf|safetensors|openai_api|http|bpe [seconds=600]
# Seeds: tests/fuzz/corpus (gguf) or tests/fuzz/corpus_<target> (read only), dictionary
# tests/fuzz/<target>.dict. New inputs go to build/fuzz/corpus_<target>, crash reproducers to
# build/fuzz/artifacts_<target>/, the log to build/fuzz/fuzz_<target>.log (or $FUZZ_LOG).
# Exits non-zero if the fuzzer finds a crash, leak, timeout or oversized allocation.
set -euo pipefail

target="${1:-}"
case "$target" in
  gguf) seeds="tests/fuzz/corpus" ;;
  safetensors) seeds="tests/fuzz/corpus_safetensors" ;;
  openai_api) seeds="tests/fuzz/corpus_openai_api" ;;
  http) seeds="tests/fuzz/corpus_http" ;;
  bpe) seeds="tests/fuzz/corpus_bpe" ;;
  *) echo "usage: scripts/fuzz.sh gguf|safetensors|openai_api|http|bpe [seconds]" >&2; exit 2 ;;
esac
secs="${2:-600}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log="${FUZZ_LOG:-$root/build/fuzz/fuzz_$target.log}"
jobs="${FUZZ_BUILD_JOBS:-2}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "fuzz_$target" -j "$jobs"

work="$root/build/fuzz/corpus_$target"
artifacts="$root/build/fuzz/artifacts_$target/"
mkdir -p "$work" "$artifacts" "$(dirname "$log")"

echo "fuzz_$target: running for ${secs}s, log in $log"
set +e
"$root/build/fuzz/tests/fuzz/fuzz_$target" "$work" "$root/$seeds" \
  -dict="$root/tests/fuzz/$target.dict" -max_len=65536 -max_total_time="$secs" \
  -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
  -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e

grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true
grep -E '^stat::' "$log" || true
if [ "$rc" -ne 0 ]; then
  echo "fuzz_$target: FAILED (exit $rc): see $log and $artifacts" >&2
  grep -E 'ERROR|SUMMARY|internal error|Test unit written' "$log" >&2 || true
  exit "$rc"
fi
echo "fuzz_$target: no crash in ${secs}s"
