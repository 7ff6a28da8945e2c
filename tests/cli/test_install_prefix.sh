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
         share/dspark/drafters/smollm2-135m/default_spec.json share/dspark/data/regen-ids/smollm2-135m-v2.ids.safetensors.xz \
         share/dspark/scripts/plot_ab.py share/dspark/scripts/cluster.sh share/dspark/deploy/haproxy/dspark.cfg; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL not installed: $f"; fail=1; }
done
mkdir "$tmp/elsewhere"
bash "$(dirname "$0")/check_no_path_flags.sh" "$bin" "$model" "$tmp/elsewhere" "$tmp/prefix/share/dspark/data" \
  "$tmp/prefix/share/dspark/drafters" || fail=1
[ "$fail" -eq 0 ] && echo "ok: installed dspark works from $tmp/elsewhere"
exit "$fail"
