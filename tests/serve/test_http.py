#!/usr/bin/env python3
"""Live test of `dspark serve`'s HTTP layer as a hostile or careless client drives it.

Usage: test_http.py DSPARK_BINARY   (model from $DSPARK_MODEL; the openai package for the drain part)

On one server (1 slot): pipelined requests all answered in order; a client that half-closes
after its request still gets the answer; Expect: 100-continue; malformed framing answered with a
JSON error and its status (Content-Length -1 -> 400, oversized or too many headers -> 431,
Transfer-Encoding -> 411, HTTP/2.0 -> 505, wrong method -> 405); JSON errors with codes (number
overflow -> invalid_json, a non-object body -> invalid_type); abandoned non-streamed requests free
the slot at once; with every handler thread busy (--http-threads 4, four streams) /health and
/metrics still answer at once and a fifth request gets 503; CORS only when --cors-origin allows
the page's origin. Then graceful drain on SIGTERM with the official openai client: a stream that
fits in --drain-timeout finishes normally; one that does not, and one still queued, end with an
error event, [DONE] and a well-formed chunked body; the process exits 0.
Exit 77 (ctest: skipped) without a model.
"""
import http.client
import json
import os
import re
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_server import SKIP, Server, check, failures, free_port, raw  # noqa: E402

HEADERS = b"Host: localhost\r\nContent-Type: application/json\r\n"


def post(path, body, extra=b""):
    b = body if isinstance(body, bytes) else json.dumps(body).encode()
    return b"POST %s HTTP/1.1\r\n%s%sContent-Length: %d\r\n\r\n%s" % (path.encode(), HEADERS, extra, len(b), b)


def statuses(resp):
    """Final status codes of the responses in a byte stream (1xx interim responses skipped)."""
    return [int(m) for m in re.findall(rb"HTTP/1\.1 ([2-5]\d\d) ", resp)]


