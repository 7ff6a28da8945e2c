#!/usr/bin/env bash
# Reproduces a target's DSpark drafter end to end, resumably (MODEL=gemma3-270m, the default: the
# shipped drafter; MODEL=smollm2-135m: the SmolLM2 recipe of docs/TRAINING.md):
#   1. regen: the target's answers to the training prompts. The token ids of the answers used for the
#      shipped drafter are committed (data/regen-ids/); they are replayed first (teacher-forced
#      forwards give byte-identical shards); REGEN_MORE=1 then decodes the prompts the ids do not
#      cover (hours; stop any time, rerun to continue).
#   2. train-drafter with the shipped recipe (fixed setup, lookup input), --resume.
#   3. quantize-drafter: gemma3-270m with the shipped knapsack recipe, smollm2-135m affine 4-bit g64.
# Every step prints progress and an ETA and picks up where a stopped run left off.
#
# Usage: scripts/train_default_drafter.sh PROMPTS.jsonl [WORK_DIR]
#   PROMPTS.jsonl  the training prompts (one {"turns": ["..."]} per line; the shipped drafter used
#                  the 19,778-prompt training set described in data/regen-ids/README.md)
#   WORK_DIR       default work/default-drafter (ignored by git)
# Environment: MODEL (gemma3-270m or smollm2-135m), IDS (which committed ids to replay, default
# gemma3-270m-v2 / smollm2-135m-v1), REGEN_MORE=1 (decode beyond the committed ids), STEPS (default: the recipe's, 900 for gemma3-270m), THREADS (default:
# all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
prompts="${1:?usage: scripts/train_default_drafter.sh PROMPTS.jsonl [WORK_DIR]}"
work="${2:-work/default-drafter}"
[ -f "$prompts" ] || { echo "train_default_drafter: $prompts: no such file" >&2; exit 2; }
bin=build/release/dspark
if [ ! -x "$bin" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target dspark
fi
threads="${THREADS:-$(nproc)}"
model="${MODEL:-gemma3-270m}"
# Per target: the regen taps, the committed ids, the training recipe (docs/TRAINING.md).
case "$model" in
  gemma3-270m)
    taps=1,4,7,10,13,16; ids_default=gemma3-270m-v2
    train_flags=(--layers 1 --markov-rank 64 --draft-vocab 8192 --lookup-input 3 --steps "${STEPS:-900}" --lr 1e-3
                 --batch-seqs 8 --anchors 32 --ckpt-every 300 --eval-seqs 16) ;;
  smollm2-135m)
    taps=1,6,11,16,21,26; ids_default=smollm2-135m-v1
    train_flags=(--layers 2 --block 4 --markov-rank 64 --draft-vocab 8192 --lookup-input 3 --steps "${STEPS:-5000}"
                 --lr 1e-3 --batch-seqs 8 --anchors 32 --ckpt-every 500 --eval-seqs 24) ;;
  *) echo "train_default_drafter: MODEL=$model: no recipe (gemma3-270m or smollm2-135m)" >&2; exit 2 ;;
esac
mkdir -p "$work"
"$bin" get "$model"

# The regen settings of the shipped data (a resumed or replayed run must repeat them exactly).
regen=(regen -m "$model" --prompts "$prompts" --taps "$taps" --top-k 32 --max-new 192 --batch 32
       --sampled-share 0.2 --temp 0.7 --seed 1 --threads "$threads" --out "$work/regen")

# IDS=gemma3-270m-v2 (default): the shipped drafter's 896 sequences; IDS=gemma3-270m-v3: 1,472 (a superset).
# IDS may list several files (space-separated) of one run, each continuing the ones before it
# (regen --skip-ids); they are replayed in order into the same folder.
any_ids=""
for ids_name in ${IDS:-$ids_default}; do
  ids_xz=data/regen-ids/$ids_name.ids.safetensors.xz
  [ -f "$ids_xz" ] || { echo "train_default_drafter: IDS: $ids_xz: no such file" >&2; exit 2; }
  any_ids=1
  [ -f "$work/ids-$ids_name.done" ] && continue
  [ "$ids_name" = "$ids_default" ] && [ -f "$work/ids.done" ] && continue  # a folder of the one-file version
  echo "== 1a. replaying the committed token ids ($ids_xz)"
  want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256_uncompressed"])' "data/regen-ids/$ids_name.manifest.json")
  xz -dc "$ids_xz" >"$work/ids.safetensors"
  have=$(sha256sum "$work/ids.safetensors" | cut -d' ' -f1)
  [ "$have" = "$want" ] || { echo "train_default_drafter: $ids_xz: sha256 $have, manifest says $want" >&2; exit 2; }
  "$bin" "${regen[@]}" --from-ids "$work/ids.safetensors"
  touch "$work/ids-$ids_name.done"
done
if [ -n "${REGEN_MORE:-}" ] || [ -z "$any_ids" ]; then
  echo "== 1b. decoding the prompts the ids do not cover (stop any time; rerun to continue)"
  "$bin" "${regen[@]}"
fi

echo "== 2. training (resumable)"
"$bin" train-drafter -m "$model" --data "$work/regen" --out "$work/train" --taps "$taps" "${train_flags[@]}" \
  --threads "$threads" --resume
if [ "$model" = smollm2-135m ]; then
  echo "== 3. quantizing (affine 4-bit g64, as drafters/smollm2-135m)"
  out="$work/drafter-a4"
  [ -d "$out" ] || "$bin" quantize-drafter "$work/train/drafter" -m smollm2-135m --method affine --bits 4 --group 64 --out "$out"
  echo "done: $out (the shipped folder also has its dspark_copy_head block; compare: dspark ab -m smollm2-135m --a draft-model=drafters/smollm2-135m --b draft-model=$out)"
  exit 0
fi

echo "== 3. quantizing (knapsack recipe of the shipped drafter)"
out="$work/drafter-mix3"
if [ ! -d "$out" ]; then
  "$bin" quantize-drafter "$work/train/drafter" -m gemma3-270m --recipe drafters/recipes/gemma3-270m-mix-3.json --out "$out"
fi
echo "done: $out (compare with drafters/gemma3-270m: dspark ab --a draft-model=drafters/gemma3-270m --b draft-model=$out)"
