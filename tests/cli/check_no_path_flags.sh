#!/usr/bin/env bash
# Shared by test_install_prefix.sh and test_fresh_clone.sh: from WORKDIR, with no path flags,
# `dspark ab --n-prompts 4 -n 16` must read DATA_DIR/spec_bench_dev.jsonl and `dspark generate`
# must mount DRAFTERS_DIR/gemma3-270m. Prints ok/FAIL lines; exit 1 on any failure.
# Usage: check_no_path_flags.sh BIN MODEL WORKDIR DATA_DIR DRAFTERS_DIR
set -u
bin="$1" model="$2" work="$3" data="$(realpath "$4")" drafters="$(realpath "$5")"
cd "$work" || exit 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
"$bin" ab -m "$model" --n-prompts 4 -n 16 --bootstrap 200 --a serial --b draft-kind=ngram,num-draft-tokens=3 \
  --json >"$out/ab.json" 2>"$out/ab.err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then echo "FAIL ab exit code $rc"; cat "$out/ab.err"; fail=1; fi
python3 - "$out/ab.json" "$data/spec_bench_dev.jsonl" <<'PY' || fail=1
import json, os, sys
j = json.load(open(sys.argv[1]))
assert j["n_prompts"] == 4, j["n_prompts"]
assert os.path.realpath(j["prompts_file"]) == sys.argv[2], (j["prompts_file"], sys.argv[2])
print("ok: ab read", j["prompts_file"])
PY
"$bin" generate -m "$model" -p "One, two, three," -n 4 --json >"$out/gen.json" 2>"$out/gen.err" || {
  echo "FAIL generate"; cat "$out/gen.err"; fail=1; }
python3 - "$out/gen.json" "$drafters/gemma3-270m" <<'PY' || fail=1
import json, os, sys
j = json.load(open(sys.argv[1]))
path = j.get("spec", {}).get("drafter_path", "")
assert os.path.realpath(path) == sys.argv[2], (path, sys.argv[2])
print("ok: generate mounted", path)
PY
exit "$fail"
