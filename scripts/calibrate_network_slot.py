#!/usr/bin/env python3
"""Calibrates the copy head's prior for the network's own slots (prior_acceptance[0]).

The prior is what the cost-aware schedule expects a network slot to earn before the backbone has run,
so it decides whether a backbone pass is worth its cost. It is measured with the serving drafter on
held-out *training* prompts (never the evaluation prompts), from the shadow counts that `dspark ab
--json` reports per arm (drafter_stats.copy_head.shadow: for every slot the target evaluated, who
drafted it, the copy head's match length there, whether it was accepted):

  # 1. the held-out training prompts (index % 50 == 0, as train-drafter holds them out)
  python3 scripts/calibrate_network_slot.py --heldout train_prompts.jsonl > heldout.jsonl
  # 2. a copy of the drafter whose prior_acceptance[0] is high enough (e.g. 0.5) that the backbone
  #    runs wherever the copy head has no match; greedy, static costs
  dspark ab -m gemma3-270m --prompts heldout.jsonl --arm cal=draft-model=D05,draft-schedule=cost-static,draft-quant=auto \\
      --n-prompts 96 -n 128 --json > cal.json
  # 3. the acceptance of the network's slots where the copy head had no match = the prior
  python3 scripts/calibrate_network_slot.py cal.json cal

A run at temperature > 0 (--temp 0.7 --top-p 0.95) calibrates prior_acceptance_sampled[0], the prior
of sampled requests (acceptance there = the target's sampled token equals the draft).
"""
import argparse
import json
import sys


def heldout(path, mod):
    with open(path) as f:
        for i, line in enumerate(f):
            if line.strip() and i % mod == 0:
                sys.stdout.write(line if line.endswith("\n") else line + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", help="dspark ab --json output")
    ap.add_argument("arm", nargs="?", help="arm name in the run")
    ap.add_argument("--heldout", metavar="TRAIN_JSONL", help="print the held-out training prompts and exit")
    ap.add_argument("--heldout-mod", type=int, default=50)
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    a = ap.parse_args()
    if a.heldout:
        heldout(a.heldout, a.heldout_mod)
        return 0
    if not a.run or not a.arm:
        ap.error("RUN.json and ARM are required (or --heldout)")
    try:
        with open(a.run) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        print(f"calibrate_network_slot: {a.run}: {e}", file=sys.stderr)
        return 2
    arms = {x.get("name"): x for x in run.get("arms", [])}
    if a.arm not in arms:
        print(f"calibrate_network_slot: {a.run}: no arm '{a.arm}' (arms: {', '.join(map(str, arms))})", file=sys.stderr)
        return 2
    stats = arms[a.arm].get("drafter_stats") or {}
    cells = (stats.get("copy_head") or {}).get("shadow")
    if cells is None:
        print(f"calibrate_network_slot: {a.run}: arm '{a.arm}' has no drafter_stats.copy_head.shadow "
              "(a DSpark arm with the copy head on, from a dspark that reports shadow counts)", file=sys.stderr)
        return 2
    rows = []
    for c in cells:
        ev = c["evaluated"]
        rows.append({"drafted_by": c["drafted_by"], "copy_match": c["copy_match"], "evaluated": ev,
                     "accepted": c["accepted"], "acceptance": c["accepted"] / ev if ev else None,
                     "other_right": c["alt_right"] / c["alt_seen"] if c["alt_seen"] else None})
    net0 = [r for r in rows if r["drafted_by"] == "drafter" and r["copy_match"] == 0]
    if not net0 or not net0[0]["evaluated"]:
        print(f"calibrate_network_slot: {a.run}: arm '{a.arm}' drafted no network slot without a copy match; "
              "raise the drafter copy's prior_acceptance[0] so the backbone runs", file=sys.stderr)
        return 2
    n, k = net0[0]["evaluated"], net0[0]["accepted"]
    p = k / n
    key = "prior_acceptance_sampled[0]" if run.get("temperature", 0) > 0 else "prior_acceptance[0]"
    se = (p * (1 - p) / n) ** 0.5
    if a.json:
        print(json.dumps({"field": key, "value": round(p, 3), "temperature": run.get("temperature", 0), "evaluated": n, "stderr": se, "table": rows}, indent=1))
        return 0
    print("| drafted by | copy match | evaluated | accepted | other proposer right |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        o = "" if r["other_right"] is None else f"{100 * r['other_right']:.1f} %"
        print(f"| {r['drafted_by']} | {r['copy_match']} | {r['evaluated']} | {100 * r['acceptance']:.1f} % | {o} |")
    print(f"\n{key} = {p:.3f} (+- {se:.3f}, {n} network slots without a copy match; temperature {run.get('temperature', 0)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
