#!/usr/bin/env bash
# regen is resumable: a second run with the same flags verifies the shards and does nothing; a
# damaged shard is detected (checksum) and regenerated; the manifest counts agree with the shards.
# Then train-drafter runs a few steps on the result and writes a loadable checkpoint.
# Usage: test_regen_resume.sh DSPARK_BINARY [MODEL.gguf]   (exit 77 = skipped without a model)
set -euo pipefail
bin="$1"
model="${2:-${DSPARK_MODEL:-}}"
if [ -z "$model" ] || [ ! -f "$model" ]; then echo "skip: no model (DSPARK_MODEL)"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in 1 2 3 4 5 6; do
  printf '{"id": "p%d", "turns": ["Count from %d to %d, one number per line."]}\n' "$i" "$i" "$((i + 9))"
done >"$tmp/train.jsonl"
printf '{"id": "e1", "turns": ["Something else entirely."]}\n' >"$tmp/eval.jsonl"
args=(regen -m "$model" --prompts "$tmp/train.jsonl" --eval-prompts "$tmp/eval.jsonl" --out "$tmp/r"
      --taps 2,8 --top-k 4 --max-new 12 --batch 3 --shard-size 2 --sampled-share 0.5 --json)
"$bin" "${args[@]}" >"$tmp/run1.json" 2>"$tmp/run1.err"
grep -q '"shards_done":3' "$tmp/run1.json" || { echo "FAIL first run"; cat "$tmp/run1.json" "$tmp/run1.err"; exit 1; }
"$bin" "${args[@]}" >"$tmp/run2.json" 2>"$tmp/run2.err"
grep -q '"sequences_run":0' "$tmp/run2.json" || { echo "FAIL: second run redid work"; cat "$tmp/run2.json"; exit 1; }
# Damage the middle shard in its data region; the rerun must redo exactly that shard.
python3 - "$tmp/r/shard-00001.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-5] ^= 0x5A
open(p, "wb").write(b)
PY
"$bin" "${args[@]}" >"$tmp/run3.json" 2>"$tmp/run3.err"
grep -q 'redoing shard-00001' "$tmp/run3.err" || { echo "FAIL: damage not detected"; cat "$tmp/run3.err"; exit 1; }
grep -q '"sequences_run":2' "$tmp/run3.json" || { echo "FAIL: expected 2 sequences redone"; cat "$tmp/run3.json"; exit 1; }
python3 - "$tmp/r/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["shards_done"] == 3 and m["sequences"] == 6, m
assert sum(s["sequences"] for s in m["shards"]) == 6
assert "regen" in m["command"]
PY
"$bin" train-drafter -m "$model" --data "$tmp/r" --out "$tmp/t" --taps 2,8 --layers 1 --markov-rank 8 \
  --draft-vocab 256 --steps 3 --batch-seqs 2 --anchors 4 --ckpt-every 3 --heldout-mod 3 --eval-seqs 2 --json \
  >"$tmp/train.json" 2>"$tmp/train.err" || { echo "FAIL: train-drafter"; cat "$tmp/train.err"; exit 1; }
test -f "$tmp/t/drafter/config.json" && test -f "$tmp/t/drafter/model.safetensors" && test -f "$tmp/t/state.safetensors"
"$bin" generate -m "$model" -p "Count from 1 to 5." -n 8 --draft-model "$tmp/t/drafter" --json >"$tmp/gen.json" 2>"$tmp/gen.err" ||
  { echo "FAIL: the trained checkpoint does not load in generate"; cat "$tmp/gen.err"; exit 1; }
echo "ok: regen resume (skip, redo damaged shard), manifest, train-drafter -> loadable checkpoint"
