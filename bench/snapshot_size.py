#!/usr/bin/env python3
"""Prompt-cache snapshot size per token of `dspark serve`: starts a server (--parallel 1 plus FLAGS),
sends five short chat requests (max_tokens 64, T 0), then prints /stats totals.prompt_cache and the
bytes per snapshot token next to the KV's bytes per token (slot_bytes / slot_tokens). The snapshot
tokens are estimated as bytes / KV bytes per token when the drafter keeps no tap rows.

Usage: python3 bench/snapshot_size.py BINARY MODEL.gguf [FLAGS...] [--json]
Needs nothing beyond the standard library.
"""
import json
import socket
import subprocess
import sys
import time
import urllib.request

QUESTIONS = ["Name three colours.", "What is the capital of France?", "Give me two fruits.",
             "Say hello in Spanish.", "What is 2 plus 2?"]


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary, model, flags = args[0], args[1], args[2:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "--parallel", "1"] + flags,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def get(path):
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read())

    try:
        for _ in range(300):
            try:
                get("/health")
                break
            except OSError:
                time.sleep(0.2)
        mid = get("/v1/models")["data"][0]["id"]
        for q in QUESTIONS:
            body = json.dumps({"model": mid, "messages": [{"role": "user", "content": q}], "max_tokens": 64,
                               "temperature": 0}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                         {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=120).read()
        pc = get("/stats").get("totals", {}).get("prompt_cache", {})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    kv = pc["slot_bytes"] / pc["slot_tokens"] if pc.get("slot_tokens") else 0.0
    out = {"flags": flags, "prompt_cache": pc, "kv_bytes_per_token": kv,
           "snapshot_bytes_per_kv_token": pc.get("bytes", 0) / kv if kv else None}
    if "--json" in sys.argv:
        print(json.dumps(out))
    else:
        print(f"snapshots: {pc.get('entries')} entries, {pc.get('bytes')} bytes; KV {kv:.0f} bytes per token; "
              f"bytes / KV bytes per token = {out['snapshot_bytes_per_kv_token']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
