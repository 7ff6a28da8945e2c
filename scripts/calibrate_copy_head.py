#!/usr/bin/env python3
"""Calibrates the DSpark copy head's acceptance priors on regen shards (training data only).

For every response position of every sequence, the copy head's lookup (the latest earlier
occurrence of the last n tokens, n = max_ngram .. min_ngram, over prompt + response so far) is
compared with the token the target actually produced next. Output: per match length n the share
of proposals that were right (slot 0's conditional acceptance at that temperature), split by the
sequences' sampling temperature. The JSON is what `dspark_copy_head.prior_acceptance` takes
(docs/DSPARK-CHECKPOINT.md E5), e.g.:

  python scripts/calibrate_copy_head.py regen/v1 --drafter-slot0 0.20 > priors.json

Refuses shards whose manifest names the evaluation prompts (the regen command already does).
"""
import argparse
import glob
import json
import os
import struct
import sys

import numpy as np


def read_shard(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name in ("tokens", "seq_start", "prompt_len", "temperature"):
            t = header[name]
            dt = {"I32": np.int32, "I64": np.int64, "F32": np.float32}[t["dtype"]]
            b, e = t["data_offsets"]
            f.seek(base + b)
            out[name] = np.frombuffer(f.read(e - b), dtype=dt)
    return out


def lookup(seq, max_n, min_n):
    """(token, n) of the copy head over seq (list), or (None, 0)."""
    L = len(seq)
    for n in range(min(max_n, L - 1), min_n - 1, -1):
        suffix = seq[L - n:]
        for s in range(L - n - 1, -1, -1):
            if seq[s:s + n] == suffix:
                return seq[s + n], n
    return None, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", help="regen output folders (shard-*.safetensors)")
    ap.add_argument("--max-ngram", type=int, default=3)
    ap.add_argument("--min-ngram", type=int, default=1)
    ap.add_argument("--max-seqs", type=int, default=400, help="sequences to scan at most (the lookup is O(len^2))")
    ap.add_argument("--drafter-slot0", type=float, required=True,
                    help="held-out slot-0 acceptance of the drafter itself (train-drafter's heldout accept_by_pos[0])")
    ap.add_argument("--temperature", type=float, default=0.0, help="use sequences sampled at this temperature")
    args = ap.parse_args()
    for d in args.dirs:
        m = os.path.join(d, "manifest.json")
        if os.path.exists(m) and "spec_bench" in open(m).read():
            sys.exit(f"{m}: names the evaluation prompts; refusing")
    hits = np.zeros(args.max_ngram + 1)
    tries = np.zeros(args.max_ngram + 1)
    seqs = 0
    for d in args.dirs:
        for path in sorted(glob.glob(os.path.join(d, "shard-*.safetensors"))):
            s = read_shard(path)
            for i in range(len(s["prompt_len"])):
                if abs(float(s["temperature"][i]) - args.temperature) > 1e-6:
                    continue
                toks = s["tokens"][s["seq_start"][i]:s["seq_start"][i + 1]].tolist()
                p = int(s["prompt_len"][i])
                for t in range(p, len(toks)):  # predict toks[t] from toks[:t]
                    tok, n = lookup(toks[:t], args.max_ngram, args.min_ngram)
                    if n:
                        tries[n] += 1
                        hits[n] += tok == toks[t]
                seqs += 1
                if seqs >= args.max_seqs:
                    break
            if seqs >= args.max_seqs:
                break
        if seqs >= args.max_seqs:
            break
    prior = [args.drafter_slot0] + [float(hits[n] / tries[n]) if tries[n] else 0.5 for n in range(1, args.max_ngram + 1)]
    json.dump({"max_ngram": args.max_ngram, "min_ngram": args.min_ngram, "prior_acceptance": prior,
               "evidence": {"sequences": seqs, "temperature": args.temperature,
                            "proposals_by_n": tries[1:].astype(int).tolist(), "right_by_n": hits[1:].astype(int).tolist()}},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
