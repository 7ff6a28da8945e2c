#!/usr/bin/env python3
"""Slowloris probe of `dspark serve`: N sockets each send a request line and then one header line
every GAP seconds (never a silent gap, never a complete head) while /health is asked every 0.5 s
with a 1 s timeout. Prints how many /health probes got 200, the other answers, and the slowest 200.

Usage:
  python bench/slowloris_serve.py BINARY MODEL.gguf [N=120] [GAP=2] [SECONDS=20]
The server runs with --parallel 1 and its other defaults. Exit 1 unless every probe got 200.
"""
import http.client
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
        t0 = time.time()
        while time.time() - t0 < secs:
            probes.append(health(port))
            time.sleep(HEALTH_EVERY_S)
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
    return 0 if len(ok) == len(probes) else 1


if __name__ == "__main__":
    sys.exit(main())
