#!/usr/bin/env python3
"""The CUDA backend's anchors, measured on the GPU machine in the same run as dspark (docs/CUDA.md).

For a random-weight model of a target's exact shapes (`dspark random-model`), one JSON line with:
  - dspark: `bench --backend cuda` prefill and decode tok/s at batch 1;
  - the Hugging Face transformers anchor: the same architecture and sizes with random weights in
    bf16, greedy decoding at batch 1, eager and with a static cache + torch.compile (CUDA graphs);
    decode tok/s from per-token timestamps (a streamer), so prefill is not in it;
  - the memory-bandwidth bound: the weights' bytes a token reads (every tensor: the tied LM head reads
    the whole embedding table) plus the K/V rows at the mean context, over the device's copy bandwidth
    (bytes read and written by a 1 GiB device-to-device copy), and the fraction of it dspark reaches.

  python3 bench/cuda_anchor.py --dspark BIN --model RANDOM.gguf [--prompt 512] [--tokens 128]
                               [--repeats 3] [--no-compile] [--out FILE.jsonl]

Needs torch with CUDA and transformers (both on the GPU machine's image); the dspark figures need a
binary built with the CUDA backend.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time


def metadata(dspark, gguf):
    """The GGUF's scalar metadata (arrays give their length) and tensor bytes, from `dspark inspect`."""
    out = subprocess.run([dspark, "inspect", "-m", gguf, "--json"], check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    meta = {}
    for line in d["metadata"]:
        key, _, rest = line.partition(": ")
        typ, _, val = rest.partition(" = ")
        arr = re.match(r"array<\w+>\[(\d+)\]", typ)
        if arr:
            meta[key] = int(arr.group(1))
        elif typ == "string":
            meta[key] = val.strip('"')
        elif typ in ("f32", "f64"):
            meta[key] = float(val)
        elif typ == "bool":
            meta[key] = val == "true"
        else:
            meta[key] = int(val)
    return meta, d["tensor_bytes"]


def shapes(meta):
    arch = meta["general.architecture"]
    p = arch + "."
    s = {
        "arch": arch,
        "vocab": meta.get("tokenizer.ggml.tokens") or meta[p + "vocab_size"],
        "n_embd": meta[p + "embedding_length"],
        "n_ff": meta[p + "feed_forward_length"],
        "n_layer": meta[p + "block_count"],
        "n_head": meta[p + "attention.head_count"],
        "n_head_kv": meta[p + "attention.head_count_kv"],
        "eps": meta[p + "attention.layer_norm_rms_epsilon"],
        "ctx": meta[p + "context_length"],
        "rope_base": meta.get(p + "rope.freq_base", 1e6 if arch == "gemma3" else 1e4),
        "window": meta.get(p + "attention.sliding_window", 0),
    }
    s["head_dim"] = meta.get(p + "attention.key_length", s["n_embd"] // s["n_head"])
    return s


def kv_bytes_per_token(s, ctx):
    """f16 K and V rows one decoded token reads at context ctx (Gemma 3: 5 of 6 layers see a window)."""
    row = 2 * 2 * s["n_head_kv"] * s["head_dim"]
    if s["arch"] == "gemma3" and s["window"]:
        full = sum(1 for il in range(s["n_layer"]) if (il + 1) % 6 == 0)
        return row * (full * ctx + (s["n_layer"] - full) * min(ctx, s["window"]))
    return row * s["n_layer"] * ctx


def hf_model(s):
    common = dict(vocab_size=s["vocab"], hidden_size=s["n_embd"], intermediate_size=s["n_ff"],
                  num_hidden_layers=s["n_layer"], num_attention_heads=s["n_head"],
                  num_key_value_heads=s["n_head_kv"], head_dim=s["head_dim"], rms_norm_eps=s["eps"],
                  max_position_embeddings=s["ctx"], tie_word_embeddings=True)
    if s["arch"] == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig
        cfg = Gemma3TextConfig(**common, query_pre_attn_scalar=s["head_dim"], sliding_window=s["window"],
                               rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                "full_attention": {"rope_type": "default",
                                                                   "rope_theta": s["rope_base"]}})
        return cfg, Gemma3ForCausalLM
    if s["arch"] == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(**common, rope_parameters={"rope_type": "default", "rope_theta": s["rope_base"]})
        return cfg, LlamaForCausalLM
    raise SystemExit(f"cuda_anchor: no transformers anchor for architecture '{s['arch']}'")


class Clock:
    """A generate() streamer that only stamps the time of each put: the prompt, then every new token."""

    def __init__(self):
        self.t = []

    def put(self, value):
        self.t.append(time.perf_counter())

    def end(self):
        pass


def hf_decode(s, prompt, tokens, repeats, compiled):
    import torch
    torch.manual_seed(0)
    cfg, cls = hf_model(s)
    model = cls(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    if compiled:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(0, s["vocab"], (1, prompt), device="cuda")
    kw = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    if compiled:
        kw["cache_implementation"] = "static"
    rates = []
    for i in range(repeats + 1):  # the first compiles / warms up
        clock = Clock()
        with torch.inference_mode():
            model.generate(ids, streamer=clock, **kw)
        torch.cuda.synchronize()
        if i > 0 and len(clock.t) > 2:  # t[0]: the prompt; t[1]: the first new token (after prefill)
            rates.append((len(clock.t) - 2) / (clock.t[-1] - clock.t[1]))
    del model
    torch.cuda.empty_cache()
    return statistics.median(rates)


def device_bandwidth():
    import torch
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    n = 20
    for _ in range(n):
        y.copy_(x)
    torch.cuda.synchronize()
    return 2 * x.numel() * 4 * n / (time.perf_counter() - t), torch.cuda.get_device_name(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dspark", required=True, help="dspark binary built with the CUDA backend")
    ap.add_argument("--model", required=True, help="GGUF (a random-weight model from dspark random-model)")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens (default 512)")
    ap.add_argument("--tokens", type=int, default=128, help="decoded tokens (default 128)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each arm; medians (default 3)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile arm (compiling takes a minute)")
    ap.add_argument("--out", help="append the JSON line to this file too")
    a = ap.parse_args()

    meta, tensor_bytes = metadata(a.dspark, a.model)
    s = shapes(meta)
    ctx_mean = a.prompt + a.tokens // 2
    row = {"model": a.model, "arch": s["arch"], "prompt": a.prompt, "tokens": a.tokens,
           "weight_bytes": tensor_bytes, "kv_bytes_per_token": kv_bytes_per_token(s, ctx_mean)}
    row["bytes_per_token"] = row["weight_bytes"] + row["kv_bytes_per_token"]
    r = subprocess.run([a.dspark, "bench", "-m", a.model, "--backend", "cuda", "-p", str(a.prompt), "-n",
                        str(a.tokens), "-r", str(a.repeats), "--json"], capture_output=True, text=True)
    if r.returncode == 0:
        d = json.loads(r.stdout)
        row["dspark_decode_tok_s"], row["dspark_prefill_tok_s"] = d["decode_tok_s"], d["prefill_tok_s"]
    else:
        row["dspark_error"] = r.stderr.strip()[-300:]
    try:
        bw, name = device_bandwidth()
        row["device"], row["bandwidth_GB_s"] = name, bw / 1e9
        row["bound_tok_s"] = bw / row["bytes_per_token"]
        if "dspark_decode_tok_s" in row:
            row["dspark_fraction_of_bound"] = row["dspark_decode_tok_s"] / row["bound_tok_s"]
    except Exception as e:  # keep the other figures
        row["bandwidth_error"] = repr(e)[-300:]
    for arm, compiled in (("hf_eager", False), ("hf_compiled", True)):
        if compiled and a.no_compile:
            continue
        try:
            row[arm + "_tok_s"] = hf_decode(s, a.prompt, a.tokens, a.repeats, compiled)
            if "dspark_decode_tok_s" in row:
                row["dspark_over_" + arm] = row["dspark_decode_tok_s"] / row[arm + "_tok_s"]
        except Exception as e:
            row[arm + "_error"] = repr(e)[-300:]
    line = json.dumps(row)
    print(line)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
