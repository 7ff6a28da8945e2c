#!/usr/bin/env python3
"""Bounded soak of `dspark serve`: C concurrent clients send a mix of requests for a fixed time
(chat and completions, streamed and not, multi-turn follow-ups, random speculative settings,
temperature 0 and sampled, a share of clients that disconnect mid-stream and of bad requests),
then the script checks the server is still healthy, all slots are idle, the queue is empty, and
prints throughput, latency percentiles and the server's speculation and prompt-cache totals.

Usage:
  python bench/soak_serve.py --binary build/release/dspark --model MODEL.gguf [--seconds 60] [--clients 4]
  python bench/soak_serve.py --url http://127.0.0.1:8080 [--api-key KEY]     (an already running server)
Needs the openai package (requirements.txt). Exit 1 if the server failed, crashed or leaked a slot.
"""
import argparse
import http.client
import json
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

PROMPTS = ["Write a short poem about rain.", "Explain what a CPU cache is.", "List five fruits.",
           "One, two, three, four,", "The history of the printing press", "Translate 'good morning' to French."]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, path, key):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", path, headers={"Authorization": f"Bearer {key}"} if key else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, json.loads(body) if body.startswith(b"{") else body.decode()


def client_loop(idx, args, base, stop_at, results, lock):
    import openai
    rng = random.Random(idx)
    client = openai.OpenAI(base_url=base + "/v1", api_key=args.api_key or "none", max_retries=0, timeout=120)
    mid = client.models.list().data[0].id
    history = []
    while time.time() < stop_at:
        kind = rng.random()
        t0 = time.time()
        outcome, tokens = "ok", 0
        try:
            spec = {"enabled": rng.random() < 0.7, "num_draft_tokens": rng.choice([2, 4, 5, 8])}
            temp = rng.choice([0.0, 0.0, 0.7])
            if kind < 0.08:  # a bad request: must be a 4xx, never a crash
                try:
                    client.chat.completions.create(model=mid, messages=[{"role": "user", "content": "x"}],
                                                   max_tokens=-1)
                    outcome = "bad-accepted"
                except openai.BadRequestError:
                    outcome = "bad-refused"
            elif kind < 0.16:  # disconnect mid-stream
                u = urllib.parse.urlparse(base)
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
                body = json.dumps({"model": mid, "prompt": rng.choice(PROMPTS), "max_tokens": 200, "stream": True})
                h = {"Content-Type": "application/json"}
                if args.api_key:
                    h["Authorization"] = f"Bearer {args.api_key}"
                c.request("POST", "/v1/completions", body=body, headers=h)
                r = c.getresponse()
                r.fp.readline()
                c.close()
                outcome = "disconnected"
            elif kind < 0.55:
                if not history or rng.random() < 0.4:
                    history = [{"role": "user", "content": rng.choice(PROMPTS)}]
                stream = rng.random() < 0.5
                kw = dict(model=mid, messages=history, max_tokens=rng.choice([16, 32, 64]), temperature=temp,
                          seed=rng.randrange(1000), extra_body={"speculative": spec})
                if stream:
                    text, usage = "", None
                    for ch in client.chat.completions.create(stream=True, **kw):
                        if ch.choices and ch.choices[0].delta.content:
                            text += ch.choices[0].delta.content
                        if ch.usage:
                            usage = ch.usage
                    tokens = usage.completion_tokens if usage else 0
                else:
                    r = client.chat.completions.create(**kw)
                    text, tokens = r.choices[0].message.content, r.usage.completion_tokens
                history = history + [{"role": "assistant", "content": text},
                                     {"role": "user", "content": rng.choice(PROMPTS)}]
                if len(history) > 9:
                    history = []
            else:
                r = client.completions.create(model=mid, prompt=rng.choice(PROMPTS), max_tokens=rng.choice([16, 48]),
                                              temperature=temp, extra_body={"speculative": spec})
                tokens = r.usage.completion_tokens
        except openai.RateLimitError:
            outcome = "429"
        except Exception as e:  # noqa: BLE001 - every other failure is a finding
            outcome = f"error: {type(e).__name__}: {e}"[:200]
        with lock:
            results.append((outcome, time.time() - t0, tokens))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary")
    ap.add_argument("--model")
    ap.add_argument("--url")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--server-args", default="", help="extra flags for dspark serve")
    args = ap.parse_args()

    proc = None
    if args.url:
        base = args.url.rstrip("/")
    else:
        if not (args.binary and args.model):
            ap.error("give --url, or --binary and --model")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        cmd = [args.binary, "serve", "-m", args.model, "--port", str(port), "--parallel", str(args.parallel),
               "--max-queue", str(args.clients)] + (["--api-key", args.api_key] if args.api_key else []) \
            + args.server_args.split()
        proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                if get_json(base, "/health", args.api_key)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            print("server did not start")
            return 1

    def rss_kib():
        if not proc:
            return None
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    results, lock = [], threading.Lock()
    # RSS growth is measured from the end of a warm-up (first 10% of the run, at most 60 s), when
    # every slot and pool has been touched once, to the end. The prompt cache grows by design up
    # to its budget (--cache-mib), so its bytes (from /stats) are taken out of both readings.
    warm_s = min(60.0, 0.1 * args.seconds)
    rss_marks = {}

    def cache_kib():
        code, st = get_json(base, "/stats", args.api_key)
        return st["totals"]["prompt_cache"]["bytes"] // 1024 if code == 200 else 0

    def sample_rss():
        time.sleep(warm_s)
        rss_marks["warm_cache"] = cache_kib()
        rss_marks["warm"] = rss_kib()
    rss_thread = threading.Thread(target=sample_rss, daemon=True)
    rss_thread.start()
    t_start = time.time()
    stop_at = t_start + args.seconds
    threads = [threading.Thread(target=client_loop, args=(i, args, base, stop_at, results, lock))
               for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t_start
    rss_marks["end"] = rss_kib()
    rss_marks["end_cache"] = cache_kib()

    ok = True
    time.sleep(0.5)
    status, st = get_json(base, "/stats", args.api_key)
    if status != 200 or get_json(base, "/health", args.api_key)[0] != 200:
        print("FAIL: server unhealthy after the soak")
        ok = False
    else:
        busy = [s for s in st["slots"] if s["state"] != "idle"]
        if busy or st["queue"]["waiting"]:
            print(f"FAIL: slots busy or queue non-empty after the soak: {busy} {st['queue']}")
            ok = False
    errors = [r for r in results if r[0].startswith("error") or r[0] == "bad-accepted"]
    for e in errors[:10]:
        print("FAIL:", e[0])
    ok = ok and not errors
    lat = sorted(r[1] for r in results if r[0] == "ok")
    toks = sum(r[2] for r in results)
    counts = {}
    for r in results:
        k = r[0] if not r[0].startswith("error") else "error"
        counts[k] = counts.get(k, 0) + 1
    print(f"{len(results)} requests in {wall:.1f}s: {counts}")
    if lat:
        q = statistics.quantiles(lat, n=20) if len(lat) > 1 else [lat[0]] * 19
        q100 = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
        print(f"latency ok requests: p50 {statistics.median(lat):.2f}s p95 {q[18]:.2f}s p99 {q100[98]:.2f}s "
              f"max {lat[-1]:.2f}s; {toks} tokens, {toks / wall:.1f} tok/s aggregate")
    if rss_marks.get("warm") and rss_marks.get("end"):
        w = rss_marks["warm"] - rss_marks["warm_cache"]
        e = rss_marks["end"] - rss_marks["end_cache"]
        growth = 100.0 * (e - w) / w
        print(f"server RSS: {rss_marks['warm'] / 1024:.1f} MiB after warm-up -> {rss_marks['end'] / 1024:.1f} MiB at the "
              f"end; without the prompt cache ({rss_marks['warm_cache'] / 1024:.1f} -> {rss_marks['end_cache'] / 1024:.1f} "
              f"MiB, bounded by --cache-mib): {w / 1024:.1f} -> {e / 1024:.1f} MiB ({growth:+.2f}%; bound +5%)")
        if growth >= 5.0:
            print("FAIL: RSS grew by 5% or more")
            ok = False
    if status == 200:
        t = st["totals"]
        print("server totals:", json.dumps({k: t[k] for k in ("generations", "cancelled", "failed", "prompt_cache")}))
        s = t["speculation"]
        print(f"speculation: rounds {s['rounds']} drafted {s['drafted']} accepted {s['accepted']} "
              f"tau {s['tau']:.2f} accepted_by_pos {s['accepted_by_pos']}")
    if proc:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        if rc != 0:
            print(f"FAIL: server exit code {rc}")
            ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
