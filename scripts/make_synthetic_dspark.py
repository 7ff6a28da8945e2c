"""Writes tiny random DeepSpec-format DSpark drafters and their goldens.

Output: tests/goldens/dspark_synth/<variant>/ with config.json + model.safetensors (written by hand:
u64 LE header length, JSON header padded with spaces to a multiple of 8, packed LE data), optional
target_embed.json/.bin (the target's raw [V, H] f32 table, for variants that take embed_tokens /
lm_head from the target), and golden.json/golden.bin produced by scripts/dspark_ref.py (float64).
Formats: tests/goldens/dspark_synth/README.md and docs/DSPARK-CHECKPOINT.md.

Deterministic: fixed seeds, no time stamps. Usage: venv/bin/python scripts/make_synthetic_dspark.py
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dspark_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "goldens", "dspark_synth")

# Shared dimensions. H = 40 so that sqrt(H) = 6.3246 rounds to bf16 6.3125 (the rounding is visible).
H, NH, HD, NKV, I, V = 40, 4, 32, 1, 64, 192
N_LAYERS, N_TARGET_LAYERS, TAPS = 2, 6, [1, 3, 4]
GAMMA, MASK, RANK = 4, 4, 16
EPS, SOFTCAP = 1e-6, 30.0
V_DRAFT = 96
MIN_MARGIN = 0.3  # every drafted slot's top-1 minus top-2 corrected logit is at least this

VARIANTS = [
    # name, dtype, markov type, rank, confidence, conf uses markov, extras
    dict(name="a_vanilla_conf_bf16", dtype="BF16", markov="vanilla", rank=RANK, conf=True, conf_markov=True),
    dict(name="b_gated_conf_f32", dtype="F32", markov="gated", rank=RANK, conf=True, conf_markov=False,
         rope_theta=10000.0),
    dict(name="c_rnn_noconf_f16", dtype="F16", markov="rnn", rank=RANK, conf=False, conf_markov=False),
    dict(name="d_rank0_nosoftcap_bf16", dtype="BF16", markov="vanilla", rank=0, conf=True, conf_markov=False,
         softcap=None),
    dict(name="e_target_embed_bf16", dtype="BF16", markov="vanilla", rank=RANK, conf=True, conf_markov=True,
         target_embed=True, target_lm_head=True),
    dict(name="f_d2t_bf16", dtype="BF16", markov="vanilla", rank=RANK, conf=True, conf_markov=True,
         target_embed=True, d2t=True),
]

# (case name, prefill rows, then (kAccept) per later round). Each round drafts once; a commit keeps
# anchor + kAccept drafts (kAccept + 1 rows) and the next anchor is a fresh "correction" token.
CASES = [
    ("ctx1", 1, []),
    ("ctx5", 5, []),
    ("ctx13", 13, []),
    ("commit", 5, [2, 0, GAMMA]),
]
TAP_SCALES = [1.0, 4.0, 0.25]  # per tapped layer, so a per-tap normalisation bug shows


# --------------------------------------------------------------------------------------------
# safetensors writer


def encode(arr: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return dspark_ref.f32_to_bf16_bits(arr.astype(np.float32)).astype("<u2").tobytes()
    if dtype == "F32":
        return arr.astype("<f4").tobytes()
    if dtype == "F16":
        return arr.astype("<f2").tobytes()
    if dtype == "I64":
        return arr.astype("<i8").tobytes()
    raise ValueError(dtype)


ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}


def write_safetensors(path: str, tensors: dict[str, tuple[np.ndarray, str]]) -> None:
    # Largest element size first, then by name: every tensor starts aligned to its element size
    # (header is padded to a multiple of 8) and the data region has no holes.
    names = sorted(tensors, key=lambda n: (-ITEMSIZE[tensors[n][1]], n))
    header: dict = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for n in names:
        arr, dt = tensors[n]
        b = encode(arr, dt)
        header[n] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


# --------------------------------------------------------------------------------------------
# checkpoint


def make_config(v: dict) -> dict:
    torch_dtype = {"BF16": "bfloat16", "F32": "float32", "F16": "float16"}[v["dtype"]]
    cfg = {
        "architectures": ["Gemma4DSparkModel"],
        "model_type": "gemma4_text",
        "hidden_size": H,
        "num_attention_heads": NH,
        "global_head_dim": HD,
        "num_global_key_value_heads": NKV,
        # Inherited sliding-attention fields of the target text_config: unused by the drafter
        # (all its layers are full_attention). Deliberately different from the global ones.
        "head_dim": 16,
        "num_key_value_heads": 2,
        "sliding_window": 512,
        "intermediate_size": I,
        "vocab_size": V,
        "num_hidden_layers": N_LAYERS,
        "num_target_layers": N_TARGET_LAYERS,
        "attention_k_eq_v": True,
        "attention_bias": False,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": EPS,
        "final_logit_softcapping": v.get("softcap", SOFTCAP),
        "block_size": GAMMA,
        "mask_token_id": MASK,
        "target_layer_ids": TAPS,
        "num_anchors": 16,
        "markov_rank": v["rank"],
        "markov_head_type": v["markov"],
        "enable_confidence_head": v["conf"],
        "confidence_head_with_markov": v["conf_markov"],
        "rope_parameters": {
            "full_attention": {
                "rope_type": "proportional",
                "rope_theta": v.get("rope_theta", 1000000.0),
                "partial_rotary_factor": 0.25,
            },
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
        "layer_types": ["full_attention"] * N_LAYERS,
        "tie_word_embeddings": False,
        "enable_moe_block": False,
        "hidden_size_per_layer_input": 0,
        "max_position_embeddings": 4096,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
        "target_model_type": "gemma4",
        "target_text_model_type": "gemma4_text",
        "torch_dtype": torch_dtype,
        "dspark_synthetic": {"generator": "scripts/make_synthetic_dspark.py", "variant": v["name"]},
    }
    if v.get("d2t"):
        cfg["draft_vocab_size"] = V_DRAFT
    return cfg


def make_weights(v: dict, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def nrm(shape, std, mean=0.0):
        return (mean + std * rng.standard_normal(shape)).astype(np.float32)

    r, m = v["rank"], len(TAPS)
    vd = V_DRAFT if v.get("d2t") else V
    w: dict[str, np.ndarray] = {}
    if not v.get("target_embed"):
        w["embed_tokens.weight"] = nrm((V, H), 0.15)  # * 6.3125 -> rms ~1
    w["fc.weight"] = nrm((H, m * H), 1.0 / math.sqrt(m * H))
    w["hidden_norm.weight"] = nrm((H,), 0.2, 1.0)
    w["norm.weight"] = nrm((H,), 0.2, 1.0)
    if not v.get("target_lm_head"):
        w["lm_head.weight"] = nrm((vd, H), 5.0 / math.sqrt(H))  # logits std ~5 before softcap
    for l in range(N_LAYERS):
        p = f"layers.{l}."
        w[p + "self_attn.q_proj.weight"] = nrm((NH * HD, H), 1.0 / math.sqrt(H))
        w[p + "self_attn.k_proj.weight"] = nrm((NKV * HD, H), 1.0 / math.sqrt(H))
        w[p + "self_attn.o_proj.weight"] = nrm((H, NH * HD), 1.0 / math.sqrt(NH * HD))
        # q.k with unit-rms q, k has std sqrt(hd) = 5.7; norm weights ~0.45 give logits std ~1.2.
        w[p + "self_attn.q_norm.weight"] = nrm((HD,), 0.1, 0.45)
        w[p + "self_attn.k_norm.weight"] = nrm((HD,), 0.1, 0.45)
        w[p + "input_layernorm.weight"] = nrm((H,), 0.2, 1.0)
        w[p + "post_attention_layernorm.weight"] = nrm((H,), 0.2, 0.8)
        w[p + "pre_feedforward_layernorm.weight"] = nrm((H,), 0.2, 1.0)
        w[p + "post_feedforward_layernorm.weight"] = nrm((H,), 0.2, 0.8)
        w[p + "mlp.gate_proj.weight"] = nrm((I, H), 1.0 / math.sqrt(H))
        w[p + "mlp.up_proj.weight"] = nrm((I, H), 1.0 / math.sqrt(H))
        w[p + "mlp.down_proj.weight"] = nrm((H, I), 1.0 / math.sqrt(I))
        # Not 1 (the trained value is a buffer init 1): makes a missing multiply visible.
        w[p + "layer_scalar"] = np.array([[0.75, 1.25][l % 2]], dtype=np.float32)
    if r > 0:
        w["markov_head.markov_w1.weight"] = nrm((V, r), 1.0)  # indexed by target ids
        w["markov_head.markov_w2.weight"] = nrm((vd, r), 0.6)  # bias std ~2.4
        if v["markov"] == "gated":
            w["markov_head.gate_proj.weight"] = nrm((r, H + r), 1.5 / math.sqrt(H + r))
            w["markov_head.gate_proj.bias"] = nrm((r,), 0.3)
        elif v["markov"] == "rnn":
            w["markov_head.joint_proj.weight"] = nrm((3 * r, 2 * r + H), 1.5 / math.sqrt(2 * r + H))
            w["markov_head.joint_proj.bias"] = nrm((3 * r,), 0.3)
    if v["conf"]:
        fin = H + (r if v["conf_markov"] else 0)
        w["confidence_head.proj.weight"] = nrm((1, fin), 1.5 / math.sqrt(fin))
        w["confidence_head.proj.bias"] = nrm((1,), 0.3)
    if v.get("d2t"):
        w["d2t"] = np.sort(rng.choice(V, size=V_DRAFT, replace=False)).astype(np.int64)
    return w


# --------------------------------------------------------------------------------------------
# goldens


class Blob:
    def __init__(self):
        self.parts: list[bytes] = []
        self.off = 0

    def add(self, arr, dtype: str) -> dict:
        a = np.asarray(arr, dtype={"f32": "<f4", "i32": "<i4"}[dtype])
        b = a.tobytes()
        d = {"offset": self.off, "dtype": dtype, "shape": list(a.shape)}
        self.parts.append(b)
        self.off += len(b)
        return d


def make_taps(rng, n: int) -> np.ndarray:
    cols = [rng.standard_normal((n, H)) * s for s in TAP_SCALES]
    return np.concatenate(cols, axis=1).astype(np.float32)


def pick_anchor(ref, st, rng, avoid: set[int]):
    """First random anchor (deterministic order) whose drafted slots all have a clear argmax
    (top-1 minus top-2 >= MIN_MARGIN), preferring drafts with >= 3 distinct tokens."""
    fallback = None
    for _ in range(400):
        x0 = int(rng.integers(5, V))  # ids 0..4 are special (pad/eos/bos/?/mask)
        if x0 in avoid:
            continue
        out = ref.draft(st, x0)
        gap = min(dspark_ref.top2_gap(row) for row in out["S"])
        if gap < MIN_MARGIN:
            continue
        if len(set(out["tokens"])) >= 3:
            return x0, out, gap
        if fallback is None:
            fallback = (x0, out, gap)
    if fallback is None:
        raise RuntimeError(f"no anchor with margin >= {MIN_MARGIN}")
    return fallback


def draft_step(ref, st, x0, out, gap, blob, last: bool) -> dict:
    arrays = {
        "tokens": blob.add(out["tokens"], "i32"),
        "base_logits": blob.add(out["U"], "f32"),
        "logits": blob.add(out["S"], "f32"),
        "hidden": blob.add(out["h"], "f32"),
    }
    if last:  # context rows never change once appended: the last step's K/V covers every earlier one
        arrays["layer0_ctx_k"] = blob.add(st.ctx_k[0], "f32")
        arrays["layer0_ctx_v"] = blob.add(st.ctx_v[0], "f32")
    step = {
        "op": "draft",
        "pos": st.ctx_len,
        "anchor": x0,
        "tokens": out["tokens"],
        "prev_seq": out["prev_seq"],
        "min_margin": round(gap, 4),
    }
    if "confidence" in out:
        arrays["conf_logits"] = blob.add(out["conf_logits"], "f32")
        arrays["confidence"] = blob.add(out["confidence"], "f32")
        step["confidence"] = [float(str(np.float32(c))) for c in out["confidence"]]  # shortest f32 repr
    step["arrays"] = arrays
    return step


def top1_prob(out) -> np.ndarray:
    """Health of the random weights: peakiness of the Markov-corrected draft softmaxes."""
    p = np.exp(out["S"] - out["S"].max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p.max(-1)


def compact_json(obj) -> str:
    """Indented JSON with lists of numbers and array descriptors kept on one line."""
    text = json.dumps(obj, indent=1)
    text = re.sub(r"\[\s+([-0-9.e, \n]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    text = re.sub(r'\{\s+("offset": [0-9]+,)\s+("dtype": "[a-z0-9]+",)\s+("shape": \[[0-9, ]*\])\s+\}',
                  lambda m: "{" + " ".join(m.groups()) + "}", text)
    return text + "\n"


def make_goldens(vdir: str, v: dict, target_embed, summary: list) -> None:
    ref = dspark_ref.DSparkRef(vdir, target_embed)
    blob = Blob()
    cases = []
    top1 = []
    for ci, (cname, n_prefill, rounds) in enumerate(CASES):
        # Taps depend only on the case (same across variants); anchors depend on the variant.
        trng = np.random.default_rng(1000 + ci)
        arng = np.random.default_rng(2000 + 31 * ci + VARIANTS.index(v))
        st = ref.new_state()
        steps = []
        taps = make_taps(trng, n_prefill)
        ref.prefill(st, taps)
        steps.append({"op": "prefill", "pos": 0, "n_rows": n_prefill, "taps": blob.add(taps, "f32")})
        all_taps = [taps]
        x0, out, gap = pick_anchor(ref, st, arng, set())
        steps.append(draft_step(ref, st, x0, out, gap, blob, last=not rounds))
        top1.append(top1_prob(out))
        for ri, k_acc in enumerate(rounds):
            committed = [x0] + out["tokens"][:k_acc]
            wt = make_taps(trng, k_acc + 1)
            pos = st.ctx_len
            ref.commit(st, wt)
            all_taps.append(wt)
            steps.append({"op": "commit", "pos": pos, "k_accept": k_acc, "committed": committed,
                          "n_rows": k_acc + 1, "taps": blob.add(wt, "f32")})
            # incremental context == recomputation from all taps (row-wise norms/RoPE)
            full = ref.project_context(np.concatenate(all_taps), 0)
            for l in range(ref.n_layers):
                assert np.allclose(full[l][0], st.ctx_k[l], atol=1e-12)
                assert np.allclose(full[l][1], st.ctx_v[l], atol=1e-12)
            # next anchor = the target's correction (any token but the rejected draft) or bonus
            avoid = {out["tokens"][k_acc]} if k_acc < GAMMA else set()
            x0, out, gap = pick_anchor(ref, st, arng, avoid)
            steps.append(draft_step(ref, st, x0, out, gap, blob, last=ri == len(rounds) - 1))
            top1.append(top1_prob(out))
        cases.append({"name": cname, "steps": steps})
        summary.append(
            f"  {v['name']:<24} {cname:<7} "
            + " | ".join(f"P={s['pos']:>2} x0={s['anchor']:>3} -> {s['tokens']} gap {s['min_margin']:.2f}"
                         + (f" c={[round(c, 2) for c in s['confidence']]}" if 'confidence' in s else "")
                         for s in steps if s["op"] == "draft")
        )
    top1 = np.concatenate(top1)
    golden = {
        "format": "dspark_synth_golden",
        "version": 1,
        "variant": v["name"],
        "reference": "scripts/dspark_ref.py (float64 from the decoded stored weights)",
        "bin": "golden.bin",
        "dims": {"H": H, "nH": NH, "nKV": NKV, "hd": HD, "I": I, "V": V, "V_draft": ref.Vd, "gamma": GAMMA,
                 "m": len(TAPS), "r": v["rank"], "n_layers": N_LAYERS},
        "embed_scale": ref.embed_scale,
        "n_rot": int(np.count_nonzero(ref.inv_freq)),
        "precision": [
            "float64 everywhere from the stored (bf16/f16/f32) weights and f32 taps",
            "exception: embed_scale = bf16(sqrt(H)) (docs/DSPARK-CHECKPOINT.md §4)",
            "deviation: DeepSpec adds the Markov bias and takes the argmax in bf16 and runs the confidence "
            "Linear in bf16; here both are float64. Every draft slot has "
            f"top1-top2 >= {MIN_MARGIN} in 'logits' (min_margin per step) so the argmax is robust",
        ],
        "stats": {"draft_top1_prob_min": round(float(top1.min()), 3),
                  "draft_top1_prob_median": round(float(np.median(top1)), 3),
                  "draft_top1_prob_max": round(float(top1.max()), 3)},
        "cases": cases,
    }
    if target_embed is not None:
        golden["target_embed"] = "target_embed.json"
    with open(os.path.join(vdir, "golden.bin"), "wb") as f:
        for b in blob.parts:
            f.write(b)
    with open(os.path.join(vdir, "golden.json"), "w") as f:
        f.write(compact_json(golden))


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    # The "target" embedding table of the small-target variants (raw, unscaled; tied lm_head).
    target_embed = (np.random.default_rng(77).standard_normal((V, H)) * 0.2).astype(np.float32)
    summary = []
    for vi, v in enumerate(VARIANTS):
        vdir = os.path.join(OUT, v["name"])
        if os.path.isdir(vdir):
            shutil.rmtree(vdir)
        os.makedirs(vdir)
        with open(os.path.join(vdir, "config.json"), "w") as f:
            json.dump(make_config(v), f, indent=2)
            f.write("\n")
        te = target_embed if v.get("target_embed") else None
        w = make_weights(v, 100 + vi)
        write_safetensors(os.path.join(vdir, "model.safetensors"),
                          {n: (a, "I64" if n == "d2t" else v["dtype"]) for n, a in w.items()})
        if te is not None:
            te.astype("<f4").tofile(os.path.join(vdir, "target_embed.bin"))
            with open(os.path.join(vdir, "target_embed.json"), "w") as f:
                json.dump({"file": "target_embed.bin", "dtype": "f32", "shape": [V, H],
                           "meaning": "target token embedding table, raw (unscaled); the target ties "
                                      "lm_head to it"}, f, indent=1)
                f.write("\n")
        make_goldens(vdir, v, te.astype(np.float64) if te is not None else None, summary)
        err = dspark_ref.check_dir(vdir)  # re-read everything from disk
        assert err < 1e-5, (v["name"], err)
    total = 0
    print("DSpark synthetic drafters ->", os.path.relpath(OUT, ROOT))
    for v in VARIANTS:
        vdir = os.path.join(OUT, v["name"])
        sz = {f: os.path.getsize(os.path.join(vdir, f)) for f in sorted(os.listdir(vdir))}
        total += sum(sz.values())
        print(f"{v['name']}: " + ", ".join(f"{f} {s / 1024:.1f}K" for f, s in sz.items()))
    print("\n".join(summary))
    print(f"total {total / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
