#!/usr/bin/env python3
"""Live test of `dspark serve` on the real model with the official `openai` client.

Usage: test_server.py DSPARK_BINARY   (model from $DSPARK_MODEL)

Starts the server on a free port with an API key and two slots, waits for /health, then checks:
chat and completions (streamed and not), the models list, usage (+ usage.speculation), per-request
speculative options, temperature-0 answers identical with and without speculation (and under
concurrency), prompt-cache reuse on a second turn, every bad-input case (status code + OpenAI error
body), the API key, the queue bound (429), that disconnected streams free their slots, /stats,
/metrics (and `promtool check metrics` when installed), the chat page, a hostile client (Host
check against DNS rebinding: 421 for an unknown Host, loopback / listen address / --allowed-hosts
answered; an oversize body sent whole still reads its 413 JSON; slowloris: 100 trickling sockets
while /health answers 200 in under 1 s every time and a completion succeeds, each socket then 408),
and SIGTERM -> exit 0.
Exit 77 (ctest: skipped) without a model or without the openai package.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SKIP = 77
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from slowloris_serve import Slowloris, health  # noqa: E402  (the probe of bench/slowloris_serve.py)
KEY = "sk-test-123"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, port, extra):
        self.port = port
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"dspark_serve_{port}.log"), "w+")
        self.proc = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port)] + extra,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout=60):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early:\n" + self.tail())
            try:
                if request("GET", self.port, "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("server not healthy in time:\n" + self.tail())

    def tail(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-3000:]


def response_headers(method, port, path, body=None, headers=None):
    """One HTTP request; returns (status, {lower-cased header name: value})."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}


