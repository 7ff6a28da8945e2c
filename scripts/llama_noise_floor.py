#!/usr/bin/env python3
"""How well does llama.cpp agree with itself? The noise floor for dspark-vs-llama.cpp gates.

Runs the first teacher-forced golden sequence through llama.cpp twice, once in batches of
n_batch (as the goldens were made) and once token by token, and prints mean KL(batched ||
serial) and top-1 agreement. Any implementation that is not bit-identical to one llama.cpp
configuration cannot be expected to agree with the goldens better than this.

With --greedy it also replays tests/goldens/greedy.jsonl with the prompt fed token by token
instead of in one batch and counts continuations identical to the goldens.

Usage: python scripts/llama_noise_floor.py [--model PATH] [--goldens DIR] [--n 512] [--greedy]
  (--goldens smollm2 with --model pointing at the SmolLM2 GGUF: tests/goldens/smollm2/)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import LlamaRef, default_model_path  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF path (default: the assembled PyPI model)")
    ap.add_argument("--n", type=int, default=512, help="positions of golden sequence 0 to use")
    ap.add_argument("--greedy", action="store_true", help="also replay the greedy goldens")
    ap.add_argument("--goldens", default="", help="subfolder of tests/goldens (default: the default model's)")
    args = ap.parse_args()
    gdir = os.path.join(REPO, "tests/goldens", args.goldens)
    meta = json.load(open(os.path.join(gdir, "teacher_forced.json"), encoding="utf-8"))
    off = next(sec["offset"] for sec in meta["sections"] if sec["name"] == "tokens")
    toks = np.fromfile(os.path.join(gdir, "teacher_forced.bin"), dtype=np.int32, count=args.n, offset=off).tolist()
    ref = LlamaRef(args.model or default_model_path())
    batched, serial = [], []
    ref.clear()
    ref.eval_all_logits(toks, lambda p, logits: batched.append(log_softmax(logits)))
    ref.clear()
    for i, t in enumerate(toks):
        serial.append(log_softmax(ref.step(t)))
        if i % 64 == 63:
            print(f"  token by token: {i + 1}/{len(toks)}", file=sys.stderr, flush=True)
    kl = float(np.mean([np.sum(np.exp(a) * (a - b)) for a, b in zip(batched, serial)]))
    top1 = float(np.mean([a.argmax() == b.argmax() for a, b in zip(batched, serial)]))
    print(f"llama.cpp batch {ref.n_batch} vs token by token over {len(toks)} positions: "
          f"mean KL {kl:.5f}, top-1 agreement {top1:.4f}")
    if args.greedy:
        greedy_floor(ref, gdir)


def greedy_floor(ref: LlamaRef, gdir: str) -> None:
    rows = [json.loads(line) for line in open(os.path.join(gdir, "greedy.jsonl"), encoding="utf-8")]
    same = 0
    for k, r in enumerate(rows):
        ref.clear()
        for t in r["prompt_ids"]:
            logits = ref.step(t)
        out = []
        while len(out) < len(r["output_ids"]):
            tok = int(np.argmax(logits))
            out.append(tok)
            if len(out) == len(r["output_ids"]):
                break
            logits = ref.step(tok)
        same += out == r["output_ids"]
        print(f"  greedy {k + 1}/{len(rows)}: {'same' if out == r['output_ids'] else 'differs'}", file=sys.stderr, flush=True)
    print(f"llama.cpp greedy with token-by-token prompt vs goldens (batched prompt): {same}/{len(rows)} identical")


if __name__ == "__main__":
    main()
