#!/usr/bin/env python3
"""Second turns of Spec-Bench's two-turn conversations, served with the prompt cache:
the default server (speculation) against a second server started with --no-spec.

For each two-turn conversation of the prompt file (Spec-Bench dev has 40, five per category), on
each server in turn (the order alternating between conversations): turn 1 is answered (temperature
0, --max-tokens), then turn 2 is sent with turn 1's question and answer before it, so the server
reuses turn 1's KV from its cache. Turn 2 is what is compared: its time to first token, its decode
speed after the first token and its whole time, plus the prompt tokens the server reused. At
temperature 0 both servers must give the same answers (checked; a difference is reported).

Prints a markdown table (medians; the aggregate decode speed ratio with a paired bootstrap 95 %
interval over conversations, overall and per category) and, with --json, the per-conversation
records.

Usage: python3 bench/bench_multiturn.py --binary build/release/dspark --model MODEL.gguf
       [--max-tokens 128] [--threads 2] [--limit 40] [--json OUT.json]
Needs nothing beyond the standard library.
"""
import argparse
import json
import os
import random
import signal
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_serve import start_server, stream_chat  # noqa: E402


def start(binary, model, threads, extra):
    proc, port, model_id = start_server(binary, model, ["--threads", str(threads), "--ctx", "4096"] + extra)
    if proc is None:
        raise SystemExit(f"bench_multiturn: the server ({binary} serve {' '.join(extra)}) did not start")
    return proc, port, model_id


def conversations(path, limit):
    out = []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if len(j.get("turns", [])) >= 2:
                out.append((j.get("category", "x"), j["turns"][0], j["turns"][1]))
    return out[:limit]


def ratio_ci(spec, serial, n_boot=2000, seed=1):
    """Aggregate decode-speed ratio (sum tokens / sum seconds), paired bootstrap over conversations."""
    def agg(idx):
        ts = sum(spec[i][0] for i in idx) / max(sum(spec[i][1] for i in idx), 1e-9)
        tb = sum(serial[i][0] for i in idx) / max(sum(serial[i][1] for i in idx), 1e-9)
        return ts / tb if tb > 0 else 0.0
    n = len(spec)
    point = agg(range(n))
    rng = random.Random(seed)
    boots = sorted(agg([rng.randrange(n) for _ in range(n)]) for _ in range(n_boot))
    return point, boots[int(0.025 * n_boot)], boots[int(0.975 * n_boot) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                      "spec_bench_dev.jsonl"))
    ap.add_argument("--max-tokens", type=int, default=128, help="tokens per turn")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=40, help="conversations")
    ap.add_argument("--spec-server-args", default="", help="flags for the speculative server only")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not os.path.exists(args.binary):
        raise SystemExit(f"bench_multiturn: --binary {args.binary} does not exist")
    convs = conversations(args.prompts, args.limit)
    if not convs:
        raise SystemExit(f"bench_multiturn: {args.prompts} has no two-turn conversations")

    servers = {}
    try:
        servers["spec"] = start(args.binary, args.model, args.threads, args.spec_server_args.split())
        servers["serial"] = start(args.binary, args.model, args.threads, ["--no-spec"])
        for _, port, model in servers.values():
            stream_chat(port, model, [{"role": "user", "content": "warm up"}], 8, None)
        records = []
        for i, (cat, t1, t2) in enumerate(convs):
            rec = {"category": cat}
            for arm in (("spec", "serial") if i % 2 else ("serial", "spec")):
                _, port, model = servers[arm]
                _, _, _, a1, _ = stream_chat(port, model, [{"role": "user", "content": t1}], args.max_tokens, None)
                msgs = [{"role": "user", "content": t1}, {"role": "assistant", "content": a1},
                        {"role": "user", "content": t2}]
                ttft, total, n, a2, usage = stream_chat(port, model, msgs, args.max_tokens, None)
                cached = ((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                rec[arm] = {"ttft_s": ttft, "total_s": total, "tokens": n, "cached_tokens": cached,
                            "prompt_tokens": (usage or {}).get("prompt_tokens", 0), "answer1": a1, "answer2": a2}
            rec["identical"] = rec["spec"]["answer1"] == rec["serial"]["answer1"] and \
                rec["spec"]["answer2"] == rec["serial"]["answer2"]
            records.append(rec)
            print(f"\r{i + 1}/{len(convs)} conversations", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    finally:
        for proc, _, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    def decode(r):  # (tokens after the first, seconds after the first token)
        return (max(r["tokens"] - 1, 0), max(r["total_s"] - r["ttft_s"], 1e-9))

    print(f"## Second turns, {len(records)} Spec-Bench conversations, {args.max_tokens} tokens per turn, T 0, "
          f"--threads {args.threads}; serial on a second server started with --no-spec\n")
    print("| arm | TTFT median s | decode tok/s (aggregate) | turn-2 total s (median) | reused prompt tokens (median) |")
    print("|---|---:|---:|---:|---:|")
    for arm in ("serial", "spec"):
        rs = [r[arm] for r in records]
        d = [decode(r) for r in rs]
        print(f"| {arm} | {statistics.median(r['ttft_s'] for r in rs):.3f} | "
              f"{sum(x[0] for x in d) / sum(x[1] for x in d):.1f} | {statistics.median(r['total_s'] for r in rs):.3f} | "
              f"{statistics.median(r['cached_tokens'] for r in rs):.0f} of "
              f"{statistics.median(r['prompt_tokens'] for r in rs):.0f} |")
    spec = [decode(r["spec"]) for r in records]
    serial = [decode(r["serial"]) for r in records]
    p, lo, hi = ratio_ci(spec, serial)
    print(f"\nturn-2 decode speed, spec / serial: **{p:.2f}x [{lo:.2f}, {hi:.2f}]** (aggregate, paired bootstrap 95 %)")
    whole = ratio_ci([(r["spec"]["tokens"], r["spec"]["total_s"]) for r in records],
                     [(r["serial"]["tokens"], r["serial"]["total_s"]) for r in records])
    print(f"turn-2 whole call (TTFT included): {whole[0]:.2f}x [{whole[1]:.2f}, {whole[2]:.2f}]")
    cats = sorted({r["category"] for r in records})
    per_cat = {}
    print("\n| category | n | decode spec / serial |\n|---|---:|---:|")
    for c in cats:
        idx = [i for i, r in enumerate(records) if r["category"] == c]
        cp = ratio_ci([spec[i] for i in idx], [serial[i] for i in idx])
        per_cat[c] = {"n": len(idx), "ratio": cp[0], "lo": cp[1], "hi": cp[2]}
        print(f"| {c} | {len(idx)} | {cp[0]:.2f}x [{cp[1]:.2f}, {cp[2]:.2f}] |")
    same = sum(r["identical"] for r in records)
    print(f"\nanswers identical (both turns) in {same} of {len(records)} conversations")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "records": records, "decode_ratio": [p, lo, hi],
                       "whole_ratio": list(whole), "per_category": per_cat, "identical": same}, f, indent=1)
    return 0 if same == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
