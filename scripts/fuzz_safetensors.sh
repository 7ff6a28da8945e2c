#!/usr/bin/env bash
# Build the safetensors fuzzer with `cmake --preset fuzz` (clang++, ASan + UBSan + libFuzzer) and
# run it.
#   scripts/fuzz_safetensors.sh [seconds=600]
# Seeds come from tests/fuzz/corpus_safetensors (read only); new inputs go to
# build/fuzz/corpus_safetensors, crash reproducers to build/fuzz/artifacts_safetensors/, the log to
# build/fuzz/fuzz_safetensors.log (or $FUZZ_LOG). A JSON/safetensors token dictionary is written
# to build/fuzz/safetensors.dict. Exits non-zero if the fuzzer finds a crash, leak, timeout or
# oversized allocation.
set -euo pipefail

secs="${1:-600}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log="${FUZZ_LOG:-$root/build/fuzz/fuzz_safetensors.log}"
jobs="${FUZZ_BUILD_JOBS:-2}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_safetensors -j "$jobs"

work="$root/build/fuzz/corpus_safetensors"
artifacts="$root/build/fuzz/artifacts_safetensors/"
dict="$root/build/fuzz/safetensors.dict"
mkdir -p "$work" "$artifacts" "$(dirname "$log")"

cat >"$dict" <<'DICT'
"__metadata__"
"\"dtype\""
"\"shape\""
"\"data_offsets\""
"\"F64\""
"\"F32\""
"\"F16\""
"\"BF16\""
"\"I64\""
"\"I32\""
"\"I16\""
"\"I8\""
"\"U8\""
"\"BOOL\""
"\"F8_E4M3\""
"{"
"}"
"["
"]"
":"
","
"null"
"true"
"-1"
"0"
"18446744073709551615"
"18446744073709551616"
"9223372036854775807"
"4294967296"
"1e400"
"\\u0000"
"\\ud800"
"\\udc00"
"\\ud83d\\ude00"
"\\\""
"\x00\x00\x00\x00\x00\x00\x00"
DICT

echo "fuzz_safetensors: running for ${secs}s, log in $log"
set +e
"$root/build/fuzz/tests/fuzz/fuzz_safetensors" "$work" "$root/tests/fuzz/corpus_safetensors" \
  -dict="$dict" -max_len=65536 -max_total_time="$secs" \
  -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
  -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e

grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true
grep -E '^stat::' "$log" || true
if [ "$rc" -ne 0 ]; then
  echo "fuzz_safetensors: FAILED (exit $rc): see $log and $artifacts" >&2
  grep -E 'ERROR|SUMMARY|internal error|Test unit written' "$log" >&2 || true
  exit "$rc"
fi
echo "fuzz_safetensors: no crash in ${secs}s"
