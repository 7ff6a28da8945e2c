#!/usr/bin/env bash
# The shipped default drafter (drafters/gemma3-270m, found beside the build or source tree):
# `dspark generate` mounts it without flags (DSpark + copy head, cost-aware schedule), `--no-spec`
# does not, the greedy text is the same, and the PROVENANCE file is there. With $DSPARK_SMOLLM2_MODEL,
# the same for SmolLM2, whose default_spec.json names the suffix drafter over an index of its answers
# (built into the cache from the shipped ids on first use).
# Usage: test_shipped_drafter.sh DSPARK_BINARY SOURCE_DIR [MODEL.gguf]   (else $DSPARK_MODEL; 77 = skipped)
set -u
bin="$1"
src="$2"
model="${3:-${DSPARK_MODEL:-}}"
if [ -z "$model" ] || [ ! -f "$model" ]; then
  echo "skip: no model (set DSPARK_MODEL)"
  exit 77
fi
fail=0
for f in config.json model.safetensors PROVENANCE; do
  [ -s "$src/drafters/gemma3-270m/$f" ] || { echo "FAIL drafters/gemma3-270m/$f missing"; fail=1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt="Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox"
"$bin" generate -m "$model" -p "$prompt" -n 48 --json >"$tmp/spec.json" 2>"$tmp/err1" || { echo "FAIL generate (default)"; cat "$tmp/err1"; fail=1; }
"$bin" generate -m "$model" -p "$prompt" -n 48 --json --no-spec >"$tmp/plain.json" 2>"$tmp/err2" || { echo "FAIL generate --no-spec"; cat "$tmp/err2"; fail=1; }
python3 - "$tmp/spec.json" "$tmp/plain.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL", what)
        ok = False
spec = s.get("spec") or {}
check(spec.get("shipped_default") is True, "default run did not mount the shipped drafter: %r" % spec.get("shipped_default"))
check(spec.get("schedule") == "cost-static", "shipped drafter should use the cost-aware schedule from start-up costs")
check("copy_head" in (spec.get("drafter") or {}), "shipped drafter should run its copy head")
check(not p.get("spec"), "--no-spec still reported speculation")
check(s["text"] == p["text"], "greedy text differs with the shipped drafter:\n%r\n%r" % (s["text"], p["text"]))
check(spec.get("tau", 0) > 1.0, "the shipped drafter accepted nothing on a repeating prompt")
sys.exit(0 if ok else 1)
PY
smol="${DSPARK_SMOLLM2_MODEL:-}"
if [ -n "$smol" ] && [ -f "$smol" ]; then
  for f in default_spec.json PROVENANCE; do
    [ -s "$src/drafters/smollm2-135m/$f" ] || { echo "FAIL drafters/smollm2-135m/$f missing"; fail=1; }
  done
  q="Write the word blue five times, separated by commas."
  "$bin" generate -m "$smol" --chat -p "$q" -n 48 --json >"$tmp/s_spec.json" 2>"$tmp/err3" || { echo "FAIL smollm2 generate (default)"; cat "$tmp/err3"; fail=1; }
  "$bin" generate -m "$smol" --chat -p "$q" -n 48 --json --no-spec >"$tmp/s_plain.json" 2>"$tmp/err4" || { echo "FAIL smollm2 generate --no-spec"; cat "$tmp/err4"; fail=1; }
  python3 - "$tmp/s_spec.json" "$tmp/s_plain.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
spec = s.get("spec") or {}
ok = True
for cond, what in [(spec.get("shipped_default") is True, "smollm2: the default run did not mount the shipped setup"),
                   (spec.get("drafter_kind") == "suffix", "smollm2: default_spec.json names the suffix drafter, got %r" % spec.get("drafter_kind")),
                   (str(spec.get("suffix_index", "")).endswith("indexes/smollm2-135m-f102c98bcffe94df.sfx"), "smollm2: the index built from the shipped ids was not mounted: %r" % spec.get("suffix_index")),
                   (s["text"] == p["text"], "smollm2: greedy text differs with the shipped setup")]:
    if not cond:
        print("FAIL", what)
        ok = False
sys.exit(0 if ok else 1)
PY
fi
[ "$fail" -eq 0 ] && echo "ok: shipped drafter mounted by default, same greedy text as --no-spec"
exit "$fail"
