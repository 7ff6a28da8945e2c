#!/usr/bin/env python3
"""Every document a file of the repository refers to must be in the repository.

Scans the tracked text files (code, scripts, docs, data READMEs) for
  - names of Markdown files (`docs/SPECULATION.md`, `SERVE.md`, `data/regen-ids/README.md`), and
  - relative targets of Markdown links in .md files (`[plot](results/ab.png)`),
and checks that each names a file that exists: relative to the repository root, to the referring
file's folder, or (a bare file name) anywhere in the tree. Prints every dangling reference as
FILE:LINE: TARGET and exits 1 if there is one, 0 otherwise.

Usage: python3 scripts/check_doc_refs.py [REPO_ROOT]
"""
import os
import re
import subprocess
import sys

MD_NAME = re.compile(r"(?<![\w/.$-])((?:\.{0,2}/)?[\w.-]+(?:/[\w.-]+)*\.md)\b")
# A document's name is in capitals (README.md, SERVE.md, DSPARK-CHECKPOINT.md) or it lives in docs/;
# lower-case names elsewhere are output files in example commands (--markdown t0.md).
DOC_NAME = re.compile(r"^[A-Z][A-Z0-9_-]*\.md$")
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
TEXT_EXT = {".cpp", ".h", ".hpp", ".cc", ".py", ".sh", ".md", ".txt", ".cmake", ".json", ".toml", ".cfg", ".yml", ""}
# Names that are not references to our documents: files of other projects quoted as such.
EXTERNAL = {"CHANGELOG.md"}
PLACEHOLDERS = {"OUT.md", "FILE.md", "PATH.md", "X.md", "NAME.md"}  # metavariables in usage lines


def repo_files(root):
    """The tracked files (git), else every file under root but build/ and hidden folders."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        return out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and not (d == root and x == "build")]
            found += [os.path.relpath(os.path.join(d, f), root) for f in fs]
        return found


def tracked_files(root, paths):
    return [p for p in paths if os.path.splitext(p)[1] in TEXT_EXT or os.path.basename(p) == "CMakeLists.txt"]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    paths = repo_files(root)
    files = tracked_files(root, paths)
    names = {}
    for p in files:
        names.setdefault(os.path.basename(p), []).append(p)
    all_paths = set(paths)

    def exists(ref, referrer):
        ref = ref.strip()
        if ref.startswith(("http://", "https://", "mailto:")):
            return True
        cands = [os.path.normpath(ref.lstrip("/")), os.path.normpath(os.path.join(os.path.dirname(referrer), ref))]
        for c in cands:
            if c in all_paths or os.path.exists(os.path.join(root, c)):
                return True
        return "/" not in ref and os.path.basename(ref) in names

    bad = []
    for p in files:
        try:
            with open(os.path.join(root, p), encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for i, line in enumerate(lines, 1):
            refs = [m.group(1) for m in MD_NAME.finditer(line)
                    if DOC_NAME.match(os.path.basename(m.group(1))) or "docs/" in m.group(1)]
            if p.endswith(".md"):
                refs += [m.group(1) for m in MD_LINK.finditer(line) if "://" not in m.group(1)]
            for r in refs:
                if os.path.basename(r) in EXTERNAL | PLACEHOLDERS or "*" in r:
                    continue
                if not exists(r, p):
                    bad.append(f"{p}:{i}: {r}")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} reference(s) to files that are not in the repository")
        return 1
    print(f"doc references: {len(files)} files checked, none dangling")
    return 0


if __name__ == "__main__":
    sys.exit(main())
