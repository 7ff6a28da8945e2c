#!/usr/bin/env bash
# Bad input at the CLI boundary: every case must print exactly one error line on stderr, exit 2,
# not crash, and write nothing to stdout. Usage: test_bad_input.sh DSPARK_BINARY [MODEL.gguf]
# The model cases use argument 2 or $DSPARK_MODEL and are skipped (and said so) without one.
set -u
bin="$1"
model="${2:-${DSPARK_MODEL:-}}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

expect_bad() {  # name, then the command's arguments
  local name="$1"; shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(grep -c . "$tmp/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ]; then
    pass=$((pass + 1))
    echo "ok   $name: $(cat "$tmp/err")"
  else
    fail=$((fail + 1))
    echo "FAIL $name: exit $rc, $lines stderr lines, $(wc -c <"$tmp/out") stdout bytes"
    sed 's/^/     | /' "$tmp/err" | head -5
  fi
}

expect_bad "unknown command" frobnicate
expect_bad "unknown flag" generate --bogus 1
expect_bad "non-numeric -n" generate -m x.gguf -p hi -n many
expect_bad "negative temperature" generate -m x.gguf -p hi --temp -1
expect_bad "top-p out of range" generate -m x.gguf -p hi --top-p 1.5
expect_bad "zero threads" bench -m x.gguf --threads 0
expect_bad "unknown backend" bench -m x.gguf --backend cuda9
expect_bad "unknown LM head" bench -m x.gguf --lm-head sparse
expect_bad "missing flag value" generate -p
expect_bad "missing model file" generate -m "$tmp/none.gguf" -p hi
expect_bad "unknown registry name" get no-such-model
printf 'not a gguf file at all, just some text that is long enough to hold a header' >"$tmp/garbage.gguf"
expect_bad "corrupt model (bad magic)" generate -m "$tmp/garbage.gguf" -p hi
: >"$tmp/empty.gguf"
expect_bad "empty model file" generate -m "$tmp/empty.gguf" -p hi
expect_bad "no prompt" generate -m "$tmp/garbage.gguf"
expect_bad "draft threshold above 1" generate -m x.gguf -p hi --draft-kind ngram --draft-threshold 1.5
expect_bad "negative draft tokens" generate -m x.gguf -p hi --draft-kind ngram --num-draft-tokens -1
expect_bad "token tree too wide" generate -m x.gguf -p hi --draft-kind ngram --draft-tree 9
expect_bad "token tree without a suffix index" ab -m x.gguf --a serial --b draft-kind=ngram,draft-tree=2
expect_bad "ab: one arm only" ab -m x.gguf --a serial
expect_bad "ab: --b without --a" ab -m x.gguf --b serial
expect_bad "ab: unknown arm key" ab -m x.gguf --a serial --b draft-kind=ngram,gamma=3
expect_bad "ab: unknown draft kind" ab -m x.gguf --a serial --b draft-kind=eagle
expect_bad "ab: draft tokens out of range" ab -m x.gguf --a serial --b draft-kind=ngram,num-draft-tokens=99
expect_bad "ab: bad draft threshold" ab -m x.gguf --a serial --b draft-kind=ngram,draft-threshold=x
expect_bad "ab: dspark arm without a path" ab -m x.gguf --a serial --b draft-kind=dspark
expect_bad "ab: --arm without a name" ab -m x.gguf --arm serial --arm draft-kind=ngram
expect_bad "ab: duplicate arm names" ab -m x.gguf --arm x=serial --arm x=draft-kind=ngram
expect_bad "ab: lm-head without an arm" ab -m x.gguf --arm x=lm-head=full
expect_bad "ab: lm-head not last" ab -m x.gguf --arm x=lm-head=full,draft-kind=ngram
expect_bad "ab: zero bootstrap resamples" ab -m x.gguf --a serial --b serial --bootstrap 0
expect_bad "ab: negative temperature" ab -m x.gguf --a serial --b serial --temp -0.5
expect_bad "ab: verify table entry not a number" ab -m x.gguf --a serial --b serial --verify-table 2.9,x,3.3
expect_bad "ab: verify table entry not positive" ab -m x.gguf --a serial --b serial --verify-table 0,3.1
expect_bad "ab: verify table decreasing" ab -m x.gguf --a serial --b serial --verify-table 3.1,2.9
expect_bad "ab: plot into a missing folder" ab -m x.gguf --a serial --b serial --plot "$tmp/no/such/dir/x.png"
expect_bad "ab: missing model" ab -m "$tmp/none.gguf" --a serial --b draft-kind=ngram
expect_bad "quantize-drafter: no checkpoint" quantize-drafter
expect_bad "quantize-drafter: unknown method" quantize-drafter "$tmp" --method nf4
expect_bad "quantize-drafter: turbo bits" quantize-drafter "$tmp" --method turbo --bits 5
expect_bad "quantize-drafter: group size" quantize-drafter "$tmp" --group 48
expect_bad "quantize-drafter: missing model" quantize-drafter "$tmp" -m "$tmp/none.gguf"
expect_bad "sensitivity: no drafter" sensitivity --calib "$tmp"
expect_bad "sensitivity: no --calib" sensitivity "$tmp"
expect_bad "sensitivity: bad method" sensitivity "$tmp" --calib "$tmp" --methods nf4
expect_bad "sensitivity: bpw without recipe path" sensitivity "$tmp" --calib "$tmp" --target-bpw 4
expect_bad "sensitivity: several bpw, one path" sensitivity "$tmp" --calib "$tmp" --target-bpw 3,4 --recipe-out "$tmp/r.json"
expect_bad "sensitivity: bad bpw" sensitivity "$tmp" --calib "$tmp" --target-bpw four --recipe-out "$tmp/r.json"
expect_bad "sensitivity: missing model" sensitivity "$tmp" --calib "$tmp" -m "$tmp/none.gguf"
expect_bad "generate: bad --draft-quant" generate -p hi --draft-quant maybe
expect_bad "serve: bad --draft-quant" serve --draft-quant maybe
printf '{"id": "t1", "turns": ["hello there"]}\n{"id": "t2", "turns": ["What is 2+2?"]}\n' >"$tmp/train.jsonl"
printf '{"id": "e1", "turns": ["What is 2+2?"]}\n' >"$tmp/eval.jsonl"
printf '{"id": "e1", "turns": ["Something else"]}\n' >"$tmp/eval_ok.jsonl"
expect_bad "regen: no --prompts" regen --out "$tmp/r"
expect_bad "regen: malformed --taps" regen --prompts "$tmp/train.jsonl" --out "$tmp/r" --taps 1,x
expect_bad "regen: training prompt repeats an evaluation prompt" regen --prompts "$tmp/train.jsonl" \
  --eval-prompts "$tmp/eval.jsonl" --out "$tmp/r"
expect_bad "regen: the evaluation file as training prompts" regen --prompts "$tmp/eval.jsonl" \
  --eval-prompts "$tmp/eval.jsonl" --out "$tmp/r"
expect_bad "train-drafter: no --data" train-drafter --out "$tmp/t"
expect_bad "train-drafter: malformed --taps" train-drafter --data "$tmp" --out "$tmp/t" --taps 1,,2
expect_bad "generate: --no-spec with a drafter" generate -m x.gguf -p hi --no-spec --draft-kind ngram
expect_bad "generate: unknown draft schedule" generate -m x.gguf -p hi --draft-schedule fastest
expect_bad "generate: --draft-sure neither on nor off" generate -m x.gguf -p hi --draft-sure maybe
expect_bad "serve: port out of range" serve -m x.gguf --port 70000
expect_bad "serve: zero slots" serve -m x.gguf --parallel 0
expect_bad "serve: negative answer cache" serve -m x.gguf --answer-cache-mib -1
expect_bad "serve: answer cache beyond 64 GiB" serve -m x.gguf --answer-cache-mib 999999
expect_bad "serve: unknown flag" serve --bogus
expect_bad "serve: --no-spec with a drafter" serve -m x.gguf --no-spec --draft-kind ngram
expect_bad "serve: missing model file" serve -m "$tmp/none.gguf"
expect_bad "suffix-index: no subcommand" suffix-index
expect_bad "suffix-index build: no --ids" suffix-index build -o "$tmp/x.sfx"
expect_bad "ab: suffix-index on an ngram arm" ab -m x.gguf --a serial --b draft-kind=ngram,suffix-index=x.sfx
expect_bad "ab: suffix arm without an index" ab -m x.gguf --a serial --b draft-kind=suffix
expect_bad "serve: malformed --allowed-hosts" serve -m x.gguf --allowed-hosts "api.example,http://x/"
expect_bad "serve: zero --head-timeout" serve -m x.gguf --head-timeout 0

if [ -n "$model" ] && [ -f "$model" ]; then
  head -c 5000000 "$model" >"$tmp/truncated.gguf"
  expect_bad "truncated model (metadata)" generate -m "$tmp/truncated.gguf" -p hi
  head -c 200000000 "$model" >"$tmp/truncated2.gguf"
  expect_bad "truncated model (tensor data)" generate -m "$tmp/truncated2.gguf" -p hi
  python3 - "$model" "$tmp/llama.gguf" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"general.architecture"
i = data.index(key) + len(key) + 4 + 8  # value type u32, string length u64
assert data[i:i + 6] == b"gemma3"
data[i:i + 6] = b"llama3"
open(sys.argv[2], "wb").write(data)
PY
  expect_bad "wrong architecture" generate -m "$tmp/llama.gguf" -p hi
  expect_bad "prompt longer than the context" generate -m "$model" -p "$(printf 'word %.0s' $(seq 1 200))" --ctx 64 -n 8
  expect_bad "context above the model's" generate -m "$model" -p hi --ctx 100000
  src=$(cd "$(dirname "$0")/../.." && pwd)
  expect_bad "drafter dir missing" generate -m "$model" -p hi --draft-model "$tmp/no-drafter"
  mkdir -p "$tmp/empty-drafter"
  expect_bad "drafter dir without config.json" generate -m "$model" -p hi --draft-model "$tmp/empty-drafter"
  mkdir -p "$tmp/llama-drafter"
  printf '{"architectures": ["LlamaForCausalLM"]}' >"$tmp/llama-drafter/config.json"
  expect_bad "unknown drafter architecture" generate -m "$model" -p hi --draft-model "$tmp/llama-drafter"
  expect_bad "drafter path that is neither" generate -m "$model" -p hi --draft-model "$src/README.md"
  expect_bad "drafter paired with another target" generate -m "$model" -p hi \
    --draft-model "$src/tests/goldens/dspark_synth/a_vanilla_conf_bf16"
  expect_bad "unknown draft kind" generate -m "$model" -p hi --draft-kind eagle --draft-model "$model"
  expect_bad "draft model that is not a Gemma 3 GGUF" generate -m "$model" -p hi --draft-kind draft-model \
    --draft-model "$tmp/llama.gguf"
  expect_bad "ab: missing prompt file" ab -m "$model" --a serial --b draft-kind=ngram --prompts "$tmp/none.jsonl"
  printf '{"category": "x", "turns": ["hi"]}\nnot json\n' >"$tmp/bad.jsonl"
  expect_bad "ab: malformed prompt file" ab -m "$model" --a serial --b draft-kind=ngram --prompts "$tmp/bad.jsonl"
  printf '{"category": "x", "turns": ["hi"]}\n' >"$tmp/one.jsonl"
  expect_bad "ab: drafter dir missing" ab -m "$model" --a serial --b draft-model="$tmp/no-drafter" --prompts "$tmp/one.jsonl"
  expect_bad "ab: every prompt too long" ab -m "$model" --a serial --b draft-kind=ngram --ctx 16 -n 8 --n-prompts 2
  expect_bad "regen: tap beyond the target's layers" regen -m "$model" --prompts "$tmp/train.jsonl" \
    --eval-prompts "$tmp/eval_ok.jsonl" --out "$tmp/r" --taps 1,17
  mkdir -p "$tmp/r2"
  printf '{"format": "dspark-regen-manifest-v1", "settings": {"taps": [2]}}' >"$tmp/r2/manifest.json"
  expect_bad "regen: output folder made with other settings" regen -m "$model" --prompts "$tmp/train.jsonl" \
    --eval-prompts "$tmp/eval_ok.jsonl" --out "$tmp/r2"
  mkdir -p "$tmp/noshards"
  expect_bad "train-drafter: no shards" train-drafter -m "$model" --data "$tmp/noshards" --out "$tmp/t"
  mkdir -p "$tmp/badshards"
  printf 'garbage that is not a safetensors file' >"$tmp/badshards/shard-00000.safetensors"
  expect_bad "train-drafter: corrupt shard" train-drafter -m "$model" --data "$tmp/badshards" --out "$tmp/t"
  expect_bad "train-drafter: tap beyond the target's layers" train-drafter -m "$model" --data "$tmp/noshards" \
    --out "$tmp/t" --taps 1,17
  # --backend cuda where it cannot run (a build without CUDA, or no GPU / driver) says why in one line.
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    expect_bad "cuda backend without a device" generate -m "$model" -p hi -n 1 --backend cuda
    grep -q "^dspark generate: --backend cuda: " "$tmp/err" ||
      { fail=$((fail + 1)); echo "FAIL cuda backend error does not name the flag: $(cat "$tmp/err")"; }
  fi
  # Weights without a SIMD kernel (every type on the scalar backend) still run; --verbose says so once.
  "$bin" generate -m "$model" -p hi -n 1 --no-spec --backend cpu-scalar -v >"$tmp/out" 2>"$tmp/err"
  rc=$?
  notes=$(grep -c "run the scalar reference path" "$tmp/err")
  if [ "$rc" -eq 0 ] && [ "$notes" -eq 1 ] && [ -s "$tmp/out" ] && grep -q "Q8_0 x .*scalar reference" "$tmp/err"; then
    pass=$((pass + 1)); echo "ok   reference path runs and says so once: $(grep note "$tmp/err")"
  else
    fail=$((fail + 1)); echo "FAIL reference path: exit $rc, $notes notes"; sed 's/^/     | /' "$tmp/err" | head -8
  fi
  # Suffix indexes (draft-kind suffix): a missing, foreign, truncated or altered file is refused.
  "$bin" suffix-index build -m "$model" --ids "$src/data/regen-ids/gemma3-270m-v2.ids.safetensors.xz" \
    -o "$tmp/g.sfx" >/dev/null 2>&1 || { fail=$((fail + 1)); echo "FAIL suffix-index build on the gemma ids"; }
  expect_bad "suffix index missing" generate -m "$model" -p hi --suffix-index "$tmp/none.sfx"
  expect_bad "suffix index that is not one" generate -m "$model" -p hi --suffix-index "$src/README.md"
  head -c -4 "$tmp/g.sfx" >"$tmp/g_cut.sfx"
  expect_bad "suffix index truncated" generate -m "$model" -p hi --suffix-index "$tmp/g_cut.sfx"
  python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-9] ^= 1; open(sys.argv[2], "wb").write(b)' \
    "$tmp/g.sfx" "$tmp/g_alt.sfx"
  expect_bad "suffix index altered" generate -m "$model" -p hi --suffix-index "$tmp/g_alt.sfx"
  expect_bad "suffix index with the copy head off" generate -m "$model" -p hi --draft-model "$src/drafters/gemma3-270m" \
    --draft-copy off --suffix-index "$tmp/g.sfx"
  expect_bad "suffix index with a GGUF draft model" generate -m "$model" -p hi --draft-model "$model" --suffix-index "$tmp/g.sfx"
  expect_bad "ab: suffix index missing" ab -m "$model" --a serial --b suffix-index="$tmp/none.sfx" --prompts "$tmp/one.jsonl"
  expect_bad "suffix-index build: missing ids file" suffix-index build -m "$model" --ids "$tmp/none.ids" -o "$tmp/y.sfx"
  expect_bad "suffix-index build: not an ids file" suffix-index build -m "$model" --ids "$src/README.md" -o "$tmp/y.sfx"
  expect_bad "serve: context above the model's" serve -m "$model" --ctx 100000
  expect_bad "serve: drafter dir missing" serve -m "$model" --draft-model "$tmp/no-drafter"
  expect_bad "serve: unknown draft kind" serve -m "$model" --draft-kind eagle --draft-model "$model"
else
  echo "skip model cases: no model path given"
fi

# The second target (SmolLM2-135M-Instruct, $DSPARK_SMOLLM2_MODEL): a drafter trained for the other
# target and an unknown chat template are refused at start-up.
smol="${DSPARK_SMOLLM2_MODEL:-}"
if [ -n "$smol" ] && [ -f "$smol" ]; then
  drafters="$(cd "$(dirname "$0")/../.." && pwd)/drafters/gemma3-270m"
  expect_bad "serve: a drafter trained for another target" serve -m "$smol" --draft-model "$drafters"
  expect_bad "generate: a drafter trained for another target" generate -m "$smol" --draft-model "$drafters" -p hi
  expect_bad "generate: unknown chat template" generate -m "$smol" --chat-template vicuna --chat -p hi
  if [ -f "$tmp/g.sfx" ]; then
    expect_bad "generate: a suffix index of another model's vocabulary" generate -m "$smol" -p hi --suffix-index "$tmp/g.sfx"
  fi
else
  echo "skip SmolLM2 cases: DSPARK_SMOLLM2_MODEL not set"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
