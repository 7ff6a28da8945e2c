#!/usr/bin/env python3
"""Slowloris probe of `dspark serve`: N sockets each send a request line and then one header line
every GAP seconds (never a silent gap, never a complete head) while /health is asked every 0.5 s
with a 1 s timeout, and one chat completion is asked halfway through. Prints how many /health probes
got 200, the other answers, the slowest 200, and how the chat request ended.

Usage:
  python bench/slowloris_serve.py BINARY MODEL.gguf [N=120] [GAP=2] [SECONDS=20]
The server runs with --parallel 1 and its other defaults. Exit 1 unless every probe got 200 and the
chat request completed (200, finish_reason stop or length).
"""
import http.client
import json
import socket
import subprocess
import sys
import threading
import time

HEALTH_EVERY_S = 0.5
HEALTH_TIMEOUT_S = 1.0


def health(port):
    """(status or None, seconds) of one GET /health on a fresh connection."""
    t0 = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=HEALTH_TIMEOUT_S)
        c.request("GET", "/health")
        status = c.getresponse().status
        c.close()
    except OSError:
        status = None
    return status, time.time() - t0


def model_id(port):
    """The id the server serves (GET /v1/models)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/v1/models")
    models = json.loads(c.getresponse().read())
    c.close()
    return models["data"][0]["id"]


def chat(port, out):
    """One short chat completion; stores (status, finish_reason, seconds, completion tokens) in out."""
    t0 = time.time()
    try:
        body = json.dumps({"model": model_id(port), "messages": [{"role": "user", "content": "Name three colours."}],
                           "max_tokens": 32, "temperature": 0})
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read() or b"{}")
        c.close()
        choice = (data.get("choices") or [{}])[0]
        out.append((r.status, choice.get("finish_reason"), time.time() - t0,
                    (data.get("usage") or {}).get("completion_tokens")))
    except (OSError, ValueError) as e:
        out.append((None, str(e), time.time() - t0, None))


class Slowloris:
    """`n` sockets that each send `first`, then one header line every `gap` s from a thread."""

    def __init__(self, port, n, first, gap):
        self.socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(first)
            self.socks.append(s)
        self._gap = gap
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle)

    def _trickle(self):
        i = 0
        while not self._stop.is_set():
            for s in self.socks:
                try:
                    s.send(b"X-Slow-%d: a\r\n" % i)
                except OSError:
                    pass
            i += 1
            self._stop.wait(self._gap)

    def start(self):
        self._thread.start()

    def stop(self):
        """Stops sending (the sockets stay open)."""
        self._stop.set()
        self._thread.join()


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, model = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 120
    gap = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    secs = float(sys.argv[5]) if len(sys.argv) > 5 else 20.0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "--parallel", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if health(port)[0] == 200:
                break
            time.sleep(0.2)
        loris = Slowloris(port, n, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n", gap)
        loris.start()
        probes = []
        chats = []
        asker = threading.Thread(target=chat, args=(port, chats))
        t0 = time.time()
        while time.time() - t0 < secs:
            if not asker.is_alive() and not chats and time.time() - t0 >= secs / 2:
                asker.start()
            probes.append(health(port))
            time.sleep(HEALTH_EVERY_S)
        if asker.ident is not None:
            asker.join()
        loris.stop()
        for s in loris.socks:
            s.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ok = [dt for st, dt in probes if st == 200]
    others = sorted({str(st) for st, _ in probes if st != 200})
    slowest = f"{max(ok) * 1000:.1f} ms" if ok else "-"
    print(f"{n} trickling sockets (a header line every {gap:g} s) for {secs:g} s: /health {len(ok)}/{len(probes)} x 200, "
          f"other answers {others or 'none'}, slowest 200 {slowest}")
    chat_ok = bool(chats) and chats[0][0] == 200 and chats[0][1] in ("stop", "length")
    if chats:
        st, reason, dt, toks = chats[0]
        print(f"chat request halfway: status {st}, finish_reason {reason}, {toks} tokens in {dt:.2f} s")
    else:
        print("chat request halfway: not sent (run too short)")
    return 0 if len(ok) == len(probes) and chat_ok else 1


if __name__ == "__main__":
    sys.exit(main())
