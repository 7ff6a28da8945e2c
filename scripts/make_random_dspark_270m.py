#!/usr/bin/env python3
"""A random-weight DSpark drafter shaped for Gemma 3 270M (the served target), for cost and
plumbing measurements only: it pairs with the real target (18 layers, H 640, V 262144, taps from
real layers, embed/lm_head shared from the target) but predicts nothing useful, so its acceptance
is ~0. The trained drafter of issue #4 replaces it.

Usage: python scripts/make_random_dspark_270m.py OUT_DIR [--layers 2] [--rank 64] [--block 7]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_synthetic_dspark as syn  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--block", type=int, default=7)
    args = ap.parse_args()
    # Gemma 3 270M target: H 640, V 262144, 18 layers; drafter heads like the target's.
    syn.H, syn.NH, syn.HD, syn.NKV, syn.I, syn.V = 640, 4, 256, 1, 2048, 262144
    syn.N_LAYERS, syn.N_TARGET_LAYERS, syn.TAPS = args.layers, 18, [2, 8, 14]
    syn.GAMMA, syn.MASK, syn.RANK = args.block, 4, args.rank
    v = dict(name="random-270m", dtype="BF16", markov="vanilla", rank=args.rank, conf=True, conf_markov=True,
             target_embed=True, target_lm_head=True)
    cfg = syn.make_config(v)
    cfg["dspark_synthetic"] = {"generator": "scripts/make_random_dspark_270m.py", "note": "random weights"}
    w = syn.make_weights(v, seed=270)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    syn.write_safetensors(os.path.join(args.out, "model.safetensors"), {k: (a, "BF16") for k, a in w.items()})
    print(f"wrote {args.out}: {len(w)} tensors")


if __name__ == "__main__":
    main()
