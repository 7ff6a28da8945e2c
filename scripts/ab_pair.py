#!/usr/bin/env python3
"""Paired comparison of two arms of one `dspark ab --json` run (neither need be the baseline).

Usage: ab_pair.py RESULT.json ARM_A ARM_B [--bootstrap 2000] [--seed 1] [--json]

The same statistics `dspark ab` reports against its baseline, for any pair of its arms: the
aggregate speed ratio B/A (total tokens / total time, pooled over prompts), the same over the time
after each prompt's prefill (runs that recorded prefill_ms), and the pooled
acceptance change B - A in percentage points, each with a paired bootstrap CI over prompts (2.5 to
97.5 % percentiles, the same resampled prompt indices for both arms), and a per-category table of
the speed ratio and both arms' tau. Both arms ran on the same prompts in one alternating run, so
the pairing is by prompt. Exit codes: 0 ok, 2 bad input.
"""
import argparse
import json
import random
import sys


def pooled(rows, idx):
    tok = sum(rows[i]["tokens"] for i in idx)
    ms = sum(rows[i]["ms"] for i in idx)
    dr = sum(rows[i].get("drafted", 0) for i in idx)
    ac = sum(rows[i].get("accepted", 0) for i in idx)
    rounds = sum(rows[i].get("rounds", 0) for i in idx)
    pre = sum(rows[i].get("prefill_ms", 0.0) for i in idx)
    return {"tok_s": 1000.0 * tok / ms if ms else 0.0, "acc": ac / dr if dr else None,
            "decode_tok_s": 1000.0 * tok / (ms - pre) if pre > 0 and ms > pre else None,
            "tau": tok / rounds if rounds else 1.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("result")
    ap.add_argument("arm_a")
    ap.add_argument("arm_b")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        r = json.load(open(a.result))
        names = [x["name"] for x in r["arms"]]
        ia, ib = names.index(a.arm_a), names.index(a.arm_b)
    except (OSError, ValueError, KeyError) as e:
        print(f"ab_pair: {a.result}: {e} (arms: {', '.join(names) if 'names' in dir() else '?'})", file=sys.stderr)
        return 2
    pp = r["per_prompt"]
    A = [p["arms"][ia] for p in pp]
    B = [p["arms"][ib] for p in pp]
    n = len(pp)
    allidx = list(range(n))
    pa, pb = pooled(A, allidx), pooled(B, allidx)
    rng = random.Random(a.seed)
    ratios, deltas, dratios = [], [], []
    for _ in range(a.bootstrap):
        idx = [rng.randrange(n) for _ in range(n)]
        xa, xb = pooled(A, idx), pooled(B, idx)
        if xa["tok_s"] > 0:
            ratios.append(xb["tok_s"] / xa["tok_s"])
        if xa["decode_tok_s"] and xb["decode_tok_s"]:
            dratios.append(xb["decode_tok_s"] / xa["decode_tok_s"])
        if xa["acc"] is not None and xb["acc"] is not None:
            deltas.append(100.0 * (xb["acc"] - xa["acc"]))
    ci = lambda v: [sorted(v)[int(0.025 * (len(v) - 1))], sorted(v)[int(0.975 * (len(v) - 1))]] if v else None
    out = {"result": a.result, "a": a.arm_a, "b": a.arm_b, "n_prompts": n,
           "speed_ratio": pb["tok_s"] / pa["tok_s"] if pa["tok_s"] else None, "speed_ratio_ci": ci(ratios),
           "decode_speed_ratio": pb["decode_tok_s"] / pa["decode_tok_s"] if pa["decode_tok_s"] and pb["decode_tok_s"] else None,
           "decode_speed_ratio_ci": ci(dratios),
           "acceptance_a": pa["acc"], "acceptance_b": pb["acc"],
           "acceptance_delta_pts": 100.0 * (pb["acc"] - pa["acc"]) if pa["acc"] is not None and pb["acc"] is not None else None,
           "acceptance_delta_ci": ci(deltas), "tau_a": pa["tau"], "tau_b": pb["tau"], "per_category": []}
    cats = {}
    for i, p in enumerate(pp):
        cats.setdefault(p["category"], []).append(i)
    for c, idx in sorted(cats.items()):
        xa, xb = pooled(A, idx), pooled(B, idx)
        out["per_category"].append({"category": c, "n": len(idx), "speed_ratio": xb["tok_s"] / xa["tok_s"] if xa["tok_s"] else None,
                                    "tau_a": xa["tau"], "tau_b": xb["tau"]})
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    lo, hi = out["speed_ratio_ci"] or [float("nan")] * 2
    print(f"{a.arm_b} vs {a.arm_a}, {n} prompts: speed {out['speed_ratio']:.3f}x [{lo:.3f}, {hi:.3f}], "
          f"tau {pa['tau']:.2f} -> {pb['tau']:.2f}", end="")
    if out["decode_speed_ratio"] is not None:
        dl, dh = out["decode_speed_ratio_ci"]
        print(f", after prefill {out['decode_speed_ratio']:.3f}x [{dl:.3f}, {dh:.3f}]", end="")
    if out["acceptance_delta_pts"] is not None:
        dl, dh = out["acceptance_delta_ci"]
        print(f", acceptance {100 * pa['acc']:.1f} % -> {100 * pb['acc']:.1f} % ({out['acceptance_delta_pts']:+.1f} pts [{dl:+.1f}, {dh:+.1f}])")
    else:
        print()
    print(f"\n| category | prompts | speed {a.arm_b}/{a.arm_a} | tau {a.arm_a} | tau {a.arm_b} |\n|---|---:|---:|---:|---:|")
    for c in out["per_category"]:
        print(f"| {c['category']} | {c['n']} | {c['speed_ratio']:.2f} | {c['tau_a']:.2f} | {c['tau_b']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
