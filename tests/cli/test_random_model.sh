#!/usr/bin/env bash
# `dspark random-model` on the real SmolLM2 ($DSPARK_SMOLLM2_MODEL, else $DSPARK_MODEL): the random model
# has the real file's size (same tensor layout), the skeleton is small, the random model made from the
# skeleton is byte-identical to the one made from the model (same seed), it loads and decodes (`bench`),
# and bad flags (no --out, --out the model itself, a missing model) exit 2 with a message naming what is wrong.
# Usage: test_random_model.sh DSPARK_BINARY   (exit 77 = skipped: no model)
set -u
bin="$1"
model="${DSPARK_SMOLLM2_MODEL:-${DSPARK_MODEL:-}}"
if [ -z "$model" ] || [ ! -f "$model" ]; then
  echo "skip: no model (set DSPARK_SMOLLM2_MODEL or DSPARK_MODEL)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" random-model -m "$model" --out "$tmp/r.gguf" --seed 5 --json >"$tmp/r.json" || { echo "FAIL random-model"; fail=1; }
"$bin" random-model -m "$model" --skeleton --out "$tmp/s.gguf" >/dev/null || { echo "FAIL skeleton"; fail=1; }
"$bin" random-model -m "$tmp/s.gguf" --out "$tmp/r2.gguf" --seed 5 >/dev/null || { echo "FAIL random from skeleton"; fail=1; }
cmp -s "$tmp/r.gguf" "$tmp/r2.gguf" || { echo "FAIL the random models from the model and its skeleton differ"; fail=1; }
[ "$(stat -c %s "$tmp/r.gguf")" = "$(stat -c %s "$model")" ] || { echo "FAIL random model size differs from the model's"; fail=1; }
[ "$(stat -c %s "$tmp/s.gguf")" -lt $(( $(stat -c %s "$model") / 10 )) ] || { echo "FAIL skeleton not small"; fail=1; }
cmp -s "$tmp/r.gguf" "$model" && { echo "FAIL random model equals the model"; fail=1; }
python3 - "$tmp/r.json" <<'PY' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
assert j["kind"] == "random" and j["seed"] == 5 and j["tensors"] > 0, j
PY
"$bin" bench -m "$tmp/r.gguf" -p 16 -n 8 -r 1 --json >"$tmp/b.json" 2>"$tmp/b.err" || { echo "FAIL bench on the random model"; cat "$tmp/b.err"; fail=1; }
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['decode_tok_s'] > 0 and j['prefill_tok_s'] > 0, j" "$tmp/b.json" || fail=1
"$bin" random-model -m "$model" >/dev/null 2>"$tmp/e1"; rc=$?
{ [ $rc -eq 2 ] && grep -q -- "--out" "$tmp/e1"; } || { echo "FAIL no --out: rc $rc"; cat "$tmp/e1"; fail=1; }
cp "$tmp/s.gguf" "$tmp/s_copy.gguf"
"$bin" random-model -m "$tmp/s_copy.gguf" --out "$tmp/s_copy.gguf" >/dev/null 2>"$tmp/e3"; rc=$?
{ [ $rc -eq 2 ] && grep -q "is the model file itself" "$tmp/e3" && cmp -s "$tmp/s.gguf" "$tmp/s_copy.gguf"; } ||
  { echo "FAIL --out the model itself: rc $rc"; cat "$tmp/e3"; fail=1; }
"$bin" random-model -m "$tmp/missing.gguf" --out "$tmp/x.gguf" >/dev/null 2>"$tmp/e2"; rc=$?
{ [ $rc -eq 2 ] && grep -q "missing.gguf" "$tmp/e2"; } || { echo "FAIL missing model: rc $rc"; cat "$tmp/e2"; fail=1; }
[ $fail -eq 0 ] && echo "ok: random model and skeleton"
exit $fail