def request(method, port, path, body=None, headers=None, raw=None):
    """One HTTP request; returns (status, parsed JSON or text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    text = r.read().decode("utf-8", "replace")
    conn.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


failures = []


def check(cond, what):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        failures.append(what)


def error_shape(body):
    e = body.get("error") if isinstance(body, dict) else None
    return isinstance(e, dict) and isinstance(e.get("message"), str) and isinstance(e.get("type"), str) \
        and "param" in e and "code" in e


EXPECT_SMOLLM2 = False


def main():
    if len(sys.argv) < 2:
        print("usage: test_server.py DSPARK_BINARY", file=sys.stderr)
        return 2
    binary = sys.argv[1]
    # --smollm2: the second target (SmolLM2-135M-Instruct, its own shipped drafter
    # drafters/smollm2-135m); ChatML accepts roles in any order.
    global EXPECT_SMOLLM2
    EXPECT_SMOLLM2 = "--smollm2" in sys.argv[2:]
    model = os.environ.get("DSPARK_SMOLLM2_MODEL" if EXPECT_SMOLLM2 else "DSPARK_MODEL", "")
    if not model or not os.path.isfile(model):
        print("SKIP: set DSPARK_SMOLLM2_MODEL to the SmolLM2 GGUF" if EXPECT_SMOLLM2 else
              "SKIP: set DSPARK_MODEL to the Gemma 3 270M GGUF to run the server test")
        return SKIP
    try:
        import openai
    except ImportError:
        print(f"SKIP: the openai package is not installed for {sys.executable} (scripts/test.sh installs it)")
        return SKIP

    port = free_port()
    srv = Server(binary, model, port, ["--api-key", KEY, "--parallel", "2", "--max-queue", "1", "--ctx", "1024",
                                       "--max-body", "65536", "--drain-timeout", "5", "--allowed-hosts", "api.example"])
    try:
        srv.wait_healthy()
        run_checks(openai, port)
    except Exception as e:  # a crash of the test itself is a failure with the server log
        failures.append(f"exception: {e!r}")
        print(f"FAIL exception {e!r}")
    finally:
        if srv.proc.poll() is None:
            t0 = time.time()
            srv.proc.send_signal(signal.SIGTERM)
            try:
                rc = srv.proc.wait(timeout=20)
                check(rc == 0, f"SIGTERM: exit code {rc} after {time.time() - t0:.1f}s")
            except subprocess.TimeoutExpired:
                srv.proc.kill()
                check(False, "SIGTERM: server did not exit within 20 s")
        else:
            check(False, f"server died during the test (exit {srv.proc.returncode})")
        if failures:
            print("---- server log ----\n" + srv.tail())
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


def run_checks(openai, port):
    base = f"http://127.0.0.1:{port}/v1"
    client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=60)
    auth = {"Authorization": f"Bearer {KEY}"}

    # Models.
    models = client.models.list().data
    check(len(models) == 1, "models: one served model")
    mid = models[0].id
    drafter = (models[0].model_extra or {}).get("drafter")
    # Each target's default is its shipped setup (tests/unit/tools/test_spec_flags.cpp): Gemma's DSpark
    # drafter (drafters/gemma3-270m), SmolLM2's suffix drafter over the index of its own answers that
    # drafters/smollm2-135m/default_spec.json builds on first use; a model without one gets n-gram lookup.
    shipped_kind, shipped = ("suffix", "smollm2-135m-f102c98bcffe94df.sfx") if EXPECT_SMOLLM2 else ("dspark", "gemma3-270m")
    check(isinstance(drafter, dict) and drafter.get("kind") == shipped_kind
          and drafter.get("path") == shipped, f"models: shipped drafter mounted, named without its path ({drafter})")

    # Chat, non-streamed, temperature 0: with and without speculation.
    msgs = [{"role": "user", "content": "List the first five prime numbers."}]
    a = client.chat.completions.create(model=mid, messages=msgs, max_tokens=24, temperature=0)
    b = client.chat.completions.create(model=mid, messages=msgs, max_tokens=24, temperature=0,
                                       extra_body={"speculative": {"enabled": False}})
    ta, tb = a.choices[0].message.content, b.choices[0].message.content
    check(len(ta) > 0, f"chat: non-empty answer {ta[:40]!r}")
    check(ta == tb, "chat: temperature-0 answer identical with and without speculation")
    ua, ub = a.usage, b.usage
    check(ua.prompt_tokens > 0 and ua.completion_tokens > 0 and ua.total_tokens == ua.prompt_tokens + ua.completion_tokens,
          "chat: usage token counts")
    spec = (ua.model_extra or {}).get("speculation")
    check(isinstance(spec, dict) and all(k in spec for k in
          ("drafted", "accepted", "rounds", "target_calls", "tau", "accepted_by_pos")),
          f"chat: usage.speculation fields ({spec})")
    check("speculation" not in (ub.model_extra or {}), "chat: no usage.speculation when speculation is off")
    check(a.choices[0].finish_reason in ("stop", "length"), "chat: finish_reason")

    # Per-request gamma.
    c = client.chat.completions.create(model=mid, messages=msgs, max_tokens=24, temperature=0,
                                       extra_body={"speculative": {"enabled": True, "num_draft_tokens": 2}})
    sc = c.usage.model_extra["speculation"]
    check(c.choices[0].message.content == ta and len(sc["accepted_by_pos"]) == 2,
          "chat: num_draft_tokens 2 -> same answer, 2 positions")

    # Chat, streamed: same text, usage in the final chunk.
    parts, last_usage, finish = [], None, None
    for ch in client.chat.completions.create(model=mid, messages=msgs, max_tokens=24, temperature=0, stream=True):
        if ch.choices and ch.choices[0].delta.content:
            parts.append(ch.choices[0].delta.content)
        if ch.choices and ch.choices[0].finish_reason:
            finish = ch.choices[0].finish_reason
        if ch.usage:
            last_usage = ch.usage
    check("".join(parts) == ta, "chat stream: deltas join to the non-streamed answer")
    check(finish in ("stop", "length") and last_usage is None, "chat stream: finish_reason, no usage unless asked")
    # stream_options.include_usage: as OpenAI, a last chunk with choices [] and the usage.
    chunks = list(client.chat.completions.create(model=mid, messages=msgs, max_tokens=24, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    last = chunks[-1]
    check(last.choices == [] and last.usage is not None and "speculation" in (last.usage.model_extra or {})
          and all(c.usage is None for c in chunks[:-1]), "chat stream: include_usage -> a separate usage chunk")
    ids = {c.id for c in chunks}
    check(len(ids) == 1 and len(next(iter(ids))) >= 30, f"chat stream: one random id per response {ids}")

    # Second turn reuses the first turn's KV.
    turn2 = msgs + [{"role": "assistant", "content": ta}, {"role": "user", "content": "And the next two?"}]
    d = client.chat.completions.create(model=mid, messages=turn2, max_tokens=8, temperature=0)
    cached = d.usage.prompt_tokens_details.cached_tokens if d.usage.prompt_tokens_details else 0
    check(cached >= ua.prompt_tokens, f"multi-turn: cached_tokens {cached} >= first prompt {ua.prompt_tokens}")

    # Completions, streamed and not, spec vs serial; stop sequences; seeded sampling.
    p = "One, two, three, four,"
    e = client.completions.create(model=mid, prompt=p, max_tokens=16, temperature=0)
    f = client.completions.create(model=mid, prompt=p, max_tokens=16, temperature=0,
                                  extra_body={"speculative": {"enabled": False}})
    check(e.choices[0].text == f.choices[0].text and len(e.choices[0].text) > 0,
          f"completions: identical with and without speculation {e.choices[0].text!r}")
    streamed = "".join(ch.choices[0].text for ch in
                       client.completions.create(model=mid, prompt=p, max_tokens=16, temperature=0, stream=True)
                       if ch.choices)
    check(streamed == e.choices[0].text, "completions stream: same text")
    g = client.completions.create(model=mid, prompt=p, max_tokens=16, temperature=0, stop=[" seven"])
    check(" seven" not in g.choices[0].text and g.choices[0].finish_reason == "stop"
          and e.choices[0].text.startswith(g.choices[0].text), f"completions: stop sequence {g.choices[0].text!r}")
    s1 = client.completions.create(model=mid, prompt="Once upon a time", max_tokens=12, temperature=0.9, seed=7)
    s2 = client.completions.create(model=mid, prompt="Once upon a time", max_tokens=12, temperature=0.9, seed=7)
    check(s1.choices[0].text == s2.choices[0].text, "completions: same seed, same sample")

    # Concurrency: two different prompts at once give their sequential answers.
    prompts = ["The capital of France is", "Water boils at"]
    seq = [client.completions.create(model=mid, prompt=q, max_tokens=12, temperature=0).choices[0].text for q in prompts]
    par = [None, None]

    def worker(i):
        par[i] = client.completions.create(model=mid, prompt=prompts[i], max_tokens=12, temperature=0).choices[0].text
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(par == seq, "concurrency: parallel answers equal sequential ones")

    # Bad input: status + OpenAI error body.
    chat = "/v1/chat/completions"
    good = {"model": mid, "messages": msgs, "max_tokens": 4}
    cases = [
        ("malformed JSON", chat, None, b'{"model": ', 400),
        ("body not an object", chat, [1, 2], None, 400),
        ("missing messages", chat, {"model": mid}, None, 400),
        ("wrong type max_tokens", chat, dict(good, max_tokens="4"), None, 400),
        ("negative max_tokens", chat, dict(good, max_tokens=-1), None, 400),
        ("temperature < 0", chat, dict(good, temperature=-0.5), None, 400),
        ("unknown field", chat, dict(good, frobnicate=1), None, 400),
        ("n = 2", chat, dict(good, n=2), None, 400),
        ("bad role", chat, dict(good, messages=[{"role": "robot", "content": "x"}]), None, 400),
    ] + ([] if EXPECT_SMOLLM2 else [  # Gemma's template requires user/assistant alternation; ChatML does not
        ("roles out of order", chat, dict(good, messages=[{"role": "assistant", "content": "x"}]), None, 400),
    ]) + [
        ("unknown model", chat, dict(good, model="gpt-4o"), None, 404),
        ("prompt over the context", chat, dict(good, messages=[{"role": "user", "content": "word " * 1500}]), None, 400),
        ("max_tokens over the context", chat, dict(good, max_tokens=5000), None, 400),
        ("invalid UTF-8", chat, None, b'{"model": "m", "messages": [{"role": "user", "content": "\xc3\x28"}]}', 400),
        ("body over the limit", chat, None, b'{"model": "' + b"x" * 70000 + b'"}', 413),
        ("unknown route", "/v1/embeddings", good, None, 404),
        ("completions without prompt", "/v1/completions", {"model": mid}, None, 400),
        ("bad speculative", chat, dict(good, speculative={"num_draft_tokens": 999}), None, 400),
        ("bad stream_options", chat, dict(good, stream_options={"include_usage": "yes"}), None, 400),
    ]
    for name, path, body, raw, want in cases:
        status, resp = request("POST", port, path, body=body, headers=auth, raw=raw)
        check(status == want and error_shape(resp), f"bad input: {name} -> {status} {str(resp)[:100]}")
    status, resp = request("POST", port, chat, body=dict(good, messages=[{"role": "user", "content": "word " * 1500}]),
                           headers=auth)
    check(resp.get("error", {}).get("code") == "context_length_exceeded", "bad input: context code")
    try:
        client.chat.completions.create(model=mid, messages=msgs, max_tokens=-3)
        check(False, "openai client: BadRequestError for max_tokens -3")
    except openai.BadRequestError as ex:
        check(ex.status_code == 400 and "max_tokens" in str(ex), "openai client: BadRequestError names max_tokens")
    try:
        client.chat.completions.create(model="no-such-model", messages=msgs, max_tokens=4)
        check(False, "openai client: NotFoundError")
    except openai.NotFoundError:
        check(True, "openai client: NotFoundError for an unknown model")

    # A POST that is not declared JSON (a form or text/plain from any web page) does not generate.
    status, resp = request("POST", port, chat, body=good, headers=dict(auth, **{"Content-Type": "text/plain"}))
    check(status == 415 and error_shape(resp) and resp["error"]["code"] == "unsupported_media_type",
          f"content type: text/plain -> 415 ({status})")
    status, resp = request("POST", port, chat, body=dict(good, max_tokens=2),
                           headers=dict(auth, **{"Content-Type": "Application/JSON; charset=utf-8"}))
    check(status == 200, f"content type: application/json with parameters -> 200 ({status})")
    # Response ids differ between requests (random per process, not a counter).
    r1 = request("POST", port, chat, body=dict(good, max_tokens=1), headers=auth)[1]
    r2 = request("POST", port, chat, body=dict(good, max_tokens=1), headers=auth)[1]
    check(r1["id"] != r2["id"] and r1["id"].startswith("chatcmpl-"), "ids: unique per response")
    # num_draft_tokens beyond the drafter's block is clamped: per-position series stay bounded.
    big = request("POST", port, chat, body=dict(good, max_tokens=8, speculative={"num_draft_tokens": 64}),
                  headers=auth)[1]
    npos = len(big.get("usage", {}).get("speculation", {}).get("accepted_by_pos", []))
    check(0 < npos <= 16, f"num_draft_tokens 64 -> clamped ({npos} positions)")
    # No server paths in the API.
    ml = request("GET", port, "/v1/models", headers=auth)[1]
    check("/" not in str((ml["data"][0].get("drafter") or {}).get("path", "")), "models: no server path")
    # The Bearer scheme is case-insensitive.
    check(request("GET", port, "/v1/models", headers={"Authorization": auth["Authorization"].replace("Bearer", "bearer")})[0]
          == 200, "api key: 'bearer' accepted")

    # API key.
    status, resp = request("POST", port, chat, body=good)
    check(status == 401 and error_shape(resp), "api key: missing -> 401")
    status, resp = request("GET", port, "/v1/models", headers={"Authorization": "Bearer wrong"})
    check(status == 401 and error_shape(resp), "api key: wrong -> 401")
    status, hdrs = response_headers("GET", port, "/v1/models")
    check(status == 401 and hdrs.get("www-authenticate") == "Bearer", "api key: 401 names its scheme (WWW-Authenticate)")
    # Expect: 100-continue without the key: 401 at once, never 100 (the body is not uploaded first).
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Expect: 100-continue\r\nContent-Length: 500\r\n\r\n")
    s.settimeout(10)
    first = s.recv(4096)
    s.close()
    check(first.startswith(b"HTTP/1.1 401 "), f"api key: checked before 100 Continue ({first[:24]!r})")
    try:
        openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
        check(False, "openai client: AuthenticationError")
    except openai.AuthenticationError:
        check(True, "openai client: AuthenticationError for a wrong key")
    check(request("GET", port, "/health")[0] == 200, "api key: /health needs none")

    # Queue bound and disconnects: fill 2 slots + 1 queue place with long streams, expect 429,
    # then drop the connections: the slots must be free again quickly.
    long_body = json.dumps({"model": mid, "prompt": "Tell a long story:", "max_tokens": 900, "temperature": 0,
                            "stream": True}).encode()
    conns = []
    for i in range(3):
        cn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        cn.request("POST", "/v1/completions", body=long_body, headers=dict(auth, **{"Content-Type": "application/json"}))
        conns.append(cn)
        if i < 2:  # wait until it streams, so it holds a slot
            r = cn.getresponse()
            r.fp.readline()
            conns[-1] = (cn, r)
    time.sleep(0.3)
    status, resp = request("POST", port, "/v1/completions", body={"model": mid, "prompt": "x", "max_tokens": 2},
                           headers=auth)
    check(status == 429 and error_shape(resp), f"queue full -> 429 ({status})")
    status, hdrs = response_headers("POST", port, "/v1/completions", body={"model": mid, "prompt": "x", "max_tokens": 2},
                                    headers=auth)
    check(status == 429 and hdrs.get("retry-after") == "1", f"queue full: 429 with Retry-After ({status})")
    t0 = time.time()
    for c in conns:
        (c[0] if isinstance(c, tuple) else c).close()
    freed = False
    while time.time() - t0 < 10:
        st = request("GET", port, "/stats", headers=auth)[1]
        if all(s["state"] == "idle" for s in st["slots"]) and st["queue"]["waiting"] == 0:
            freed = True
            break
        time.sleep(0.1)
    check(freed, f"disconnects: slots free again after {time.time() - t0:.2f}s")

    # Stats, metrics, chat page.
    st = request("GET", port, "/stats", headers=auth)[1]
    check(st["drafter"]["kind"] == shipped_kind and st["totals"]["speculation"]["rounds"] > 0
          and st["totals"]["prompt_cache"]["hits"] > 0 and "accepted_by_pos" in st["totals"]["speculation"]
          and st["totals"]["cancelled"] >= 2, "stats: drafter, speculation, prompt cache, cancellations")
    gov = st["totals"]["speculation"].get("governor", {})
    check(gov.get("plain_rounds", -1) + gov.get("drafting_rounds", -1) == st["totals"]["speculation"]["rounds"]
          and sum(gov.get("rounds_by_reason", {}).values()) == st["totals"]["speculation"]["rounds"],
          "stats: the governor's rounds add up to the speculation rounds")
    status, text = request("GET", port, "/metrics", headers=auth)
    names = ["dspark_spec_draft_tokens_total", "dspark_spec_accepted_tokens_total", "dspark_spec_rounds_total",
             'dspark_spec_accepted_tokens_per_pos_total{position="1"}', "dspark_request_duration_seconds_bucket",
             "dspark_requests_total", 'dspark_spec_governor_rounds_total{reason="draft"}']
    check(status == 200 and all(n in text for n in names), "metrics: spec counters, histograms, requests")
    promtool = shutil.which("promtool")
    if promtool:
        pr = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True)
        check(pr.returncode == 0, f"metrics: promtool check metrics {pr.stdout.decode()}{pr.stderr.decode()}")
    else:
        print("note: promtool not installed; /metrics format not linted")
    status, html = request("GET", port, "/")
    check(status == 200 and "dspark chat" in html, "chat page at /")
    hostile_checks(port, mid, auth)


def raw(port, data, half_close=False, wait=20.0):
    """Sends bytes on a fresh connection (all of them first, as simple clients do), returns what
    the server sent until it closed (or `wait` seconds passed without a byte)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)  # a big body is mostly unsent when the answer comes
    try:
        s.sendall(data)
    except OSError:  # reset: the server closed without reading the rest
        s.close()
        return b""
    if half_close:
        s.shutdown(socket.SHUT_WR)
    s.settimeout(wait)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    s.close()
    return out


