#!/usr/bin/env bash
# Build the GGUF fuzzer with `cmake --preset fuzz` (clang++, ASan + UBSan + libFuzzer) and run it.
#   scripts/fuzz_gguf.sh [seconds=600]
# Seeds come from tests/fuzz/corpus (read only); new inputs go to build/fuzz/corpus_gguf, crash
# reproducers to build/fuzz/artifacts/, the log to build/fuzz/fuzz_gguf.log (or $FUZZ_LOG).
# Exits non-zero if the fuzzer finds a crash, leak, timeout or oversized allocation.
set -euo pipefail

secs="${1:-600}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log="${FUZZ_LOG:-$root/build/fuzz/fuzz_gguf.log}"
jobs="${FUZZ_BUILD_JOBS:-2}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_gguf -j "$jobs"

work="$root/build/fuzz/corpus_gguf"
artifacts="$root/build/fuzz/artifacts/"
mkdir -p "$work" "$artifacts" "$(dirname "$log")"

echo "fuzz_gguf: running for ${secs}s, log in $log"
set +e
"$root/build/fuzz/tests/fuzz/fuzz_gguf" "$work" "$root/tests/fuzz/corpus" \
  -dict="$root/tests/fuzz/gguf.dict" -max_len=65536 -max_total_time="$secs" \
  -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
  -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e

grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true
grep -E '^stat::' "$log" || true
if [ "$rc" -ne 0 ]; then
  echo "fuzz_gguf: FAILED (exit $rc): see $log and $artifacts" >&2
  grep -E 'ERROR|SUMMARY|internal error|Test unit written' "$log" >&2 || true
  exit "$rc"
fi
echo "fuzz_gguf: no crash in ${secs}s"
