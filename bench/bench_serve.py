#!/usr/bin/env python3
"""Serving benchmark of `dspark serve` (issue #6 numbers), one server, both arms in one run:

1. Serial vs speculative at concurrency 1 and 4: rounds of C concurrent streamed chat requests
   (Spec-Bench dev prompts, temperature 0, fixed -n tokens), the arm alternating round by round
   through the per-request `speculative: {"enabled": ...}` option, or with --two-servers between a
   default server (spec) and one started with --no-spec (serial), so that neither arm reuses the
   other's prompt-cache KV of the same prompt (in one server a serial request reuses the KV a
   speculative one left, not the reverse: a spec request needs the drafter's tap rows too).
   Per arm: per-request decode tok/s (median), aggregate tok/s (tokens / wall time of the
   rounds), TTFT (median, p90).
2. Multi-turn TTFT cold vs warm: a conversation's first turn (cold: nothing cached) and its second
   turn (warm: the first turn's KV reused by the prompt cache), alternating conversations.

Usage: python bench/bench_serve.py --binary build/release/dspark --model MODEL.gguf [--rounds 6]
       [--max-tokens 64] [--parallel 4] [--threads 2] [--two-servers] [--json OUT.json]
Needs nothing beyond the standard library. Prints markdown tables.
"""
import os
import argparse
import http.client
import json
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stream_chat(port, model, messages, max_tokens, spec):
    """One streamed chat request: (ttft_s, total_s, completion_tokens, text, usage)."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if spec is not None:
        body["speculative"] = {"enabled": spec}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.time()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft, text, usage = None, [], None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            piece = ch.get("delta", {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.time() - t0
                text.append(piece)
    total = time.time() - t0
    conn.close()
    n = usage["completion_tokens"] if usage else len(text)
    return ttft if ttft is not None else total, total, n, "".join(text), usage


def start_server(binary, model, flags, tries=600):
    """`binary serve -m model --port P flags...` on a free port; (process, port, model id) once
    /v1/models answers, (None, None, None) if it exits or does not answer within tries x 0.2 s."""
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port)] + flags,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(tries):
        if proc.poll() is not None:
            return None, None, None
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/models")
            r = c.getresponse()
            if r.status == 200:
                return proc, port, json.loads(r.read())["data"][0]["id"]
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    return None, None, None


def load_prompts(path, n):
    by_cat = {}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            by_cat.setdefault(j.get("category", "x"), []).append(j["turns"][0])
    out, i = [], 0
    while len(out) < n:
        added = False
        for v in by_cat.values():
            if i < len(v) and len(out) < n:
                out.append(v[i])
                added = True
        if not added:
            break
        i += 1
    return out


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "spec_bench_dev.jsonl"))
    ap.add_argument("--rounds", type=int, default=6, help="rounds per (concurrency, arm)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=6)
    ap.add_argument("--server-args", default="", help="extra dspark serve flags (e.g. --no-batch)")
    ap.add_argument("--spec-server-args", default="",
                    help="flags for the speculative server only (e.g. --draft-kind ngram), with --two-servers")
    ap.add_argument("--two-servers", action="store_true",
                    help="spec on a default server, serial on a second one started with --no-spec (each with its own "
                         "prompt cache: an arm never reuses the other arm's KV of the same prompt); default: one server, "
                         "the arm chosen per request")
    ap.add_argument("--json")
    args = ap.parse_args()

    def start(extra):
        return start_server(args.binary, args.model, ["--parallel", str(args.parallel), "--threads", str(args.threads),
                                                      "--ctx", "2048"] + args.server_args.split() + extra)

    proc, port, model = start(args.spec_server_args.split())
    if not model:
        print("server did not start")
        return 1
    procs = [proc]
    # arm -> (port, the request's speculative.enabled: None leaves it out)
    target = {"spec": (port, True), "serial": (port, False)}
    if args.two_servers:
        proc2, port2, _ = start(["--no-spec"])
        if not proc2:
            print("the --no-spec server did not start")
            proc.kill()
            return 1
        procs.append(proc2)
        target["serial"] = (port2, None)
        stream_chat(port2, model, [{"role": "user", "content": "warm up"}], 8, None)
    prompts = load_prompts(args.prompts, 4 * args.rounds * 2 + 8)
    results = {}
    pi = 0
    stream_chat(port, model, [{"role": "user", "content": "warm up"}], 8, True)
    for conc in (1, 4):
        for r in range(args.rounds):
            for arm in (("spec", "serial") if r % 2 else ("serial", "spec")):
                batch = [prompts[(pi + k) % len(prompts)] for k in range(conc)]
                out = [None] * conc
                def run(k):
                    out[k] = stream_chat(target[arm][0], model, [{"role": "user", "content": batch[k]}],
                                         args.max_tokens, target[arm][1])
                t0 = time.time()
                ths = [threading.Thread(target=run, args=(k,)) for k in range(conc)]
                for t in ths:
                    t.start()
                for t in ths:
                    t.join()
                wall = time.time() - t0
                rec = results.setdefault((conc, arm), {"wall": 0.0, "tokens": 0, "ttft": [], "req_tok_s": [], "tau": []})
                rec["wall"] += wall
                for ttft, total, n, _, usage in out:
                    rec["tokens"] += n
                    rec["ttft"].append(ttft)
                    if total > ttft and n > 1:
                        rec["req_tok_s"].append((n - 1) / (total - ttft))
                    if usage and usage.get("speculation"):
                        rec["tau"].append(usage["speculation"]["tau"])
            pi += conc
    # Multi-turn: cold first turn vs warm second turn.
    cold, warm, cached = [], [], []
    for c in range(args.conversations):
        first = prompts[(pi + c) % len(prompts)]
        msgs = [{"role": "user", "content": first}]
        ttft1, _, _, answer, _ = stream_chat(port, model, msgs, 32, False)
        msgs += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Now say it in one sentence."}]
        ttft2, _, _, _, usage = stream_chat(port, model, msgs, 8, False)
        cold.append(ttft1)
        warm.append(ttft2)
        cached.append((usage or {}).get("prompt_tokens_details", {}).get("cached_tokens", 0))
    for p in procs:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)

    print(f"## dspark serve: {args.rounds} rounds per arm, {args.max_tokens} tokens, T 0, --parallel {args.parallel}, "
          f"--threads {args.threads}, drafter: the server default {args.server_args}"
          f"{'; serial on a second server started with --no-spec' if args.two_servers else ''}\n")
    print("| concurrency | arm | per-request tok/s (median) | aggregate tok/s | TTFT median s | TTFT p90 s | tau |")
    print("|---|---|---:|---:|---:|---:|---:|")
    out_json = {"rows": [], "multi_turn": {}}
    for (conc, arm), rec in sorted(results.items()):
        agg = rec["tokens"] / rec["wall"]
        row = {"concurrency": conc, "arm": arm, "per_request_tok_s": statistics.median(rec["req_tok_s"]),
               "aggregate_tok_s": agg, "ttft_median_s": statistics.median(rec["ttft"]), "ttft_p90_s": pct(rec["ttft"], 0.9),
               "tau": statistics.mean(rec["tau"]) if rec["tau"] else 1.0}
        out_json["rows"].append(row)
        print(f"| {conc} | {arm} | {row['per_request_tok_s']:.1f} | {agg:.1f} | {row['ttft_median_s']:.3f} | "
              f"{row['ttft_p90_s']:.3f} | {row['tau']:.2f} |")
    for conc in (1, 4):
        a, b = results[(conc, "serial")], results[(conc, "spec")]
        print(f"\nconcurrency {conc}: aggregate speed spec / serial = {(b['tokens'] / b['wall']) / (a['tokens'] / a['wall']):.2f}")
    out_json["multi_turn"] = {"cold_ttft_s": cold, "warm_ttft_s": warm, "cached_tokens": cached}
    print(f"\nmulti-turn TTFT over {args.conversations} conversations: cold (turn 1) median {statistics.median(cold):.3f} s, "
          f"warm (turn 2, {statistics.median(cached):.0f} prompt tokens reused) median {statistics.median(warm):.3f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out_json, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
