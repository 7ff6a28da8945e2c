#!/usr/bin/env python3
"""Split a journal-style results file into one file per date under docs/results/.

The journal (docs/RESULTS.md until 2026-12-06) is a run of dated sections, each opening with a
level-2 heading that starts with an ISO date:

    ## 2026-11-29 — engine vs llama.cpp (issue #2)
    ## 2026-12-01 (session 5) — sampling in O(V) passes ...

Every section of one date goes, in journal order and with its heading unchanged, into
docs/results/<date>.md (under a one-line title and a link back to the summary). A section runs
from its heading to the next dated heading or the end of the file; headings inside ``` fences do
not count. Text before the first dated section is not written anywhere: it is the summary's
(docs/RESULTS.md's) to keep. Relative Markdown link targets (`](img/x.png)`, `](../README.md)`)
are rewritten so they resolve from docs/results/ as they did from the journal's folder; absolute
URLs and `#anchors` are left alone.

Deterministic and idempotent: the output depends only on the input text, and running it twice
writes the same bytes. Only the dates present in the input are written; date files for other
dates are left as they are, so a journal with sections appended later (say a second 2026-12-06
section) is handled by running the script on it again. A date file that already holds a dated
section the input lacks (one added by hand) is not overwritten; the script stops with an error
unless --force is given.

Usage:
  python3 scripts/split_results.py [JOURNAL] [--out DIR] [--check] [--force]

  JOURNAL   the journal to split (default docs/RESULTS.md, relative to the repository root);
            the output links are rewritten as if JOURNAL lived in docs/
  --out     the output folder (default docs/results)
  --check   write nothing; exit 1 if any date file is missing or differs from what would be
            written (listing them), 0 otherwise
  --force   overwrite date files even when they hold sections the input lacks

Splitting a journal kept elsewhere (say the journal version of docs/RESULTS.md on another branch,
after docs/RESULTS.md became the summary):
  git show BRANCH:docs/RESULTS.md > journal.md && python3 scripts/split_results.py journal.md

Exit status: 0 done (or --check clean), 1 --check found differences, 2 usage or refused overwrite.
"""
import argparse
import os
import posixpath
import re
import sys

DATED = re.compile(r"^## (\d{4}-\d{2}-\d{2})\b")
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
SUMMARY = "docs/RESULTS.md"


def split_sections(text):
    """[(date, heading_line, section_text)] in input order; the preamble is dropped."""
    sections = []
    cur = None
    in_fence = False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else DATED.match(line)
        if m:
            cur = [m.group(1), line.rstrip("\n"), [line]]
            sections.append(cur)
        elif cur is not None:
            cur[2].append(line)
    return [(d, h, "".join(body)) for d, h, body in sections]


def fix_links(text, src_dir, out_dir):
    """Rewrite relative link targets written from src_dir so they resolve from out_dir."""
    def repl(m):
        target = m.group(2)
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path, sep, frag = target.partition("#")
        if not path:
            return m.group(0)
        resolved = posixpath.normpath(posixpath.join(src_dir, path))
        new = posixpath.relpath(resolved, out_dir)
        return m.group(1) + new + sep + frag + m.group(3)
    out = []
    in_fence = False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            in_fence = not in_fence
        out.append(line if in_fence else LINK.sub(repl, line))
    return "".join(out)


def render(date, sections, out_dir):
    """The text of docs/results/<date>.md for the given sections of that date."""
    back = posixpath.relpath(SUMMARY, out_dir)
    head = (f"# Results journal: {date}\n\n"
            f"Dated sections of the results journal; the current standing is in [RESULTS.md]({back}).\n\n")
    body = "".join(s if s.endswith("\n") else s + "\n" for s in sections)
    # One blank line between sections and exactly one newline at the end.
    body = re.sub(r"\n{3,}(?=## \d{4}-\d{2}-\d{2})", "\n\n", body).rstrip("\n") + "\n"
    return head + body


def plan(journal_text, src_dir, out_dir):
    """{date: file text} for every date in the journal."""
    by_date = {}
    for date, _, text in split_sections(journal_text):
        by_date.setdefault(date, []).append(fix_links(text, src_dir, out_dir))
    return {d: render(d, secs, out_dir) for d, secs in sorted(by_date.items())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("journal", nargs="?", default=SUMMARY)
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    journal = a.journal if os.path.isabs(a.journal) or os.path.exists(a.journal) else os.path.join(root, a.journal)
    out_rel = a.out.strip("/")
    out_dir = a.out if os.path.isabs(a.out) else os.path.join(root, out_rel)
    try:
        with open(journal, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        print(f"split_results: {e}", file=sys.stderr)
        return 2
    # Links in the journal were written relative to docs/ (where the journal lives).
    files = plan(text, "docs", out_rel if not os.path.isabs(a.out) else "docs/results")

    differ, refused = [], []
    for date, want in files.items():
        path = os.path.join(out_dir, f"{date}.md")
        have = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                have = f.read()
        if have == want:
            continue
        differ.append(path)
        if have is not None and not a.force:
            wanted = {h for d, h, _ in split_sections(want)}
            lost = [h for d, h, _ in split_sections(have) if h not in wanted]
            if lost:
                refused.append((path, lost))
    if a.check:
        for p in differ:
            print(f"differs: {os.path.relpath(p, root)}")
        print(f"split_results --check: {len(files)} date files, {len(differ)} differ")
        return 1 if differ else 0
    if refused:
        for p, lost in refused:
            print(f"split_results: {os.path.relpath(p, root)} holds sections the input lacks "
                  f"(use --force to drop them): {'; '.join(lost)}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for date, want in files.items():
        path = os.path.join(out_dir, f"{date}.md")
        if path in differ:
            with open(path, "w", encoding="utf-8") as f:
                f.write(want)
    print(f"split_results: {len(files)} date files, {len(differ)} written, {len(files) - len(differ)} unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
