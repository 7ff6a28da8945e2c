#!/usr/bin/env bash
# A fresh clone in a directory other than the developer's: `git clone` of this repository into a
# temporary folder, the built binary placed where the clone's own build would put it
# (build/release/dspark), then run from an unrelated directory with no path flags:
# `dspark ab --n-prompts 4 -n 16` must read the clone's data/spec_bench_dev.jsonl and `generate`
# must mount the clone's shipped drafter (nothing from the developer's checkout or machine).
# Usage: test_fresh_clone.sh SOURCE_DIR DSPARK_BINARY [MODEL.gguf]   (else $DSPARK_MODEL; exit 77 = skipped)
set -u
src="$1"
built="$2"
model="${3:-${DSPARK_MODEL:-}}"
if [ -z "$model" ] || [ ! -f "$model" ]; then echo "skip: no model (set DSPARK_MODEL)"; exit 77; fi
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then echo "skip: $src is not a git checkout"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-hardlinks "$src" "$tmp/clone" || { echo "FAIL git clone"; exit 1; }
mkdir -p "$tmp/clone/build/release" "$tmp/elsewhere"
cp "$built" "$tmp/clone/build/release/dspark"
bin="$tmp/clone/build/release/dspark"
cd "$tmp/elsewhere" || exit 2
fail=0
"$bin" ab -m "$model" --n-prompts 4 -n 16 --bootstrap 200 --a serial --b draft-kind=ngram,num-draft-tokens=3 \
  --json >"$tmp/ab.json" 2>"$tmp/ab.err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then echo "FAIL ab exit code $rc"; cat "$tmp/ab.err"; fail=1; fi
python3 - "$tmp/ab.json" "$tmp/clone" <<'PY' || fail=1
import json, os, sys
j = json.load(open(sys.argv[1]))
clone = os.path.realpath(sys.argv[2])
assert j["n_prompts"] == 4, j["n_prompts"]
assert os.path.realpath(j["prompts_file"]) == clone + "/data/spec_bench_dev.jsonl", j["prompts_file"]
print("ok: ab read", j["prompts_file"])
PY
"$bin" generate -m "$model" -p "One, two, three," -n 4 --json >"$tmp/gen.json" 2>"$tmp/gen.err" || {
  echo "FAIL generate"; cat "$tmp/gen.err"; fail=1; }
grep -q "\"drafter_path\": *\"$(realpath "$tmp/clone")/drafters/gemma3-270m" "$tmp/gen.json" ||
  { echo "FAIL generate did not mount the clone's drafter"; grep -o '"drafter_path":"[^"]*"' "$tmp/gen.json"; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: a fresh clone in $tmp/clone works from $tmp/elsewhere"
exit "$fail"
