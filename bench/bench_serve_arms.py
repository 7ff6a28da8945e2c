#!/usr/bin/env python3
"""Several `dspark serve` configurations side by side: one server per arm (its own binary and
flags), rounds of C concurrent streamed chat requests (Spec-Bench dev first turns, T 0, fixed
--max-tokens), the arms taking turns round by round in a rotating order on the same prompts.
The first arm is the baseline.

Two ways to load a server with C clients:
- rounds (default): C requests start together and the round ends when the last one does; the
  next round starts then. Every round ends with the slowest request running alone, so a server
  whose requests finish at different times (speculation: acceptance varies by text) idles slots
  at every round's end.
- --block N: a round is a block of N requests (N >= C) served by C clients, each sending its next
  request as soon as its last one finished, as a pool of C users does (vLLM's benchmark
  --max-concurrency); the block ends when its last request does, so only its end runs short of
  requests. The arms take turns block by block on the same N prompts.

Per arm: aggregate tok/s (tokens / wall time of its rounds), the ratio to the baseline, the median
of the per-round speed ratios, median TTFT; then each server's /stats: the scheduler thread's time
by phase (batching.plan_ms / forward_ms / finish_ms / batch_ms / step_ms, and step_ms split into job
starts, prefill chunks and lone rounds), the batch gate per batch
size, the prompt cache's copy time, tau and the governor's rounds by reason. Use it to compare two
builds (binary A vs binary B) or two flag sets at once.

Usage: python3 bench/bench_serve_arms.py --model MODEL.gguf [--rounds 8] [--concurrency 4] [--block N] [--distinct N]
       --arm serial=build/release/dspark:--no-spec --arm spec=build/release/dspark [--arm NAME=BIN[:FLAGS]]
Needs nothing beyond the standard library.
"""
import argparse
import http.client
import json
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_serve import load_prompts, start_server, stream_chat  # noqa: E402


