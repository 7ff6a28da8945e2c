#!/usr/bin/env bash
# No absolute path of a development machine in code, scripts, docs or shipped configs: a user's clone
# has none of them. The results journal, docs/results/*.md, is exempt (it records the exact commands
# that were run); its summary, docs/RESULTS.md, is not.
# Usage: test_no_machine_paths.sh SOURCE_DIR   (exit 77 = skipped: not a git checkout)
set -u
cd "$1" || exit 2
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "skip: not a git checkout"; exit 77; }
self="tests/cli/test_no_machine_paths.sh"
hits=$(git ls-files -z | grep -zv -e '^docs/results/[^/]*\.md$' -e "^$self\$" |
       xargs -0 grep -nIE '(^|[^.~A-Za-z0-9_])/(work|root|home/[a-z][a-z0-9_-]*)/' 2>/dev/null)
if [ -n "$hits" ]; then
  echo "FAIL: machine paths in tracked files:"
  echo "$hits" | head -20
  exit 1
fi
echo "ok: no machine paths in $(git ls-files | wc -l) tracked files"
