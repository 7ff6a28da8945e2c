#!/usr/bin/env python3
"""Lengths of the functions defined at namespace scope in C++ sources, longest first.

A function here is a definition that starts at column 0 (its signature may span lines) and ends at
the first `}` in column 0 after its opening brace: the layout clang-format gives this repository.
Member functions defined inside a class body are not counted (they are short by convention).

Usage: python3 scripts/function_lengths.py [--top N] [--over LINES] [--json] PATH...
Exit 1 with --over when any function is longer than LINES (a check for CI).
"""
import argparse
import json
import pathlib
import re
import sys

SIGNATURE_END = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(->\s*[\w:<>,\s*&]+)?\s*\{\s*$")
NOT_FUNCTION = re.compile(r"^(namespace|struct|class|enum|union|extern|static_assert|#)")


def functions(path):
    """(name, first line, length in lines) of each function defined at column 0 in `path`."""
    lines = path.read_text(errors="replace").splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line and not line[0].isspace() and not NOT_FUNCTION.match(line) and "(" in line:
            # the signature may continue over the next lines up to the opening brace
            j = i
            sig = line
            while j < len(lines) and not SIGNATURE_END.search(lines[j]) and j - i < 8:
                if lines[j].rstrip().endswith(";") or (j > i and lines[j] and not lines[j][0].isspace()):
                    break
                j += 1
                sig += " " + (lines[j].strip() if j < len(lines) else "")
            if j < len(lines) and SIGNATURE_END.search(lines[j]):
                k = j + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                name = re.search(r"([\w:~<>=!+\-*/\[\]]+)\s*\(", sig)
                out.append((name.group(1) if name else sig[:40], i + 1, k - i + 1))
                i = k + 1
                continue
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--over", type=int, default=0, help="list (and fail on) functions longer than this")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for p in a.paths:
        root = pathlib.Path(p)
        files = sorted(root.rglob("*.cpp")) if root.is_dir() else [root]
        for f in files:
            rows += [(n, length, f"{f}:{line}") for n, line, length in functions(f)]
    rows.sort(key=lambda r: -r[1])
    shown = [r for r in rows if r[1] > a.over] if a.over else rows[: a.top]
    if a.json:
        print(json.dumps([{"function": n, "lines": length, "at": at} for n, length, at in shown], indent=1))
    else:
        for n, length, at in shown:
            print(f"{length:5d}  {n}  {at}")
    return 1 if a.over and shown else 0


if __name__ == "__main__":
    sys.exit(main())