def status_and_code(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else None
    try:
        return status, json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return status, None


def hostile_checks(port, mid, auth):
    """DNS rebinding (Host check), the lingering close after 413, and slowloris."""
    key = f"Authorization: {auth['Authorization']}\r\n".encode()
    # Rebinding: a Host the server does not know is 421; loopback names, the listen address and
    # --allowed-hosts (api.example) are answered, with or without a port.
    for host, want in ((b"evil.example", 421), (b"evil.example:%d" % port, 421), (b"localhost", 200),
                       (b"localhost:%d" % port, 200), (b"127.0.0.1:%d" % port, 200), (b"[::1]", 200),
                       (b"api.example", 200), (b"API.example:443", 200)):
        r = raw(port, b"GET /v1/models HTTP/1.1\r\nHost: " + host + b"\r\n" + key + b"Connection: close\r\n\r\n")
        st, code = status_and_code(r)
        check(st == want and (want == 200 or code == "misdirected_request"), f"Host: {host.decode()} -> {want} ({st}, {code})")
    r = raw(port, b"GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
    check(status_and_code(r) == (421, "misdirected_request"), "Host: evil.example on /health -> 421")

    # Lingering close: a body far over --max-body, sent whole before reading, still gets the 413 JSON.
    big = b"x" * (12 << 20)  # more than the socket buffers hold
    r = raw(port, b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + key +
                     b"Content-Length: %d\r\n\r\n" % len(big) + big)
    check(status_and_code(r) == (413, "body_too_large") and r.endswith(b"}"),
          f"oversize body sent whole: the full 413 JSON is read ({status_and_code(r)})")

    # Slowloris: 100 sockets each trickle a header line every second. /health answers 200 within
    # 1 s every time, a completion succeeds meanwhile, and every trickling socket gets 408 at the
    # 10 s head deadline.
    n, secs = 100, 12.0
    loris = Slowloris(port, n, b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n", 1.0)

    comp = {}

    def completion():
        comp["status"] = request("POST", port, "/v1/completions", headers=auth,
                                 body={"model": mid, "prompt": "The capital of France is", "max_tokens": 8,
                                       "temperature": 0})[0]

    comp_thread = threading.Thread(target=completion)
    loris.start()
    comp_thread.start()
    probes = []
    t0 = time.time()
    while time.time() - t0 < secs:
        probes.append(health(port))
        time.sleep(0.2)
    comp_thread.join(timeout=60)
    loris.stop()
    got408 = 0
    for s in loris.socks:
        s.settimeout(2.0)
        try:
            got408 += s.recv(64).startswith(b"HTTP/1.1 408 ")
        except OSError:
            pass
        s.close()
    worst = max(dt for _, dt in probes)
    check(all(st == 200 for st, _ in probes) and worst < 1.0,
          f"slowloris: /health 200 every time ({len(probes)} probes, slowest {worst * 1000:.0f} ms)")
    check(comp.get("status") == 200, f"slowloris: a completion succeeds meanwhile ({comp.get('status')})")
    check(got408 == n, f"slowloris: every trickling socket got 408 at the head deadline ({got408}/{n})")


if __name__ == "__main__":
    sys.exit(main())
