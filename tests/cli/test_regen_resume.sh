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
# Token ids -> shards: the export is small, and the teacher-forced replay rebuilds every shard
# byte for byte (the forward is batch-invariant, so prefill rows equal decode rows).
"$bin" regen --out "$tmp/r" --export-ids "$tmp/ids.safetensors" >/dev/null
"$bin" "${args[@]/$tmp\/r/$tmp/rr}" --from-ids "$tmp/ids.safetensors" >"$tmp/replay.json" 2>"$tmp/replay.err" ||
  { echo "FAIL: replay"; cat "$tmp/replay.err"; exit 1; }
for s in 0 1 2; do
  cmp "$tmp/r/shard-0000$s.safetensors" "$tmp/rr/shard-0000$s.safetensors" ||
    { echo "FAIL: replayed shard $s differs from the decoded one"; exit 1; }
done
# A decode run continues a replayed folder (same settings): nothing left to do.
"$bin" "${args[@]/$tmp\/r/$tmp/rr}" >"$tmp/cont.json" 2>/dev/null
grep -q '"sequences_run":0' "$tmp/cont.json" || { echo "FAIL: decode did not accept the replayed shards"; cat "$tmp/cont.json"; exit 1; }
# --skip-ids: a folder that continues another run's ids decodes only the shards they do not cover,
# and replaying both ids files into one folder gives the single run's shards.
mkdir "$tmp/part"
cp "$tmp/r/shard-00000.safetensors" "$tmp/r/shard-00001.safetensors" "$tmp/part/"
python3 - "$tmp/r/manifest.json" "$tmp/part/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["shards"] = m["shards"][:2]
json.dump(m, open(sys.argv[2], "w"))
PY
"$bin" regen --out "$tmp/part" --export-ids "$tmp/part.ids" >/dev/null
"$bin" "${args[@]/$tmp\/r/$tmp/rs}" --skip-ids "$tmp/part.ids" >"$tmp/skip.json" 2>"$tmp/skip.err" ||
  { echo "FAIL: --skip-ids"; cat "$tmp/skip.err"; exit 1; }
grep -q '2 shards left out' "$tmp/skip.err" || { echo "FAIL: --skip-ids left out no shards"; cat "$tmp/skip.err"; exit 1; }
grep -q '"sequences_run":2' "$tmp/skip.json" || { echo "FAIL: --skip-ids decoded other than shard 2"; cat "$tmp/skip.json"; exit 1; }
test ! -e "$tmp/rs/shard-00000.safetensors"
cmp "$tmp/r/shard-00002.safetensors" "$tmp/rs/shard-00002.safetensors" || { echo "FAIL: --skip-ids shard differs"; exit 1; }
"$bin" regen --out "$tmp/rs" --export-ids "$tmp/rest.ids" >/dev/null
"$bin" "${args[@]/$tmp\/r/$tmp/r2}" --from-ids "$tmp/part.ids" >/dev/null 2>&1
"$bin" "${args[@]/$tmp\/r/$tmp/r2}" --from-ids "$tmp/rest.ids" >/dev/null 2>&1
for s in 0 1 2; do
  cmp "$tmp/r/shard-0000$s.safetensors" "$tmp/r2/shard-0000$s.safetensors" ||
    { echo "FAIL: shard $s replayed from two ids files differs"; exit 1; }
done
# --shards N: a replay of only the first N shards (another tap setting, say), continued later.
"$bin" "${args[@]/$tmp\/r/$tmp/r3}" --from-ids "$tmp/ids.safetensors" --shards 2 >"$tmp/sh.json" 2>"$tmp/sh.err" ||
  { echo "FAIL: --shards"; cat "$tmp/sh.err"; exit 1; }
grep -q '1 shards past --shards 2' "$tmp/sh.err" || { echo "FAIL: --shards left nothing out"; cat "$tmp/sh.err"; exit 1; }
grep -q '"sequences_run":4' "$tmp/sh.json" || { echo "FAIL: --shards 2 ran other than 4 sequences"; cat "$tmp/sh.json"; exit 1; }
test ! -e "$tmp/r3/shard-00002.safetensors" || { echo "FAIL: --shards 2 wrote shard 2"; exit 1; }
"$bin" "${args[@]/$tmp\/r/$tmp/r3}" --from-ids "$tmp/ids.safetensors" >"$tmp/sh2.json" 2>/dev/null
grep -q '"sequences_run":2' "$tmp/sh2.json" || { echo "FAIL: the run after --shards did not do the rest"; cat "$tmp/sh2.json"; exit 1; }
for s in 0 1 2; do
  cmp "$tmp/r/shard-0000$s.safetensors" "$tmp/r3/shard-0000$s.safetensors" || { echo "FAIL: --shards shard $s differs"; exit 1; }
done
# An altered ids file and one from other settings are refused, naming the file / field; nothing is written.
python3 - "$tmp/ids.safetensors" "$tmp/bad.safetensors" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[-3] ^= 0x11
open(sys.argv[2], "wb").write(b)
PY
if "$bin" "${args[@]/$tmp\/r/$tmp/rb}" --from-ids "$tmp/bad.safetensors" >/dev/null 2>"$tmp/bad.err"; then
  echo "FAIL: altered ids file accepted"; exit 1; fi
grep -q 'checksum' "$tmp/bad.err" || { echo "FAIL: no checksum error"; cat "$tmp/bad.err"; exit 1; }
other=("${args[@]}")
for i in "${!other[@]}"; do [ "${other[$i]}" = "--max-new" ] && other[$((i + 1))]=13; done
if "$bin" "${other[@]}" --out "$tmp/rc" --from-ids "$tmp/ids.safetensors" >/dev/null 2>"$tmp/set.err"; then
  echo "FAIL: ids of other settings accepted"; exit 1; fi