def json_code(resp):
    body = resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def http_checks(port, mid):
    comp = {"model": mid, "prompt": "The capital of France is", "max_tokens": 3, "temperature": 0}
    # Pipelining: three requests written at once, three answers in order.
    r = raw(port, b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" + post("/v1/completions", comp) +
            b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    check(statuses(r) == [200, 200, 200] and r.count(b'"object":"list"') == 1, f"pipelined: 3 answers ({statuses(r)})")
    # Half-close after the request: still answered (a 102 interim response may come first).
    for i in range(3):
        r = raw(port, post("/v1/completions", comp), half_close=True)
        check(statuses(r) == [200] and b'"text"' in r, f"half-close {i + 1}: answered ({statuses(r)})")
    # Expect: 100-continue.
    s = socket.create_connection(("127.0.0.1", port))
    body = json.dumps(comp).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\n%sExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (HEADERS, len(body)))
    s.settimeout(5)
    first = s.recv(100)
    s.sendall(body)
    rest = b""
    while b'"text"' not in rest:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    s.close()
    check(first.startswith(b"HTTP/1.1 100 Continue") and statuses(rest) == [200], "Expect: 100-continue")

    bad = [
        ("Content-Length: -1", b"POST /v1/completions HTTP/1.1\r\n" + HEADERS + b"Content-Length: -1\r\n\r\n{}", 400, "invalid_http"),
        ("oversized header", b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431, "headers_too_large"),
        ("200 headers", b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
         431, "headers_too_large"),
        ("Transfer-Encoding", b"POST /v1/completions HTTP/1.1\r\n" + HEADERS + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         411, "length_required"),
        ("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, "http_version_not_supported"),
        ("PUT /v1/models", b"PUT /v1/models HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 405, "method_not_allowed"),
        ("number overflow", post("/v1/completions", b'{"model":"m","prompt":"a","max_tokens":1e999999}'), 400, "invalid_json"),
        ("array body", post("/v1/completions", b"[]"), 400, "invalid_type"),
        ("unknown route", b"GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, "unknown_route"),
    ]
    for what, data, status, code in bad:
        r = raw(port, data, wait=5)
        check(statuses(r) == [status] and json_code(r) == code, f"{what} -> {status} {code} ({statuses(r)}, {json_code(r)})")

    # llama-server's tokenizer routes.
    def jbody(resp):
        return json.loads(resp.split(b"\r\n\r\n", 1)[1])
    r = raw(port, post("/tokenize", {"content": "Hello world", "add_special": True}, b"Connection: close\r\n"), wait=5)
    ids = jbody(r).get("tokens") if statuses(r) == [200] else None
    r2 = raw(port, post("/tokenize", {"content": "Hello world", "with_pieces": True}, b"Connection: close\r\n"), wait=5)
    pieces = [t["piece"] for t in jbody(r2)["tokens"]] if statuses(r2) == [200] else None
    r3 = raw(port, post("/detokenize", {"tokens": ids or []}, b"Connection: close\r\n"), wait=5)
    text = jbody(r3).get("content") if statuses(r3) == [200] else None
    check(isinstance(ids, list) and len(ids) == 3 and pieces == ["Hello", " world"] and text == "<bos>Hello world",
          f"/tokenize + /detokenize round trip ({ids}, {pieces}, {text!r})")
    for what, path, body, code in (("tokenize without content", "/tokenize", {"add_special": True}, "missing_field"),
                                   ("tokenize unknown field", "/tokenize", {"content": "a", "x": 1}, "unknown_field"),
                                   ("detokenize id out of range", "/detokenize", {"tokens": [1, 10 ** 9]}, "invalid_value"),
                                   ("detokenize not a list", "/detokenize", {"tokens": "1 2"}, "invalid_type")):
        r = raw(port, post(path, body, b"Connection: close\r\n"), wait=5)
        check(statuses(r) == [400] and json_code(r) == code, f"{what} -> 400 {code} ({statuses(r)}, {json_code(r)})")

    busy_checks(port, mid)

    # Abandoned non-streamed requests: the slot is free again at once.
    long_req = post("/v1/completions", {"model": mid, "prompt": "Count from 1 to 1000:", "max_tokens": 400, "temperature": 0})
    socks = []
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(long_req)
        socks.append(s)
    time.sleep(1.0)
    for s in socks:
        s.close()
    t0 = time.time()
    r = raw(port, post("/v1/completions", comp, b"Connection: close\r\n"), wait=60)
    dt = time.time() - t0
    check(statuses(r) == [200] and dt < 5.0, f"abandoned non-streamed requests free the slot (next answer in {dt:.1f} s)")


BUSY_HANDLERS = 4  # --http-threads of the main server


def busy_checks(port, mid):
    """Every handler thread busy with a stream (1 running, the rest queued): /health and /metrics
    still answer at once (the event loop answers them), a further completion gets 503."""
    body = json.dumps({"model": mid, "prompt": "Count from 1 to 1000:", "max_tokens": 400, "temperature": 0,
                       "stream": True}).encode()
    streams = []
    for _ in range(BUSY_HANDLERS):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s" % (HEADERS, len(body), body))
        s.settimeout(30)
        s.recv(1)  # the stream's head: its handler thread is taken
        streams.append(s)
    t0 = time.time()
    health = raw(port, b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", wait=5)
    metrics = raw(port, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", wait=5)
    dt = time.time() - t0
    more = raw(port, post("/v1/completions", {"model": mid, "prompt": "x", "max_tokens": 1}, b"Connection: close\r\n"),
               wait=10)
    for s in streams:
        s.close()
    check(statuses(health) == [200] and statuses(metrics) == [200] and dt < 1.0,
          f"every handler busy: /health and /metrics answered ({statuses(health)}, {statuses(metrics)}, {dt * 1000:.0f} ms)")
    check(statuses(more) == [503] and json_code(more) == "too_many_connections",
          f"every handler busy: a further completion -> 503 ({statuses(more)}, {json_code(more)})")


def cors_checks(port, cors_on):
    pre = raw(port, b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example\r\n"
                    b"Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n", wait=5)
    get = raw(port, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example\r\nConnection: close\r\n\r\n", wait=5)
    other = raw(port, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n", wait=5)
    acao = b"Access-Control-Allow-Origin: https://app.example"
    if cors_on:
        check(statuses(pre) == [204] and b"Access-Control-Allow-Methods: POST, OPTIONS" in pre and acao in pre,
              "cors on: preflight 204 with the allowed origin")
        check(acao in get and b"Access-Control-Allow-Origin" not in other, "cors on: only the allowed origin is echoed")
    else:
        check(statuses(pre) == [405] and b"Access-Control" not in pre + get, "cors off (default): no CORS headers, OPTIONS 405")


def stream_raw(port, mid, max_tokens, out, key):
    """A raw streamed completion: records whether the chunked body ended properly and what it held."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
              body=json.dumps({"model": mid, "prompt": "Write the numbers from 1 to 500, one per line:",
                               "max_tokens": max_tokens, "temperature": 0, "stream": True}))
    r = c.getresponse()
    try:
        body = r.read().decode()
        out[key] = {"complete": True, "done": body.rstrip().endswith("data: [DONE]"), "error": '"error"' in body,
                    "finish": '"finish_reason":"length"' in body or '"finish_reason":"stop"' in body}
    except http.client.IncompleteRead:
        out[key] = {"complete": False}


def drain_checks(binary, model, openai):
    # A stream that fits in the drain timeout finishes normally (openai client).
    port = free_port()
    srv = Server(binary, model, port, ["--parallel", "1", "--drain-timeout", "20", "--cors-origin", "https://app.example"])
    try:
        srv.wait_healthy()
        cors_checks(port, True)
        mid = json.loads(raw(port, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").split(b"\r\n\r\n", 1)[1])["data"][0]["id"]
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=60)
        stream = client.completions.create(model=mid, prompt="Write the numbers from 1 to 500, one per line:",
                                           max_tokens=24, temperature=0, stream=True)
        first = next(iter(stream))
        srv.proc.send_signal(signal.SIGTERM)
        finish = None
        try:
            for ev in stream:
                if ev.choices and ev.choices[0].finish_reason:
                    finish = ev.choices[0].finish_reason
        except Exception as e:  # noqa: BLE001
            finish = repr(e)
        check(first is not None and finish == "length", f"drain: a stream within --drain-timeout finishes ({finish})")
        check(srv.proc.wait(timeout=30) == 0, "drain: exit 0")
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()

    # Longer than the drain timeout: error event + [DONE] + a well-formed end, for the running
    # stream and for a queued one; the openai client sees an APIError (not a broken connection).
    # Plain decoding and a long budget keep the running stream busy well past the 1 s drain on any
    # machine: with speculation, 600 tokens of "1 to 500" finished inside the drain on a fast one.
    port = free_port()
    srv = Server(binary, model, port, ["--parallel", "1", "--drain-timeout", "1", "--no-spec", "--ctx", "8192"])
    try:
        srv.wait_healthy()
        res = {}
        t = threading.Thread(target=stream_raw, args=(port, mid, 6000, res, "running"))
        t.start()
        time.sleep(1.0)
        q = threading.Thread(target=stream_raw, args=(port, mid, 6000, res, "queued"))
        q.start()
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=60)
        outcome = {}

        def oa():
            try:
                for _ in client.completions.create(model=mid, prompt="Hello", max_tokens=600, temperature=0, stream=True):
                    pass
                outcome["r"] = "no error"
            except openai.APIConnectionError as e:
                outcome["r"] = f"connection error {e!r}"
            except openai.APIError as e:
                outcome["r"] = "APIError" if "shutting down" in str(e) else repr(e)

        o = threading.Thread(target=oa)
        o.start()
        time.sleep(1.0)
        srv.proc.send_signal(signal.SIGTERM)
        for th in (t, q, o):
            th.join(timeout=60)
        for k in ("running", "queued"):
            v = res.get(k, {})
            check(v.get("complete") and v.get("done") and v.get("error"),
                  f"drain: {k} stream past the timeout ends with an error event, [DONE] and a proper end ({v})")
        check(outcome.get("r") == "APIError", f"drain: the openai client sees the error event ({outcome.get('r')})")
        check(srv.proc.wait(timeout=30) == 0, "drain: exit 0 after cancelling")
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def main():
    if len(sys.argv) < 2:
        print("usage: test_http.py DSPARK_BINARY", file=sys.stderr)
        return 2
    binary, model = sys.argv[1], os.environ.get("DSPARK_MODEL", "")
    if not model or not os.path.isfile(model):
        print("SKIP: set DSPARK_MODEL to the Gemma 3 270M GGUF")
        return SKIP
    try:
        import openai
    except ImportError:
        print(f"SKIP: the openai package is not installed for {sys.executable}")
        return SKIP
    port = free_port()
    srv = Server(binary, model, port, ["--parallel", "1", "--http-threads", str(BUSY_HANDLERS)])
    try:
        srv.wait_healthy()
        mid = json.loads(raw(port, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").split(b"\r\n\r\n", 1)[1])["data"][0]["id"]
        http_checks(port, mid)
        cors_checks(port, False)
    except Exception as e:  # noqa: BLE001
        check(False, f"exception {e!r}")
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=30)
        if failures:
            print("---- server log ----\n" + srv.tail())
    try:
        drain_checks(binary, model, openai)
    except Exception as e:  # noqa: BLE001
        check(False, f"drain exception {e!r}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
