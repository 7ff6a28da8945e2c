#!/usr/bin/env bash
# ctest entry of the live server tests: runs tests/serve/test_server.py (or the test script given
# as the first argument, e.g. test_http.py) with $DSPARK_TEST_PYTHON (scripts/test.sh points it at
# a venv holding the pinned openai client), else python3.
# Exit 77 = skipped (no model, or no openai package).
script="test_server.py"
case "${1:-}" in *.py) script="$1"; shift ;; esac
exec "${DSPARK_TEST_PYTHON:-python3}" "$(dirname "$0")/$script" "$@"
