#!/usr/bin/env python3
"""Training curves of `dspark train-drafter` runs: held-out acceptance vs training data seen.

Usage: plot_training.py OUT.png NAME=DIR/train_log.jsonl [NAME=...]

Left: the first run's held-out acceptance by draft position (serving drafter, T = 0, the rounds that
accepted positions 1..i over the rounds that drafted position i) at each checkpoint. Right: every
run's held-out slot-1 acceptance and tau. x: anchor blocks seen (step x batch_seqs x anchors, from
the log's `blocks_seen` or its start record's command). Exit codes: 0 written, 2 bad input, 3 matplotlib missing.
"""
import json
import sys


def flag(command, name, default):
    parts = command.split()
    return int(parts[parts.index(name) + 1]) if name in parts[:-1] else default


def read_log(path):
    pts = []
    per_step = 8 * 16  # train-drafter's defaults; the start record's command says otherwise
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if j.get("event") == "start":
                per_step = flag(j.get("command", ""), "--batch-seqs", 8) * flag(j.get("command", ""), "--anchors", 16)
            if j.get("event") == "checkpoint" and "heldout" in j:
                seen = j.get("blocks_seen", j["step"] * per_step)
                pts.append((seen, j["heldout"]["accept_by_pos"], j["heldout"]["tau"]))
    return pts


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    for a in argv[2:]:
        name, path = a.split("=", 1)
        try:
            pts = read_log(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"plot_training: {path}: {e}", file=sys.stderr)
            return 2
        if not pts:
            print(f"plot_training: {path}: no checkpoint with a held-out evaluation", file=sys.stderr)
            return 2
        runs.append((name, pts))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_training: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 3
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    name0, pts0 = runs[0]
    for i in range(len(pts0[0][1])):
        ax1.plot([p[0] for p in pts0], [p[1][i] for p in pts0], marker="o", label=f"position {i + 1}")
    ax1.set_title(f"{name0}: held-out acceptance by position")
    ax1.set_xlabel("anchor blocks seen")
    ax1.set_ylabel("acceptance (cumulative)")
    ax1.set_ylim(0, 1)
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    for name, pts in runs:
        line, = ax2.plot([p[0] for p in pts], [p[1][0] for p in pts], marker="o", label=f"{name}: slot 1")
        ax2.plot([p[0] for p in pts], [p[2] - 1 for p in pts], ls="--", color=line.get_color(), label=f"{name}: tau - 1")
    ax2.set_title("held-out slot-1 acceptance (solid), tau - 1 (dashed)")
    ax2.set_xlabel("anchor blocks seen")
    ax2.set_ylim(0, None)
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)
    print(f"plot_training: wrote {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
