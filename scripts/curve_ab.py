#!/usr/bin/env python3
"""Paired A/B of two dspark builds on the verify curve (forward of 1..K new tokens after C context).

Usage: curve_ab.py DSPARK_A DSPARK_B [--model smollm2-135m] [--ctx 300,700,1500] [--max 4]
                   [--pairs 15] [--json OUT.json]

Runs `dspark bench --verify-curve` alternately with A and B (the order flips every pair), each run
taking the median of 5 forwards, and prints per (context, tokens) the median ms of each build and
the median paired ratio A/B (> 1: B is faster) with a 95 % bootstrap CI over the pairs.
Keep the machine otherwise idle while it runs.
"""
import argparse, json, random, statistics, subprocess, sys


def run(exe, model, ctx, kmax):
    try:
        out = subprocess.run([exe, "bench", "-m", model, "-p", "0", "-n", "0", "--verify-curve", "--curve-max",
                              str(kmax), "--curve-ctx", str(ctx), "--repeats", "5", "--json"],
                             capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"curve_ab: cannot run {exe}: {e.strerror}")
    if out.returncode != 0:
        sys.exit(f"curve_ab: {exe} bench failed (exit {out.returncode}): {out.stderr.strip()[-400:]}")
    return {p["n_tokens"]: p["ms"] for p in json.loads(out.stdout)["verify_curve"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a"); ap.add_argument("b")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--ctx", default="300,700,1500")
    ap.add_argument("--max", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--json", help="write the rows and raw timings here")
    a = ap.parse_args()
    ctxs = [int(c) for c in a.ctx.split(",")]
    raw = {(w, c): {n: [] for n in range(1, a.max + 1)} for w in "AB" for c in ctxs}
    for r in range(a.pairs):
        for c in ctxs:
            for w in ("AB" if r % 2 == 0 else "BA"):
                for n, ms in run(a.a if w == "A" else a.b, a.model, c, a.max).items():
                    raw[(w, c)][n].append(ms)
        print(f"pair {r + 1}/{a.pairs}", file=sys.stderr)
    rng, rows = random.Random(1), []
    for c in ctxs:
        for n in range(1, a.max + 1):
            xa, xb = raw[("A", c)][n], raw[("B", c)][n]
            ratios = [x / y for x, y in zip(xa, xb)]
            boots = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
            row = dict(ctx=c, n_tokens=n, a_ms=statistics.median(xa), b_ms=statistics.median(xb),
                       a_over_b=statistics.median(ratios), ci=[boots[50], boots[1949]])
            rows.append(row)
            print(f"ctx {c:5d}  {n} token(s): A {row['a_ms']:.3f} ms  B {row['b_ms']:.3f} ms  "
                  f"A/B {row['a_over_b']:.3f} [{boots[50]:.3f}, {boots[1949]:.3f}]")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(a=a.a, b=a.b, model=a.model, pairs=a.pairs, rows=rows,
                           raw={f"{w}@{c}": v for (w, c), v in raw.items()}), f, indent=1)


if __name__ == "__main__":
    main()