grep -q "setting 'max_new'" "$tmp/set.err" || { echo "FAIL: settings mismatch not named"; cat "$tmp/set.err"; exit 1; }
test ! -e "$tmp/rb/shard-00000.safetensors"
# Prompt text as teacher-forced data (temperature -1), trainable together with the responses.
"$bin" regen -m "$model" --prompts "$tmp/train.jsonl" --eval-prompts "$tmp/eval.jsonl" --out "$tmp/pt" --taps 2,8 \
  --top-k 4 --max-new 12 --shard-size 2 --sampled-share 0.5 --prompt-text --json >"$tmp/pt.json" 2>"$tmp/pt.err" ||
  { echo "FAIL: --prompt-text"; cat "$tmp/pt.err"; exit 1; }
grep -q '"shards_done":3' "$tmp/pt.json" || { echo "FAIL: --prompt-text shards"; cat "$tmp/pt.json"; exit 1; }
"$bin" train-drafter -m "$model" --data "$tmp/r" --out "$tmp/t" --taps 2,8 --layers 1 --markov-rank 8 \
  --draft-vocab 256 --steps 3 --batch-seqs 2 --anchors 4 --ckpt-every 3 --heldout-mod 3 --eval-seqs 2 --json \
  >"$tmp/train.json" 2>"$tmp/train.err" || { echo "FAIL: train-drafter"; cat "$tmp/train.err"; exit 1; }
test -f "$tmp/t/drafter/config.json" && test -f "$tmp/t/drafter/model.safetensors" && test -f "$tmp/t/state.safetensors"
# Responses + prompt text, the legacy setup (an ablation arm), and the diagnostics on the result.
"$bin" train-drafter -m "$model" --data "$tmp/r" --data "$tmp/pt" --out "$tmp/t2" --taps 2,8 --layers 1 --markov-rank 8 \
  --draft-vocab 256 --steps 2 --batch-seqs 2 --anchors 4 --ckpt-every 2 --heldout-mod 3 --eval-seqs 0 --setup legacy \
  >/dev/null 2>"$tmp/t2.err" || { echo "FAIL: train-drafter on responses + prompt text"; cat "$tmp/t2.err"; exit 1; }
"$bin" drafter-diag "$tmp/t/drafter" -m "$model" --data "$tmp/r" --heldout-mod 3 --seqs 2 --anchors 2 --json >"$tmp/diag.json" ||
  { echo "FAIL: drafter-diag"; exit 1; }
python3 - "$tmp/diag.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
for k in ("heldout / taps", "heldout / taps zeroed", "heldout / taps shuffled", "train / taps"):
    assert len(runs[k]["top1_by_pos"]) == 7, k
    bins = runs[k]["slot1_by_target_confidence"]
    assert [b["target_top1_prob_below"] for b in bins] == [0.2, 0.4, 0.6, 0.8, 0.95, 1.0], k
    assert sum(b["slots"] for b in bins) == runs[k]["slots_by_pos"][0], k
    assert all(0 <= b["draft_top1"] <= b["target_top1_in_draft_vocab"] <= 1 for b in bins if b["slots"]), k
assert [t["tap"] for t in d["tap_rms"]] == [2, 8]
assert all(t["rms"] > 0 for t in d["tap_rms"])
PY
# --replay: the trainer's held-out measurement on any checkpoint, as given and with 8-bit copies.
for q in none int8; do
  "$bin" drafter-diag "$tmp/t/drafter" -m "$model" --data "$tmp/r" --heldout-mod 3 --replay 2 --draft-quant $q --json \
    >"$tmp/replay-$q.json" 2>"$tmp/replay.err" || { echo "FAIL: drafter-diag --replay ($q)"; cat "$tmp/replay.err"; exit 1; }
done
python3 - "$tmp/replay-none.json" "$tmp/replay-int8.json" "$tmp/train.json" <<'PY'
import json, sys
a, b, t = (json.load(open(p)) for p in sys.argv[1:4])
assert a["draft_quant"] == "none" and b["draft_quant"] == "int8", (a, b)
for r in (a, b):
    assert r["sequences"] >= 1 and r["rounds"] >= 1 and len(r["accept_by_pos"]) == 7, r
    assert r["tau"] >= 1.0 and 0.0 <= r["acceptance"] <= 1.0, r
# As given, the replay is the measurement train-drafter made of the same checkpoint (its last eval).
h = t["heldout"]
assert (a["rounds"], a["tau"], a["accept_by_pos"]) == (h["rounds"], h["tau"], h["accept_by_pos"]), (a, h)
PY
expect_fail_replay() {
  if "$bin" drafter-diag "$tmp/t/drafter" -m "$model" --data "$tmp/r" --replay 2 "$@" >/dev/null 2>"$tmp/rbad.err"; then
    echo "FAIL: drafter-diag --replay $* accepted"; exit 1
  fi
}
expect_fail_replay --draft-quant int2
grep -q "draft-quant" "$tmp/rbad.err" || { echo "FAIL: bad --draft-quant not named"; cat "$tmp/rbad.err"; exit 1; }
"$bin" generate -m "$model" -p "Count from 1 to 5." -n 8 --draft-model "$tmp/t/drafter" --json >"$tmp/gen.json" 2>"$tmp/gen.err" ||
  { echo "FAIL: the trained checkpoint does not load in generate"; cat "$tmp/gen.err"; exit 1; }
echo "ok: regen resume (skip, redo damaged shard), manifest, ids export + bitwise replay, --skip-ids + two-file replay, prompt text, train-drafter (fixed and legacy) -> loadable checkpoint, drafter-diag (teacher-forced and --replay)"
