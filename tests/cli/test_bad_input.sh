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
expect_bad "serve: port out of range" serve -m x.gguf --port 70000
expect_bad "serve: zero slots" serve -m x.gguf --parallel 0
expect_bad "serve: unknown flag" serve --bogus
expect_bad "serve: --no-spec with a drafter" serve -m x.gguf --no-spec --draft-kind ngram
expect_bad "serve: missing model file" serve -m "$tmp/none.gguf"

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
  expect_bad "serve: context above the model's" serve -m "$model" --ctx 100000
  expect_bad "serve: drafter dir missing" serve -m "$model" --draft-model "$tmp/no-drafter"
  expect_bad "serve: unknown draft kind" serve -m "$model" --draft-kind eagle --draft-model "$model"
else
  echo "skip model cases: no model path given"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
