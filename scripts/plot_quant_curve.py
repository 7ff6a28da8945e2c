#!/usr/bin/env python3
"""Tabulate and plot a drafter quantization curve from `dspark ab --json` (scripts/quant_curve.sh).

Usage: plot_quant_curve.py CURVE_AB.json --png OUT.png --markdown OUT.md [--pair turbo4 affine4]

Arm 0 is the unquantized drafter; every other arm is a quantized rung whose spec names its
checkpoint (draft-model=DIR). Drafter bytes = the checkpoint's model.safetensors plus, for a
drafter whose LM head is the target's rows (no lm_head tensor, extension E3), those rows in the
target's Q8_0 encoding (34 bytes per 32 weights): the bytes a draft round reads either way.
The table lists bytes, bits per weight (config quantization block), acceptance by position, tau,
tok/s, the acceptance change vs arm 0 with its 95% CI (dspark ab's paired bootstrap), and the
speed ratio; --pair A B adds a paired bootstrap (prompts resampled, 2000 times, seed 0) of the
pooled acceptance difference B - A and the speed ratio B / A (the turbo-4 vs affine-4 headline).
"""
import argparse
import json
import os
import re
import struct
import sys


def checkpoint_bytes(d):
    st = os.path.join(d, "model.safetensors")
    size = os.path.getsize(st)
    with open(st, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    cfg = json.load(open(os.path.join(d, "config.json")))
    extra = 0
    if "lm_head.weight" not in header and "d2t" in header:
        vd = header["d2t"]["shape"][0]
        extra = vd * cfg["hidden_size"] * 34 // 32
    return size + extra, cfg


def paired(per_prompt, a, b, n_boot=2000, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    rows = [(p["arms"][a], p["arms"][b]) for p in per_prompt]
    A = np.array([[r[0]["accepted"], r[0]["drafted"], r[0]["tokens"], r[0]["ms"]] for r in rows], float)
    B = np.array([[r[1]["accepted"], r[1]["drafted"], r[1]["tokens"], r[1]["ms"]] for r in rows], float)
    def stat(idx):
        a_, b_ = A[idx].sum(0), B[idx].sum(0)
        return 100 * (b_[0] / b_[1] - a_[0] / a_[1]), (b_[2] / b_[3]) / (a_[2] / a_[3])
    point = stat(np.arange(len(rows)))
    boots = np.array([stat(rng.integers(0, len(rows), len(rows))) for _ in range(n_boot)])
    lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
    return point, lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result")
    ap.add_argument("--png", required=True)
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--pair", nargs=2, default=["affine4", "turbo4"], metavar=("A", "B"))
    args = ap.parse_args()
    r = json.load(open(args.result))
    arms = r["arms"]
    comps = {c["arm"]: c for c in r["comparisons"]}
    rows = []
    for i, a in enumerate(arms):
        m = re.search(r"draft-model=([^,]+)", a["spec"])
        if not m:
            sys.exit(f"arm {a['name']}: no draft-model in its spec")
        nbytes, cfg = checkpoint_bytes(m.group(1))
        q = cfg.get("quantization") or {}
        c = comps.get(a["name"])
        d = c["acceptance_delta_pts"] if c else None
        rows.append(dict(name=a["name"], bytes=nbytes, quant=q, acc=a["acceptance"], tau=a["tau"], tok_s=a["tok_s"],
                         by_pos=a["acceptance_by_pos"], delta=d, speed=c["speed_ratio"] if c else None))
    base = rows[0]
    lines = [f"## drafter quantization curve: {len(r['per_prompt'])} prompts x {r['max_tokens']} tokens, "
             f"temperature {r['temperature']}, baseline {base['name']}\n",
             "| rung | MB | acceptance | by position | tau | tok/s | acceptance change, pts [95% CI] | speed ratio [95% CI] |",
             "|---|---|---|---|---|---|---|---|"]
    for x in rows:
        pos = " ".join("-" if p is None else f"{100 * p:.1f}" for p in x["by_pos"])
        dl = "(baseline)" if x["delta"] is None else f"{x['delta']['point']:+.2f} [{x['delta']['lo']:+.2f}, {x['delta']['hi']:+.2f}]"
        sp = "(baseline)" if x["speed"] is None else f"{x['speed']['point']:.3f} [{x['speed']['lo']:.3f}, {x['speed']['hi']:.3f}]"
        lines.append(f"| {x['name']} | {x['bytes'] / 1e6:.2f} | {100 * (x['acc'] or 0):.2f}% | {pos} | {x['tau']:.3f} | "
                     f"{x['tok_s']:.1f} | {dl} | {sp} |")
    names = [a["name"] for a in arms]
    if all(n in names for n in args.pair):
        ia, ib = names.index(args.pair[0]), names.index(args.pair[1])
        (pd, ps), lo, hi = paired(r["per_prompt"], ia, ib)
        lines.append(f"\nheadline, paired over prompts: {args.pair[1]} - {args.pair[0]} acceptance {pd:+.2f} pts "
                     f"[{lo[0]:+.2f}, {hi[0]:+.2f}], speed ratio {ps:.3f} [{lo[1]:.3f}, {hi[1]:.3f}]")
    open(args.markdown, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_quant_curve.py: matplotlib missing; no plot", file=sys.stderr)
        return 3
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for x in rows:
        mb = x["bytes"] / 1e6
        color = "black" if x is base else ("tab:blue" if x["name"].startswith("affine") else
                                           "tab:red" if x["name"].startswith("turbo") else "tab:green")
        acc = 100 * (x["acc"] or 0)
        if x["delta"]:
            d = x["delta"]
            ax1.errorbar(mb, acc, yerr=[[d["point"] - d["lo"]], [d["hi"] - d["point"]]], fmt="o", color=color, capsize=3)
        else:
            ax1.plot(mb, acc, "s", color=color)
        ax1.annotate(x["name"], (mb, acc), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax2.plot(mb, x["tok_s"], "o" if x is not base else "s", color=color)
        ax2.annotate(x["name"], (mb, x["tok_s"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax1.set_xlabel("drafter MB (weights read per round)")
    ax1.set_ylabel("pooled acceptance %  (bars: 95% CI of the change vs baseline)")
    ax2.set_xlabel("drafter MB")
    ax2.set_ylabel("tok/s (aggregate)")
    ax1.set_title("acceptance vs bytes (blue affine, red turbo, green knapsack)")
    ax2.set_title("speed vs bytes")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
