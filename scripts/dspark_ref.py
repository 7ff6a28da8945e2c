"""Independent NumPy reference of the DeepSpec `Gemma4DSparkModel` drafter forward.

Written from the DeepSpec DSpark method description (the forward math of docs/DSPARK-ENGINE.md and the format of docs/DSPARK-CHECKPOINT.md),
not from the C++ engine. It reads a checkpoint directory (config.json + model.safetensors, parsed
here by hand) and runs the drafter the way a request does (docs/DSPARK-ENGINE.md, 'A round'):

    st = ref.new_state()
    ref.prefill(st, taps)            # taps [Lp, m*H] f32, columns in target_layer_ids order
    out = ref.draft(st, x0)          # anchor at position st.ctx_len; gamma greedy tokens
    ref.commit(st, window_taps)      # rows anchor + accepted drafts, positions ctx_len.. ; appended

Precision: everything in float64 from the decoded stored weights, except the embedding scale, which
is sqrt(H) rounded to bf16 (docs/DSPARK-CHECKPOINT.md §4). The Markov add, the argmax and the
confidence Linear are float64 here, while DeepSpec runs them in bf16; the golden
generator only keeps cases whose top-1/top-2 gap is large enough for that not to matter.

Small-target extensions (docs/DSPARK-CHECKPOINT.md): `embed_tokens.weight` / `lm_head.weight` may be
absent (taken from the target: pass `target_embed`, the target's raw [V, H] table, which is also
its tied output matrix), and an int64 `d2t` [V_draft] maps draft-vocab indices to target ids.

CLI: `python scripts/dspark_ref.py CHECKPOINT_DIR` recomputes that directory's golden.json/golden.bin
(if present) and reports the largest differences.
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys
from dataclasses import dataclass, field

import numpy as np

# --------------------------------------------------------------------------------------------
# bf16 / safetensors


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16 (upper 16 bits). No NaN handling (not needed here)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def round_bf16(x) -> np.ndarray:
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


_ST_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
}


def read_safetensors(path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Returns {name: array} (floats decoded to float64, ints kept as int64) and __metadata__."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8 : 8 + n].decode("utf-8"))
    data = memoryview(buf)[8 + n :]
    meta = header.pop("__metadata__", None) or {}
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        dt = _ST_DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        arr = np.frombuffer(data[b:e], dtype=dt).reshape(shape)
        if info["dtype"] == "BF16":
            arr = bf16_bits_to_f32(arr).astype(np.float64)
        elif info["dtype"] in ("F64", "F32", "F16"):
            arr = arr.astype(np.float64)
        else:
            arr = arr.astype(np.int64)
        out[name] = arr
    return out, meta


def read_raw_array(json_path: str) -> np.ndarray:
    """A {"file", "dtype": "f32", "shape"} sidecar + raw little-endian file (target_embed.json)."""
    with open(json_path) as f:
        d = json.load(f)
    assert d["dtype"] == "f32"
    arr = np.fromfile(os.path.join(os.path.dirname(json_path), d["file"]), dtype="<f4")
    return arr.reshape(d["shape"]).astype(np.float64)


# --------------------------------------------------------------------------------------------
# primitives


def rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    """Gemma4 RMSNorm over the last axis: x * (mean(x^2) + eps)^-1/2 * w  (w used directly, no 1+w)."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rope_inv_freq(hd: int, theta: float, factor: float) -> np.ndarray:
    """Proportional partial RoPE: n_rot = int(factor*hd // 2) live pairs, exponent over the full hd."""
    n_rot = int(factor * hd // 2)
    inv = np.zeros(hd // 2, dtype=np.float64)
    i = np.arange(n_rot, dtype=np.float64)
    inv[:n_rot] = theta ** (-2.0 * i / hd)
    return inv


def apply_rope(x: np.ndarray, pos: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """x [n, heads, hd], pos [n]; rotate-half pairs (j, j + hd/2)."""
    half = x.shape[-1] // 2
    phi = pos.astype(np.float64)[:, None] * inv_freq[None, :]  # [n, hd/2]
    c = np.cos(phi)[:, None, :]
    s = np.sin(phi)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


# --------------------------------------------------------------------------------------------
# model


@dataclass
class DrafterState:
    """Per-request drafter state (docs/DSPARK-ENGINE.md, 'A round'): per-layer context K/V [nKV, ctx_len, hd]."""

    ctx_k: list = field(default_factory=list)
    ctx_v: list = field(default_factory=list)
    ctx_len: int = 0


def _rope_params(cfg: dict) -> tuple[float, float]:
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict) and isinstance(rp.get("full_attention"), dict):
        rp = rp["full_attention"]
    if isinstance(rp, dict) and ("rope_theta" in rp or "partial_rotary_factor" in rp):
        return float(rp.get("rope_theta", 1e6)), float(rp.get("partial_rotary_factor", 1.0))
    return float(cfg.get("rope_theta", 1e6)), float(cfg.get("partial_rotary_factor", 1.0))


class DSparkRef:
    def __init__(self, ckpt_dir: str, target_embed: np.ndarray | None = None):
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            cfg = json.load(f)
        self.cfg = cfg
        assert cfg["architectures"][0] == "Gemma4DSparkModel"
        assert cfg.get("attention_k_eq_v", False), "only k_eq_v is implemented"
        assert cfg["hidden_activation"] == "gelu_pytorch_tanh"
        w, _ = read_safetensors(os.path.join(ckpt_dir, "model.safetensors"))
        self.w = w
        self.H = cfg["hidden_size"]
        self.nH = cfg["num_attention_heads"]
        self.hd = cfg["global_head_dim"]
        self.nKV = cfg["num_global_key_value_heads"]
        self.I = cfg["intermediate_size"]
        self.V = cfg["vocab_size"]
        self.n_layers = cfg["num_hidden_layers"]
        self.eps = float(cfg["rms_norm_eps"])
        self.softcap = cfg.get("final_logit_softcapping")
        self.gamma = cfg["block_size"]
        self.mask_id = cfg["mask_token_id"]
        self.tap_ids = list(cfg["target_layer_ids"])
        assert all(a < b for a, b in zip(self.tap_ids, self.tap_ids[1:]))
        self.m = len(self.tap_ids)
        self.r = int(cfg.get("markov_rank", 0))
        self.markov_type = cfg.get("markov_head_type", "vanilla")
        self.conf_enabled = bool(cfg.get("enable_confidence_head", False))
        self.conf_markov = bool(cfg.get("confidence_head_with_markov", False)) and self.r > 0
        theta, factor = _rope_params(cfg)
        self.inv_freq = rope_inv_freq(self.hd, theta, factor)
        # Embedding scale: sqrt(H) cast to bf16 (docs/DSPARK-CHECKPOINT.md §4), whatever the weight dtype.
        self.embed_scale = float(round_bf16([math.sqrt(self.H)])[0])

        if "embed_tokens.weight" in w:
            self.embed = w["embed_tokens.weight"]
        else:
            assert target_embed is not None, "embed_tokens absent: need the target table"
            self.embed = target_embed
        if "d2t" in w:
            self.d2t = w["d2t"].astype(np.int64)
            assert len(np.unique(self.d2t)) == len(self.d2t)
            assert self.d2t.min() >= 0 and self.d2t.max() < self.V
        else:
            self.d2t = None
        if "lm_head.weight" in w:
            self.lm_head = w["lm_head.weight"]
        else:
            assert self.d2t is None, "lm_head absent with d2t is not defined"
            assert target_embed is not None, "lm_head absent: need the target's (tied) table"
            self.lm_head = target_embed
        self.Vd = self.lm_head.shape[0]
        assert self.embed.shape == (self.V, self.H)
        assert self.lm_head.shape == (self.V if self.d2t is None else len(self.d2t), self.H)

    # ---- context (docs/DSPARK-ENGINE.md, 'A round')

    def project_context(self, taps: np.ndarray, pos0: int):
        """taps [n, m*H] -> per layer (K [nKV, n, hd], V [nKV, n, hd]) at positions pos0.."""
        w = self.w
        taps = np.asarray(taps, dtype=np.float64)
        assert taps.ndim == 2 and taps.shape[1] == self.m * self.H
        n = taps.shape[0]
        pos = np.arange(pos0, pos0 + n)
        ctx = rms_norm(taps @ w["fc.weight"].T, w["hidden_norm.weight"], self.eps)  # [n, H]
        out = []
        for l in range(self.n_layers):
            p = f"layers.{l}.self_attn."
            kraw = (ctx @ w[p + "k_proj.weight"].T).reshape(n, self.nKV, self.hd)  # no input_layernorm
            v = rms_norm(kraw, None, self.eps)  # k_eq_v: V before k_norm, not roped
            k = apply_rope(rms_norm(kraw, w[p + "k_norm.weight"], self.eps), pos, self.inv_freq)
            out.append((k.transpose(1, 0, 2), v.transpose(1, 0, 2)))
        return out

    def new_state(self) -> DrafterState:
        st = DrafterState()
        st.ctx_k = [np.zeros((self.nKV, 0, self.hd)) for _ in range(self.n_layers)]
        st.ctx_v = [np.zeros((self.nKV, 0, self.hd)) for _ in range(self.n_layers)]
        return st

    def _append(self, st: DrafterState, taps: np.ndarray) -> None:
        kv = self.project_context(taps, st.ctx_len)
        for l, (k, v) in enumerate(kv):
            st.ctx_k[l] = np.concatenate([st.ctx_k[l], k], axis=1)
            st.ctx_v[l] = np.concatenate([st.ctx_v[l], v], axis=1)
        st.ctx_len += taps.shape[0]

    def prefill(self, st: DrafterState, taps: np.ndarray) -> None:
        assert st.ctx_len == 0
        self._append(st, taps)

    def commit(self, st: DrafterState, window_taps: np.ndarray) -> None:
        """window_taps = the kAccept+1 kept rows (anchor + accepted drafts); positions ctx_len.."""
        self._append(st, window_taps)

    # ---- block forward (docs/DSPARK-ENGINE.md, 'A round', block layer)

    def backbone(self, st: DrafterState, x0: int) -> np.ndarray:
        w, g, eps = self.w, self.gamma, self.eps
        P = st.ctx_len
        ids = np.array([x0] + [self.mask_id] * (g - 1))
        pos = np.arange(P, P + g)
        h = self.embed[ids] * self.embed_scale  # [g, H]
        for l in range(self.n_layers):
            p = f"layers.{l}."
            a = p + "self_attn."
            x = rms_norm(h, w[p + "input_layernorm.weight"], eps)
            q = (x @ w[a + "q_proj.weight"].T).reshape(g, self.nH, self.hd)
            q = apply_rope(rms_norm(q, w[a + "q_norm.weight"], eps), pos, self.inv_freq)
            kraw = (x @ w[a + "k_proj.weight"].T).reshape(g, self.nKV, self.hd)
            v_blk = rms_norm(kraw, None, eps)
            k_blk = apply_rope(rms_norm(kraw, w[a + "k_norm.weight"], eps), pos, self.inv_freq)
            K = np.concatenate([st.ctx_k[l], k_blk.transpose(1, 0, 2)], axis=1)  # [nKV, ctx+g, hd]
            V = np.concatenate([st.ctx_v[l], v_blk.transpose(1, 0, 2)], axis=1)
            att = np.empty((g, self.nH, self.hd))
            grp = self.nH // self.nKV
            for hh in range(self.nH):
                kv = hh // grp
                sc = q[:, hh, :] @ K[kv].T * 1.0  # scale 1.0, no mask
                sc = sc - sc.max(axis=-1, keepdims=True)
                pr = np.exp(sc)
                pr /= pr.sum(axis=-1, keepdims=True)
                att[:, hh, :] = pr @ V[kv]
            o = att.reshape(g, self.nH * self.hd) @ w[a + "o_proj.weight"].T
            h = h + rms_norm(o, w[p + "post_attention_layernorm.weight"], eps)
            f = rms_norm(h, w[p + "pre_feedforward_layernorm.weight"], eps)
            mp = p + "mlp."
            mlp = (gelu_tanh(f @ w[mp + "gate_proj.weight"].T) * (f @ w[mp + "up_proj.weight"].T)) @ w[
                mp + "down_proj.weight"
            ].T
            h = h + rms_norm(mlp, w[p + "post_feedforward_layernorm.weight"], eps)
            h = h * w[p + "layer_scalar"][0]  # whole layer output, residual included
        return rms_norm(h, w["norm.weight"], eps)

    def base_logits(self, h: np.ndarray) -> np.ndarray:
        z = h @ self.lm_head.T
        if self.softcap:
            z = self.softcap * np.tanh(z / self.softcap)
        return z

    # ---- sequential stage + confidence (docs/DSPARK-CHECKPOINT.md §4)

    def draft(self, st: DrafterState, x0: int) -> dict:
        w = self.w
        h = self.backbone(st, x0)
        U = self.base_logits(h)  # [g, Vd]
        S = np.empty_like(U)
        toks, prev_seq = [], []
        prev = int(x0)
        s_rnn = np.zeros(self.r)
        for k in range(self.gamma):
            prev_seq.append(prev)
            if self.r > 0:
                e = w["markov_head.markov_w1.weight"][prev]  # [r], indexed by TARGET id
                w2 = w["markov_head.markov_w2.weight"]  # [Vd, r]
                if self.markov_type == "vanilla":
                    bias = w2 @ e
                elif self.markov_type == "gated":
                    gin = np.concatenate([h[k], e])  # [h_k ; W1[prev]]
                    gate = sigmoid(w["markov_head.gate_proj.weight"] @ gin + w["markov_head.gate_proj.bias"])
                    bias = w2 @ (gate * e)
                elif self.markov_type == "rnn":
                    z = np.concatenate([s_rnn, e, h[k]])  # [s_{k-1} ; W1[prev] ; h_k]
                    y = w["markov_head.joint_proj.weight"] @ z + w["markov_head.joint_proj.bias"]
                    r = self.r
                    gt, cand, outp = y[:r], y[r : 2 * r], y[2 * r :]  # split [gate; candidate; output]
                    gt = sigmoid(gt)
                    s_rnn = gt * s_rnn + (1.0 - gt) * np.tanh(cand)
                    bias = w2 @ np.tanh(outp)
                else:
                    raise ValueError(self.markov_type)
                S[k] = U[k] + bias
            else:
                S[k] = U[k]
            j = int(np.argmax(S[k]))
            tok = int(self.d2t[j]) if self.d2t is not None else j
            toks.append(tok)
            prev = tok
        out = {"h": h, "U": U, "S": S, "tokens": toks, "prev_seq": prev_seq}
        if self.conf_enabled:
            pw = w["confidence_head.proj.weight"][0]
            pb = w["confidence_head.proj.bias"][0]
            z = np.empty(self.gamma)
            for k in range(self.gamma):
                feat = h[k]
                if self.conf_markov:
                    feat = np.concatenate([h[k], w["markov_head.markov_w1.weight"][prev_seq[k]]])
                z[k] = pw @ feat + pb
            out["conf_logits"] = z
            out["confidence"] = sigmoid(z)
        return out


def top2_gap(row: np.ndarray) -> float:
    s = np.sort(row)
    return float(s[-1] - s[-2])


# --------------------------------------------------------------------------------------------
# golden reader / checker


def load_golden(ckpt_dir: str):
    with open(os.path.join(ckpt_dir, "golden.json")) as f:
        g = json.load(f)
    blob = open(os.path.join(ckpt_dir, g["bin"]), "rb").read()

    def arr(desc):
        dt = {"f32": "<f4", "i32": "<i4"}[desc["dtype"]]
        n = int(np.prod(desc["shape"])) if desc["shape"] else 1
        return np.frombuffer(blob, dtype=dt, count=n, offset=desc["offset"]).reshape(desc["shape"])

    return g, arr


def check_dir(ckpt_dir: str) -> float:
    g, arr = load_golden(ckpt_dir)
    te = None
    if "target_embed" in g:
        te = read_raw_array(os.path.join(ckpt_dir, g["target_embed"]))
    ref = DSparkRef(ckpt_dir, te)
    worst = 0.0
    for case in g["cases"]:
        st = ref.new_state()
        for step in case["steps"]:
            if step["op"] == "prefill":
                ref.prefill(st, arr(step["taps"]))
            elif step["op"] == "commit":
                assert step["pos"] == st.ctx_len
                ref.commit(st, arr(step["taps"]))
            else:
                assert step["pos"] == st.ctx_len
                out = ref.draft(st, step["anchor"])
                assert out["tokens"] == step["tokens"], (case["name"], out["tokens"], step["tokens"])
                a = step["arrays"]
                diffs = [
                    np.abs(out["U"] - arr(a["base_logits"])).max(),
                    np.abs(out["S"] - arr(a["logits"])).max(),
                    np.abs(out["h"] - arr(a["hidden"])).max(),
                ]
                if "layer0_ctx_k" in a:
                    diffs.append(np.abs(st.ctx_k[0] - arr(a["layer0_ctx_k"])).max())
                    diffs.append(np.abs(st.ctx_v[0] - arr(a["layer0_ctx_v"])).max())
                if "confidence" in a:
                    diffs.append(np.abs(out["confidence"] - arr(a["confidence"])).max())
                    diffs.append(np.abs(out["conf_logits"] - arr(a["conf_logits"])).max())
                worst = max(worst, max(float(d) for d in diffs))
    return worst


if __name__ == "__main__":
    for d in sys.argv[1:]:
        print(f"{d}: max |ref - golden| = {check_dir(d):.3g}")
