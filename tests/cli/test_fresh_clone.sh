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
src_tests="$(cd "$(dirname "$0")" && pwd)"
bash "$src_tests/check_no_path_flags.sh" "$bin" "$model" "$tmp/elsewhere" "$tmp/clone/data" "$tmp/clone/drafters" || exit 1
echo "ok: a fresh clone in $tmp/clone works from $tmp/elsewhere"
