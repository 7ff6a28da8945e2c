#!/usr/bin/env bash
# ctest entry of the live server test: runs tests/serve/test_server.py with $DSPARK_TEST_PYTHON
# (scripts/test.sh points it at a venv holding the pinned openai client), else python3.
# Exit 77 = skipped (no model, or no openai package).
exec "${DSPARK_TEST_PYTHON:-python3}" "$(dirname "$0")/test_server.py" "$@"
