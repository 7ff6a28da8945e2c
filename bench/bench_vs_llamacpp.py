#!/usr/bin/env python3
"""dspark vs llama.cpp on the same GGUF, same thread count, alternating runs.

Each repeat runs dspark (A) then llama.cpp (B), each in its own subprocess, so
memory and threads are separate.  Reports medians, ratios, peak RSS, this
machine's memory-copy bandwidth and decode as a percentage of the weight-streaming
roofline (all tensor bytes read once per decoded token).

  python bench/bench_vs_llamacpp.py [--repeats 5] [--threads 2] [--json out.json]
  python bench/bench_vs_llamacpp.py --only llama      # llama.cpp half alone
  python bench/bench_vs_llamacpp.py --llama-bench auto # + llama.cpp's own llama-bench binary
  python bench/bench_vs_llamacpp.py --only dspark --llama-bench auto \
      --llama-bench-args '' --llama-bench-args '--repack 0' --openvino auto
                                                       # dspark vs two llama-bench arms and OpenVINO GenAI

dspark side: `build/release/dspark bench --model PATH -p 512 -n 128 --threads 2
--repeats 1 --json`, one JSON object with prefill_tok_s, decode_tok_s,
prompt_tokens, gen_tokens, peak_rss_bytes.
llama.cpp side: llama-cpp-python low-level API (this file run with --worker-llama):
one untimed warm-up, a timed 512-token prefill (n_batch = n_ubatch = 512, only
the last logits requested), then after a short chat prompt a timed 128-token
greedy decode (argmax over raw logits, stop tokens ignored).  Weight repacking
(AMX / CPU_REPACK extra buffers) is off unless --llama-repack (see scripts/llama_ref.py).
native side (--llama-bench PATH, or `auto` for the binary scripts/build_llama_bench.sh builds):
`llama-bench -m MODEL -t THREADS -p 512 -n 128 -r 1 -o json` per repeat (its own warm-up run,
its defaults otherwise, e.g. weight repacking as llama.cpp chooses; --llama-bench-args adds flags
such as `--repack 0`; give it more than once for one llama-bench arm per flag set); peak RSS is
the llama-bench process's own.
OpenVINO GenAI side (--openvino PYTHON, or `auto` for build/ov-venv/bin/python): this file run with
--worker-openvino under a Python that has the `openvino-genai` package from PyPI, kept out of the
project's requirements; create that private environment once with
  python3 -m venv build/ov-venv && build/ov-venv/bin/pip install openvino-genai
The worker loads the GGUF file itself (openvino_genai.LLMPipeline(model.gguf, "CPU",
INFERENCE_NUM_THREADS=threads)), which converts and compiles the model in the process (tens of
seconds, reported as load_s). One untimed warm-up (a full-length prefill and a short decode) absorbs
the first call's compilation; then a timed prefill of exactly --prompt-tokens tokens (the same
document as the llama.cpp side, tokenized by the pipeline's own tokenizer, one generated token) and a
timed greedy decode of --gen-tokens tokens (ignore_eos) after the model's chat template around a short
request.  Prefill tok/s = prompt tokens / time to first token and decode tok/s = 1000 / mean time per
output token, both from the pipeline's perf_metrics (the wall clock of each call is kept beside
them).  Every prompt (warm-up, each repeat's prefill and decode) starts at a different token, so the
pipeline's prefix cache cannot serve any of them.  OpenVINO GenAI's GGUF reader takes only some
quantization types (with 2026.4.1 SmolLM2's Q4_1 loads, Gemma 3's Q4_K_M does not); a model it
cannot load is reported as skipped with its error, not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "spec_bench_dev.jsonl")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- llama worker
def prefill_text() -> str:
    """A long real document (the longest rag prompt); fallback: repeated prose."""
    try:
        with open(DATA, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rows.sort(key=lambda r: (-len(r["turns"][0]), str(r["question_id"])))
        return rows[0]["turns"][0]
    except OSError:
        return ("The quick brown fox jumps over the lazy dog. " * 400)


def llama_bench_worker(args) -> int:
    """One llama-bench run (pp and tg tests); prints one JSON object like `dspark bench --json`."""
    import shlex

    cmd = [args.llama_bench, "-m", args.model, "-t", str(args.threads), "-p", str(args.prompt_tokens),
           "-n", str(args.gen_tokens), "-r", "1", "-o", "json"] + shlex.split(args.llama_bench_args or "")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    if p.returncode != 0:
        print(f"llama-bench exit {p.returncode}: {' '.join(cmd)}\n{err.decode(errors='replace')[-2000:]}",
              file=sys.stderr)
        return 1
    import resource

    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    tests = json.loads(out.decode())
    res = {"prefill_tok_s": 0.0, "decode_tok_s": 0.0, "peak_rss_bytes": rss, "command": cmd}
    for t in tests:
        if t.get("n_prompt", 0) > 0 and t.get("n_gen", 0) == 0:
            res["prefill_tok_s"] = float(t["avg_ts"])
        elif t.get("n_gen", 0) > 0 and t.get("n_prompt", 0) == 0:
            res["decode_tok_s"] = float(t["avg_ts"])
    res["settings"] = {k: tests[0].get(k) for k in ("build_commit", "cpu_info", "n_threads", "type_k",
                                                    "flash_attn", "n_batch", "n_ubatch", "no_op_offload")
                       if tests and k in tests[0]}
    print(json.dumps(res))
    return 0


def llama_worker(args) -> int:
    from llama_ref import LlamaRef, chat_text, vm_hwm_bytes

    t0 = time.perf_counter()
    ref = LlamaRef(args.model, n_threads=args.threads, n_ctx=2048, n_batch=512,
                   n_ubatch=512, flash_attn=args.llama_flash_attn,
                   repack_q4k=args.llama_repack)
    load_s = time.perf_counter() - t0

    ids = ref.tokenize(prefill_text(), add_special=True, parse_special=False)
    while len(ids) < args.prompt_tokens:
        ids = ids + ids[1:]
    pp_ids = ids[:args.prompt_tokens]
    short = ref.tokenize(chat_text("Write a short story about a lighthouse keeper."),
                         add_special=False, parse_special=True)

    # warm-up (untimed): touches the weights and the compute buffers
    ref.clear()
    logits = ref.eval_prompt(short)
    ref.timed_greedy(4, logits)

    ref.clear()
    t0 = time.perf_counter()
    ref.eval_prompt(pp_ids)
    pp_s = time.perf_counter() - t0

    ref.clear()
    logits = ref.eval_prompt(short)
    n, tg_s = ref.timed_greedy(args.gen_tokens, logits)

    res = {
        "prefill_tok_s": len(pp_ids) / pp_s, "decode_tok_s": n / tg_s,
        "prompt_tokens": len(pp_ids), "gen_tokens": n, "decode_prompt_tokens": len(short),
        "load_s": load_s, "peak_rss_bytes": vm_hwm_bytes(), "settings": ref.settings,
    }
    ref.close()
    print(json.dumps(res), flush=True)
    return 0


def openvino_worker(args) -> int:
    """OpenVINO GenAI on the GGUF file (run under the private venv's Python); prints one JSON object
    like `dspark bench --json`, or {"skipped": reason} when the pipeline cannot load the model."""
    try:
        import numpy as np
        import openvino as ov
        import openvino_genai as og
        from llama_ref import vm_hwm_bytes
    except ImportError as e:
        print(f"openvino worker: {e} (install: python3 -m venv build/ov-venv && "
              "build/ov-venv/bin/pip install openvino-genai)", file=sys.stderr)
        return 2
    version = og.get_version()
    config = {"INFERENCE_NUM_THREADS": args.threads}
    t0 = time.perf_counter()
    try:
        pipe = og.LLMPipeline(args.model, "CPU", **config)
    except RuntimeError as e:
        reason = " ".join(str(e).split())
        reason = reason[reason.find("[load_gguf]"):] if "[load_gguf]" in reason else reason[-300:]
        print(json.dumps({"skipped": f"OpenVINO GenAI {version} cannot load this GGUF: {reason}"}))
        return 0
    load_s = time.perf_counter() - t0
    tok = pipe.get_tokenizer()
    doc = tok.encode(prefill_text(), add_special_tokens=False).input_ids.data[0].tolist()
    # distinct windows of the document: the warm-up starts at token 0, repeat r's prefill at r + 1
    start = args.ov_repeat + 1
    while len(doc) < start + args.prompt_tokens:
        doc = doc + doc
    def window(at: int):
        return ov.Tensor(np.array([doc[at:at + args.prompt_tokens]], dtype=np.int64))

    def chat(tag: str):
        text = tok.apply_chat_template(
            [{"role": "user", "content": f"({tag}) Write a short story about a lighthouse keeper."}],
            add_generation_prompt=True)
        return tok.encode(text, add_special_tokens=False).input_ids

    def run(ids, n_new: int):
        cfg = pipe.get_generation_config()
        cfg.max_new_tokens = n_new
        cfg.min_new_tokens = n_new
        cfg.ignore_eos = True
        cfg.do_sample = False
        t = time.perf_counter()
        r = pipe.generate(ids, cfg)
        return r, time.perf_counter() - t

    run(window(0), 1)                     # warm-up: compiles the prefill shapes
    run(chat("warm-up"), 8)               # and the decode step
    r, pp_wall = run(window(start), 1)
    pm = r.perf_metrics
    pp_tokens = int(pm.get_num_input_tokens())
    ttft_ms = float(pm.get_ttft().mean)
    r, tg_wall = run(chat(f"repeat {args.ov_repeat + 1}"), args.gen_tokens)
    pm = r.perf_metrics
    n = int(pm.get_num_generated_tokens())
    tpot_ms = float(pm.get_tpot().mean)
    res = {
        "prefill_tok_s": pp_tokens / (ttft_ms / 1e3), "decode_tok_s": 1e3 / tpot_ms,
        "prompt_tokens": pp_tokens, "gen_tokens": n, "decode_prompt_tokens": int(pm.get_num_input_tokens()),
        "prefill_wall_s": pp_wall, "prefill_ttft_ms": ttft_ms, "decode_wall_s": tg_wall,
        "decode_ttft_ms": float(pm.get_ttft().mean), "decode_tpot_ms": tpot_ms, "load_s": load_s,
        "peak_rss_bytes": vm_hwm_bytes(),
        "settings": {"openvino_genai": version, "device": "CPU", **config,
                     "prefill_window_start": start},
    }
    print(json.dumps(res), flush=True)
    return 0


# --------------------------------------------------------------------------- helpers
def run_child(cmd: list[str], timeout: float) -> tuple[dict, int]:
    """Run cmd, parse the last JSON object line of its stdout.  Returns (dict, the
    child's own ru_maxrss in bytes, from wait4)."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode(errors="replace")
        err = fe.read().decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd)}\n{err[-2000:]}")
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line), ru.ru_maxrss * 1024
    raise RuntimeError(f"no JSON object in output of {' '.join(cmd)}:\n{out[-2000:]}")


