#!/usr/bin/env python3
"""The chat page in a real browser: headless Chromium (Debian `chromium`) driven over the DevTools
protocol (a minimal WebSocket client, standard library only). It opens /?q=...&n=... (the page
sends that message once the model is listed), waits for body[data-state=done], then checks the DOM
(user bubble, streamed assistant text, the per-answer line with tok/s, tau and acceptance, the
header naming the drafter) and saves a screenshot.
Usage: test_chat_page.py DSPARK_BINARY [SCREENSHOT.png] [--smollm2]. The model is $DSPARK_MODEL, or
$DSPARK_SMOLLM2_MODEL with --smollm2 (the second architecture, BPE tokenizer, ChatML template).
Exit 77 = skipped (no model / no chromium).
"""
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ws:
    """Just enough RFC 6455 for CDP: masked text frames out, unmasked frames in."""

    def __init__(self, url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"websocket upgrade refused: {head[:100]!r}")
        self.next_id = 0

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("websocket closed")
            buf += chunk
        return buf

    def _recv_msg(self):
        data = b""
        while True:
            b0, b1 = self._recv_exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            data += self._recv_exact(n)
            if b0 & 0x80:
                return json.loads(data)

    def call(self, method, **params):
        self.next_id += 1
        payload = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            msg = self._recv_msg()
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]


def evaluate(ws, expr):
    return ws.call("Runtime.evaluate", expression=expr, returnByValue=True)["result"].get("value")


def main():
    args = [a for a in sys.argv[1:] if a != "--smollm2"]
    env = "DSPARK_SMOLLM2_MODEL" if "--smollm2" in sys.argv[1:] else "DSPARK_MODEL"
    binary = args[0]
    shot = args[1] if len(args) > 1 else "chat_page.png"
    model = os.environ.get(env, "")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not model or not os.path.isfile(model):
        print(f"skip: no model ({env})")
        return SKIP
    if not browser:
        print("skip: chromium not installed")
        return SKIP
    tmp = tempfile.mkdtemp()
    port, cdp_port = free_port(), free_port()
    srv = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "--draft-kind", "ngram"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    chrome = None
    failures = []
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        chrome = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                   f"--user-data-dir={tmp}/profile", f"--remote-debugging-port={cdp_port}",
                                   "--window-size=1000,700", "about:blank"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        targets = None
        for _ in range(100):
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{cdp_port}/json/list", timeout=1))
                if any(t.get("type") == "page" for t in targets):
                    break
            except OSError:
                pass
            time.sleep(0.2)
        page = next(t for t in targets if t.get("type") == "page")
        ws = Ws(page["webSocketDebuggerUrl"])
        ws.call("Page.enable")
        ws.call("Page.navigate", url=f"http://127.0.0.1:{port}/?q=Count%20from%201%20to%205.&n=24")
        state = None
        for _ in range(600):
            state = evaluate(ws, "document.body ? (document.body.dataset.state || '') : ''")
            if state == "done":
                break
            time.sleep(0.1)
        log_html = evaluate(ws, "document.getElementById('log').outerHTML") or ""
        header = evaluate(ws, "document.getElementById('model').textContent") or ""
        answer = evaluate(ws, "(document.querySelector('.msg.assistant')||{}).textContent || ''") or ""
        meta = evaluate(ws, "(document.querySelector('.msg.assistant .meta')||{}).textContent || ''") or ""
        png = base64.b64decode(ws.call("Page.captureScreenshot", format="png")["data"])
        with open(shot, "wb") as f:
            f.write(png)

        def check(ok, what):
            print(("ok   " if ok else "FAIL ") + what)
            if not ok:
                failures.append(what)
        check(state == "done", "the streamed answer finished (body data-state=done)")
        check('class="msg user">Count from 1 to 5.' in log_html, "the user bubble")
        check(len(answer) > len(meta) + 2, f"assistant text streamed in ({len(answer) - len(meta)} chars)")
        check(re.search(r"\d+ tokens \| [\d.]+ tok/s", meta) is not None, f"per-answer tok/s: {meta[:80]!r}")
        check(re.search(r"tau [\d.]+", meta) is not None, "per-answer tau")
        check(re.search(r"accepted \d+/\d+", meta) is not None, "per-answer acceptance")
        check("drafter: ngram" in header, f"header names the drafter: {header!r}")
        check(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, f"screenshot {shot} ({len(png)} bytes)")
    except Exception as e:  # noqa: BLE001 - report, then clean up
        failures.append(repr(e))
        print(f"FAIL {e!r}")
    finally:
        if chrome:
            chrome.kill()
            chrome.wait()
        srv.terminate()
        srv.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