def start(binary, model_path, parallel, threads, extra):
    p, port, model = start_server(binary, model_path, ["--parallel", str(parallel), "--threads", str(threads),
                                                       "--ctx", "2048"] + extra)
    if p is None:
        raise SystemExit(f"bench_serve_arms: {binary} serve {' '.join(extra)} did not start")
    return p, port, model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                      "spec_bench_dev.jsonl"))
    ap.add_argument("--arm", action="append", required=True, help="NAME=BINARY[:FLAGS] (FLAGS space-separated)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=4, help="--parallel of every server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--block", type=int, default=0,
                    help="each round a block of N requests served by --concurrency clients that each send "
                         "their next request when the last one ends (0: rounds of --concurrency requests "
                         "started together)")
    ap.add_argument("--distinct", type=int, default=0,
                    help="draw the requests from the first N prompts only, so each is asked again every N "
                         "requests (repeated questions: what the answer cache is for); 0 = all 240")
    ap.add_argument("--json")
    args = ap.parse_args()
    arms = []
    for a in args.arm:
        name, sep, rest = a.partition("=")
        if not sep or not name:
            raise SystemExit(f"bench_serve_arms: --arm {a!r} is not NAME=BINARY[:FLAGS]")
        binary, _, flags = rest.partition(":")
        if not os.path.exists(binary):
            raise SystemExit(f"bench_serve_arms: --arm {name}: {binary} does not exist")
        arms.append((name, binary, flags.split()))
    if len(arms) < 2:
        raise SystemExit("bench_serve_arms: give at least two --arm")
    if args.concurrency < 1 or args.block < 0 or (args.block and args.block < args.concurrency):
        raise SystemExit("bench_serve_arms: --concurrency must be >= 1 and --block 0 or >= --concurrency")
    n_req = args.block or args.concurrency  # requests per round
    srv, model = {}, None
    try:
        for name, binary, extra in arms:
            p, port, model = start(binary, args.model, args.parallel, args.threads, extra)
            srv[name] = (p, port)
            stream_chat(port, model, [{"role": "user", "content": "warm up"}], 8, None)
        prompts = load_prompts(args.prompts, 240)
        if args.distinct > 0:
            prompts = prompts[:args.distinct]
        res = {n: [] for n, _, _ in arms}
        pi = 0
        for r in range(args.rounds):
            for k in range(len(arms)):
                name = arms[(r + k) % len(arms)][0]
                port = srv[name][1]
                batch = [prompts[(pi + j) % len(prompts)] for j in range(n_req)]
                out = [None] * n_req
                nxt = iter(range(n_req))  # the requests not yet sent, in order
                lock = threading.Lock()

                def run(_, port=port, batch=batch, out=out, nxt=nxt, lock=lock):
                    while True:  # one client: its next request as soon as its last one ended
                        with lock:
                            j = next(nxt, None)
                        if j is None:
                            return
                        out[j] = stream_chat(port, model, [{"role": "user", "content": batch[j]}], args.max_tokens, None)
                t0 = time.time()
                ths = [threading.Thread(target=run, args=(j,)) for j in range(args.concurrency)]
                for t in ths:
                    t.start()
                for t in ths:
                    t.join()
                res[name].append({"wall_s": time.time() - t0, "tokens": sum(o[2] for o in out),
                                  "ttft_s": [o[0] for o in out]})
            pi += n_req
            print(f"\rround {r + 1}/{args.rounds}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        base = arms[0][0]
        rate = {n: sum(x["tokens"] for x in v) / sum(x["wall_s"] for x in v) for n, v in res.items()}
        out_json = {"settings": vars(args), "arms": {}}
        load = (f"{args.rounds} blocks of {args.block} requests from {args.concurrency} clients (each sends its next "
                f"request when its last one ends)" if args.block else
                f"{args.rounds} rounds of {args.concurrency} concurrent requests")
        print(f"## {len(arms)} servers, {load}, "
              f"{args.max_tokens} tokens, T 0, --parallel {args.parallel}, --threads {args.threads}\n")
        print(f"| arm | aggregate tok/s | vs {base} | per-round ratio (median) | TTFT median s |\n|---|---:|---:|---:|---:|")
        for name, _, _ in arms:
            ratios = [b["wall_s"] / x["wall_s"] for x, b in zip(res[name], res[base])]
            ttft = statistics.median(t for x in res[name] for t in x["ttft_s"])
            print(f"| {name} | {rate[name]:.1f} | {rate[name] / rate[base]:.3f} | {statistics.median(ratios):.3f} | {ttft:.3f} |")
            out_json["arms"][name] = {"aggregate_tok_s": rate[name], "ratio": rate[name] / rate[base],
                                      "round_ratio_median": statistics.median(ratios), "ttft_median_s": ttft,
                                      "rounds": res[name]}
        print()
        for name, (p, port) in srv.items():
            c = http.client.HTTPConnection("127.0.0.1", port)
            c.request("GET", "/stats")
            j = json.loads(c.getresponse().read())
            b = j.get("batching", {})
            spec = j.get("totals", {}).get("speculation") or {}
            out_json["arms"][name]["stats"] = j
            phases = ", ".join(f"{k} {b[k]:.0f}" for k in ("plan_ms", "forward_ms", "finish_ms", "batch_ms", "step_ms",
                                                                  "step_start_ms", "step_prefill_ms", "step_lone_ms") if k in b)
            ac = j.get("answer_cache") or {}
            cache = f"; answer cache {ac.get('answers')} answers, {ac.get('hits')} hits of {ac.get('queries')} queries" if ac else ""
            print(f"- {name}: forwards {b.get('forwards')}, rows {b.get('rows')}; ms: {phases}; tau {spec.get('tau', 1.0):.2f}; "
                  f"governor {(spec.get('governor') or {}).get('rounds_by_reason')}; gate {b.get('gate', {}).get('by_slots')}{cache}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out_json, f, indent=1)
    finally:
        for p, _ in srv.values():
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
