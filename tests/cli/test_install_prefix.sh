#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then the installed dspark, run from an unrelated
# directory, finds what it ships with no path flags: `dspark ab --n-prompts 4 -n 16` must read the
# evaluation prompts from PREFIX/share/dspark/data, and `generate` must mount the shipped drafter
# from PREFIX/share/dspark/drafters.
# Usage: test_install_prefix.sh BUILD_DIR [MODEL.gguf]   (else $DSPARK_MODEL; exit 77 = skipped)
set -u
build="$1"
model="${2:-${DSPARK_MODEL:-}}"
if [ -z "$model" ] || [ ! -f "$model" ]; then
  echo "skip: no model (set DSPARK_MODEL)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL install"; exit 1; }
bin="$tmp/prefix/bin/dspark"
fail=0
for f in bin/dspark share/dspark/data/spec_bench_dev.jsonl share/dspark/drafters/gemma3-270m/config.json \
         share/dspark/scripts/plot_ab.py share/dspark/scripts/cluster.sh share/dspark/deploy/haproxy/dspark.cfg; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL not installed: $f"; fail=1; }
done
mkdir "$tmp/elsewhere" && cd "$tmp/elsewhere" || exit 2
"$bin" ab -m "$model" --n-prompts 4 -n 16 --bootstrap 200 --a serial --b draft-kind=ngram,num-draft-tokens=3 \
  --json >"$tmp/ab.json" 2>"$tmp/ab.err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then echo "FAIL ab exit code $rc"; cat "$tmp/ab.err"; fail=1; fi
python3 - "$tmp/ab.json" "$tmp/prefix" <<'PY' || fail=1
import json, os, sys
j = json.load(open(sys.argv[1]))
prefix = os.path.realpath(sys.argv[2])
assert j["n_prompts"] == 4, j["n_prompts"]
assert os.path.realpath(j["prompts_file"]).startswith(prefix + "/share/dspark/data/"), j["prompts_file"]
print("ok: ab read", j["prompts_file"])
PY
"$bin" generate -m "$model" -p "One, two, three," -n 4 --json >"$tmp/gen.json" 2>"$tmp/gen.err" || {
  echo "FAIL generate"; cat "$tmp/gen.err"; fail=1; }
grep -q "$tmp/prefix/share/dspark/drafters/gemma3-270m" "$tmp/gen.json" "$tmp/gen.err" ||
  { echo "FAIL generate did not mount the installed drafter"; head -c 600 "$tmp/gen.json"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: installed dspark works from $tmp/elsewhere"
exit "$fail"