def memcpy_bandwidth(nbytes: int = 512 << 20, reps: int = 7) -> dict:
    """Best-of-N numpy copy of a large array; GB/s counting read + write (2x bytes)."""
    try:
        import numpy as np
    except ImportError:
        return {"gb_s": None, "method": "not measured: python package numpy not installed "
                "(pip install the numpy pin of requirements.txt)"}

    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault in pages
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    del src, dst
    return {"array_bytes": nbytes, "best_s": best, "gb_s": 2 * nbytes / best / 1e9,
            "method": f"numpy.copyto of {nbytes >> 20} MiB float64, best of {reps}, "
                      "single thread, (read+write) bytes / time"}


def gguf_tensor_bytes(path: str) -> dict:
    try:
        import gguf  # type: ignore
    except ImportError:
        return {"total_bytes": None, "note": "python package gguf not installed"}
    r = gguf.GGUFReader(path)
    by_type: dict[str, int] = {}
    total = 0
    for t in r.tensors:
        nb = int(t.n_bytes)
        total += nb
        name = t.tensor_type.name
        by_type[name] = by_type.get(name, 0) + nb
    return {"total_bytes": total, "n_tensors": len(r.tensors), "bytes_by_type": by_type}


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


# --------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--dspark", default=os.path.join(REPO, "build", "release", "dspark"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--only", choices=["dspark", "llama"], default=None)
    ap.add_argument("--dspark-full-head", action="store_true",
                    help="also run dspark with every logit computed (bench --lm-head full), as llama.cpp does,"
                         " beside its default greedy decode through the exact greedy head")
    ap.add_argument("--llama-flash-attn", action="store_true",
                    help="enable llama.cpp flash attention (default off, as in the goldens)")
    ap.add_argument("--llama-repack", action="store_true",
                    help="put llama.cpp's Q4_K tensors in the CPU_REPACK buffer (q4_K_8x8), as "
                         "llama.cpp does by default on AVX2 machines without AMX")
    ap.add_argument("--llama-bench", default=None, metavar="PATH",
                    help="also run llama.cpp's own llama-bench binary ('auto': the one "
                         "scripts/build_llama_bench.sh builds under build/llama-bench)")
    ap.add_argument("--llama-bench-args", action="append", default=None,
                    help="extra llama-bench flags, e.g. '--repack 0'; repeat it for one llama-bench arm per "
                         "flag set ('' for llama-bench's defaults)")
    ap.add_argument("--openvino", default=None, metavar="PYTHON",
                    help="also run OpenVINO GenAI on the GGUF, in a subprocess of this Python, which must "
                         "have the openvino-genai package ('auto': build/ov-venv/bin/python; create it with "
                         "python3 -m venv build/ov-venv && build/ov-venv/bin/pip install openvino-genai). "
                         "Models it cannot load are reported as skipped")
    ap.add_argument("--json", default=None, metavar="PATH", help="write results ('-': stdout)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--worker-llama", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-llama-bench", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-openvino", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ov-repeat", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.model is None:
        from llama_ref import default_model_path

        args.model = default_model_path()
    if args.llama_bench == "auto":
        args.llama_bench = os.path.join(REPO, "build", "llama-bench", "build", "bin", "llama-bench")
    if args.worker_llama:
        return llama_worker(args)
    if args.worker_llama_bench:
        args.llama_bench_args = " ".join(args.llama_bench_args or [])
        return llama_bench_worker(args)
    if args.worker_openvino:
        return openvino_worker(args)
    if args.openvino == "auto":
        args.openvino = os.path.join(REPO, "build", "ov-venv", "bin", "python")

    sides = [s for s in ("dspark", "llama") if args.only in (None, s)]
    if args.dspark_full_head and "dspark" in sides:
        sides.insert(1, "dspark-full-head")
    if args.llama_bench:
        if not os.access(args.llama_bench, os.X_OK):
            log(f"llama-bench binary {args.llama_bench} not found (build it: scripts/build_llama_bench.sh)")
            return 2
    # one llama-bench arm per --llama-bench-args; "llama-bench" is the arm with llama-bench's defaults
    bench_arms = {("llama-bench" if not a.strip() else f"llama-bench {a.strip()}"): a
                  for a in (args.llama_bench_args or [""])} if args.llama_bench else {}
    sides += list(bench_arms)
    if args.openvino:
        import shutil

        probe = None
        if shutil.which(args.openvino):
            probe = subprocess.run([args.openvino, "-c", "import openvino_genai"], capture_output=True)
        if probe is None or probe.returncode != 0:
            why = "not found" if probe is None else "cannot import openvino_genai"
            log(f"OpenVINO Python {args.openvino}: {why} (create it: python3 -m venv build/ov-venv && "
                "build/ov-venv/bin/pip install openvino-genai)")
            return 2
        sides.append("openvino")
    if "dspark" in sides and not os.path.exists(args.dspark):
        log(f"dspark binary {args.dspark} not found")
        return 2
    cmds = {
        "dspark": [args.dspark, "bench", "--model", args.model, "-p", str(args.prompt_tokens),
                   "-n", str(args.gen_tokens), "--threads", str(args.threads),
                   "--repeats", "1", "--json"],
        "dspark-full-head": [args.dspark, "bench", "--model", args.model, "-p", str(args.prompt_tokens),
                             "-n", str(args.gen_tokens), "--threads", str(args.threads),
                             "--repeats", "1", "--json", "--lm-head", "full"],
        "llama": [sys.executable, os.path.abspath(__file__), "--worker-llama",
                  "--model", args.model, "--threads", str(args.threads),
                  "--prompt-tokens", str(args.prompt_tokens),
                  "--gen-tokens", str(args.gen_tokens)]
                 + (["--llama-flash-attn"] if args.llama_flash_attn else [])
                 + (["--llama-repack"] if args.llama_repack else []),
        "openvino": [str(args.openvino), os.path.abspath(__file__), "--worker-openvino",
                     "--model", args.model, "--threads", str(args.threads),
                     "--prompt-tokens", str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens)],
    }
    for arm, extra in bench_arms.items():
        cmds[arm] = [sys.executable, os.path.abspath(__file__), "--worker-llama-bench",
                     "--llama-bench", str(args.llama_bench), "--llama-bench-args=" + extra,
                     "--model", args.model, "--threads", str(args.threads),
                     "--prompt-tokens", str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens)]

    log("measuring memory copy bandwidth")
    bw = memcpy_bandwidth()
    log(f"memcpy bandwidth {bw['gb_s']:.2f} GB/s (read+write)" if bw["gb_s"] else f"memcpy bandwidth {bw['method']}")
    wb = gguf_tensor_bytes(args.model)
    if wb["total_bytes"]:
        log(f"GGUF tensor bytes {wb['total_bytes']:,} in {wb['n_tensors']} tensors")

    runs: dict[str, list[dict]] = {s: [] for s in sides}
    skipped: dict[str, str] = {}
    for rep in range(args.repeats):
        for s in [s for s in sides if s not in skipped]:
            # the OpenVINO worker starts each repeat's prompts at a different token (prefix cache)
            cmd = cmds[s] + (["--ov-repeat", str(rep)] if s == "openvino" else [])
            res, maxrss = run_child(cmd, args.timeout)
            if "skipped" in res:
                skipped[s] = res["skipped"]
                log(f"{s} skipped: {res['skipped']}")
                continue
            res["wait4_maxrss_bytes"] = maxrss
            runs[s].append(res)
            log(f"repeat {rep + 1}/{args.repeats} {s:<6}: prefill {res['prefill_tok_s']:8.1f} tok/s"
                f"  decode {res['decode_tok_s']:7.2f} tok/s"
                f"  peak RSS {res.get('peak_rss_bytes', 0) / 2**20:7.1f} MiB")

    sides = [s for s in sides if s not in skipped]
    roof = None
    if wb["total_bytes"] and bw["gb_s"]:
        roof = bw["gb_s"] * 1e9 / wb["total_bytes"]
    summary = {}
    for s in sides:
        pp = med([r["prefill_tok_s"] for r in runs[s]])
        tg = med([r["decode_tok_s"] for r in runs[s]])
        summary[s] = {
            "prefill_tok_s_median": pp, "decode_tok_s_median": tg,
            "prefill_tok_s_all": [r["prefill_tok_s"] for r in runs[s]],
            "decode_tok_s_all": [r["decode_tok_s"] for r in runs[s]],
            "peak_rss_bytes_max": max(r.get("peak_rss_bytes", 0) for r in runs[s]),
            "wait4_maxrss_bytes_max": max(r["wait4_maxrss_bytes"] for r in runs[s]),
            "decode_pct_of_roofline": (100 * tg / roof) if roof else None,
        }
    ratios = {}
    for ours in (s for s in ("dspark", "dspark-full-head") if s in sides):
        for peer in (s for s in sides if not s.startswith("dspark")):
            ratios[f"{ours} / {peer}" if ours != "dspark" else peer] = {
                "ours": ours, "peer": peer,
                "prefill": summary[ours]["prefill_tok_s_median"] / summary[peer]["prefill_tok_s_median"],
                "decode": summary[ours]["decode_tok_s_median"] / summary[peer]["decode_tok_s_median"]}

    print(f"\n### dspark vs llama.cpp — {args.threads} threads, {args.repeats} alternating "
          f"repeats, medians\n")
    print(f"| engine | prefill {args.prompt_tokens} tok/s | decode {args.gen_tokens} tok/s "
          f"| decode % of roofline | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    names = {"dspark": "dspark", "dspark-full-head": "dspark, full LM head", "llama": "llama.cpp (llama-cpp-python)",
             "openvino": "OpenVINO GenAI (GGUF)"}
    for arm in bench_arms:
        names[arm] = "llama.cpp (native " + arm + ")"
    for s in sides:
        m = summary[s]
        print(f"| {names[s]} | {fmt(m['prefill_tok_s_median'])} | {fmt(m['decode_tok_s_median'], '.2f')}"
              f" | {fmt(m['decode_pct_of_roofline'])} | {m['peak_rss_bytes_max'] / 2**20:.1f} |")
    for r in ratios.values():
        print(f"| **ratio {names[r['ours']]} / {names[r['peer']]}** | {r['prefill']:.3f} | {r['decode']:.3f} | | |")
    print(f"\nLoad average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
          f" (OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}); results under"
          " load are not comparable.")
    if bw["gb_s"]:
        print(f"Memory copy bandwidth: {bw['gb_s']:.2f} GB/s ({bw['method']}).")
    else:
        print(f"Memory copy bandwidth: {bw['method']}.")
    if roof:
        print(f"Weight bytes per decoded token: {wb['total_bytes']:,} (all GGUF tensors) → "
              f"roofline {roof:.1f} tok/s.")
    if "llama" in sides:
        print("llama.cpp peak RSS includes the Python interpreter and numpy (~30-40 MiB).")
        st = runs["llama"][0].get("settings", {})
        print("llama.cpp settings: " + ", ".join(f"{k}={v}" for k, v in st.items()))
        print("(extra buffer types off: the AMX path segfaults on this model, llama.cpp #20824;"
              " --llama-repack puts Q4_K weights in CPU_REPACK instead.)")
    for arm in (a for a in bench_arms if a in sides):
        st = runs[arm][0].get("settings", {})
        print(f"{arm}: " + " ".join(runs[arm][0].get("command", [])[:1] + ["..."])
              + "; " + ", ".join(f"{k}={v}" for k, v in st.items()))
    if "openvino" in sides:
        st = runs["openvino"][0].get("settings", {})
        print("OpenVINO GenAI: " + ", ".join(f"{k}={v}" for k, v in st.items())
              + f"; load + compile {med([r['load_s'] for r in runs['openvino']]):.1f} s (median, untimed)")
    for s, why in skipped.items():
        print(f"{names.get(s, s)}: skipped — {why}")

    result = {
        "machine": {"platform": platform.platform(), "cpu": _cpu_name(), "nproc": os.cpu_count()},
        "model": args.model, "threads": args.threads, "repeats": args.repeats,
        "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
        "bandwidth": bw, "weights": wb, "roofline_decode_tok_s": roof,
        "summary": summary, "ratios_dspark_over_peer": ratios, "runs": runs, "skipped": skipped,
        "commands": {s: cmds[s] for s in sides},
        "env": {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
                "loadavg_at_end": os.getloadavg()},
    }
    if args.json:
        text = json.dumps(result, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
