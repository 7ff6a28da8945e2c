#!/usr/bin/env python3
"""Plot acceptance by draft position for every speculative arm of a `dspark ab --json` result.

Usage: plot_ab.py RESULT.json OUT.png

x: draft position i (1-based); y: rounds that accepted positions 1..i / rounds that drafted
position i (the cumulative acceptance curve `dspark ab` reports). Serial arms draft nothing and
are listed in the title only. `dspark ab --plot PNG` calls this script with a temporary JSON file.

Exit codes: 0 written, 2 bad input, 3 matplotlib missing (dspark ab then warns and goes on).
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print("usage: plot_ab.py RESULT.json OUT.png", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        print("plot_ab.py: matplotlib is not installed (pip install matplotlib); no plot written", file=sys.stderr)
        return 3
    try:
        with open(argv[1], encoding="utf-8") as f:
            result = json.load(f)
        arms = result["arms"]
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_ab.py: {argv[1]}: not a dspark ab result ({e})", file=sys.stderr)
        return 2

    fig, ax = plt.subplots(figsize=(7, 4.5))
    serial = []
    for arm in arms:
        by_pos = arm.get("acceptance_by_pos") or []
        points = [(i + 1, y) for i, y in enumerate(by_pos) if y is not None]
        if not points:
            serial.append(arm["name"])
            continue
        xs, ys = zip(*points)
        acc = arm.get("acceptance")
        label = f"{arm['name']}: acceptance {100 * acc:.1f}%, tau {arm['tau']:.2f}, {arm['tok_s']:.1f} tok/s"
        ax.plot(xs, ys, marker="o", label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("draft position")
    ax.set_ylabel("P(positions 1..i accepted | i drafted)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    title = (f"dspark ab: {result.get('n_prompts', '?')} prompts x {result.get('max_tokens', '?')} tokens, "
             f"T = {result.get('temperature', '?')}")
    lines = [title]
    for c in result.get("comparisons", []):
        sr = c["speed_ratio"]
        d = c.get("acceptance_delta_pts")
        dtext = f"\u0394 acceptance {d['point']:+.1f} [{d['lo']:+.1f}, {d['hi']:+.1f}] pts, " if d else ""
        verdict = "PASS" if c["verdict"]["pass"] else "FAIL"
        lines.append(f"{c['arm']} vs {c['baseline']}: {dtext}speed x{sr['point']:.2f} "
                     f"[{sr['lo']:.2f}, {sr['hi']:.2f}] {verdict}")
    if serial:
        lines.append("serial (no drafts): " + ", ".join(serial))
    ax.set_title("\n".join(lines), fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    try:
        fig.savefig(argv[2], dpi=120)
    except OSError as e:
        print(f"plot_ab.py: cannot write {argv[2]}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
