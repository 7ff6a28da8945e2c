#!/usr/bin/env python3
"""Golden file for the MLX affine quantizer (src/quant/affine.cpp), from an independent NumPy
transcription of MLX's CPU `quantize` (ml-explore/mlx mlx/backend/cpu/quantized.cpp; docs/QUANT-FORMAT.md §1):

    n_bins = 2^bits - 1; s = max((w_max - w_min) / n_bins, 1e-7)           (float32 throughout)
    |w_min| > |w_max| ? edge = w_min : (edge = w_max, s = -s)
    q0 = rint(edge / s); q0 != 0 ? (s = edge / q0, b = edge) : b = 0
    code = clip(rint((w - b) / s), 0, n_bins); scale, bias stored in the weight's dtype

rint = numpy.rint (round half to even, as std::rint on the CPU). Codes are packed as one
little-endian LSB-first bit stream per row (numpy.packbits bitorder="little") and viewed as uint32.

Writes tests/goldens/quant/affine_golden.safetensors and tests/goldens/quant/PROVENANCE.md.
Usage: venv/bin/python scripts/gen_quant_goldens.py
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "goldens", "quant")
SEED = 20261129
BITS = [2, 3, 4, 5, 6, 8]
GROUPS = [32, 64, 128]
COLS = 256


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (MLX's bfloat16 cast; no NaN in these inputs)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def mlx_quantize(w: np.ndarray, bits: int, g: int):
    """w float32 [rows, cols] -> codes uint8 [rows, cols], scale / bias float32 [rows, cols // g]."""
    rows, cols = w.shape
    W = w.reshape(-1, g).astype(np.float32)
    n_bins = np.float32(2**bits - 1)
    w_max, w_min = W.max(axis=1), W.min(axis=1)
    mask = np.abs(w_min) > np.abs(w_max)
    scale = np.maximum((w_max - w_min) / n_bins, np.float32(1e-7)).astype(np.float32)
    scale = np.where(mask, scale, -scale).astype(np.float32)
    edge = np.where(mask, w_min, w_max).astype(np.float32)
    q0 = np.rint(edge / scale).astype(np.float32)
    nz = q0 != 0
    scale = np.where(nz, edge / np.where(nz, q0, np.float32(1)), scale).astype(np.float32)
    bias = np.where(nz, edge, np.float32(0)).astype(np.float32)
    codes = np.clip(np.rint((W - bias[:, None]) / scale[:, None]), 0, n_bins).astype(np.uint8)
    return codes.reshape(rows, cols), scale.reshape(rows, -1), bias.reshape(rows, -1)


def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    rows, cols = codes.shape
    bitplanes = (codes[:, :, None].astype(np.uint32) >> np.arange(bits, dtype=np.uint32)) & 1
    packed = np.packbits(bitplanes.reshape(rows, cols * bits).astype(np.uint8), axis=1, bitorder="little")
    return packed.view("<u4").reshape(rows, cols * bits // 32)


def inputs(rng: np.random.Generator):
    bf = np.zeros((4, COLS), np.float32)
    bf[0] = rng.normal(0, 0.02, COLS)
    sp = np.zeros(COLS, np.float32)  # eight special groups of 32
    sp[32:64] = 0.5                                       # constant
    sp[64:96] = np.linspace(-1, 1, 32)                    # symmetric span
    sp[96:128] = (rng.integers(-8, 9, 32) / 8.0)           # grid values: exact ties in (w - b) / s
    sp[128:160] = np.abs(rng.normal(0, 1, 32)) + 0.25      # positive only
    sp[160:192] = -np.abs(rng.normal(0, 1, 32)) - 0.25     # negative only
    sp[192:224] = rng.normal(0, 1e-9, 32)                  # below the 1e-7 scale floor
    m = rng.normal(0, 1, 16)
    sp[224:256] = np.concatenate([m, -m])                  # |w_min| == |w_max|
    bf[1] = sp
    bf[2] = rng.standard_t(3, COLS) * 0.05
    bf[3] = rng.uniform(-3, 3, COLS)
    bf = from_bf16_bits(to_bf16_bits(bf))                  # exactly representable in bf16
    f32 = np.zeros((2, COLS), np.float32)
    d = np.float16(rng.uniform(0.001, 0.01, COLS // 32)).astype(np.float32)  # Q8_0-like rows
    f32[0] = rng.integers(-127, 128, COLS).astype(np.float32) * np.repeat(d, 32)
    f32[1] = rng.normal(0, 1, COLS).astype(np.float32)
    return bf, f32


def write_safetensors(path: str, tensors: list[tuple[str, str, np.ndarray]]) -> None:
    size = {"F32": 4, "BF16": 2, "U32": 4}
    tensors = sorted(tensors, key=lambda t: (-size[t[1]], t[0]))
    header: dict = {"__metadata__": {"generator": "scripts/gen_quant_goldens.py"}}
    blobs, off = [], 0
    for name, dt, arr in tensors:
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def main() -> None:
    rng = np.random.default_rng(SEED)
    bf, f32 = inputs(rng)
    out: list[tuple[str, str, np.ndarray]] = [("input.bf16", "BF16", to_bf16_bits(bf)), ("input.f32", "F32", f32)]
    for bits in BITS:
        for g in GROUPS:
            for kind, w in (("bf16", bf), ("f32", f32)):
                codes, s, b = mlx_quantize(w, bits, g)
                pre = f"{kind}.b{bits}.g{g}"
                out.append((pre + ".weight", "U32", pack(codes, bits)))
                if kind == "bf16":
                    sb, bb = to_bf16_bits(s), to_bf16_bits(b)
                    out += [(pre + ".scales", "BF16", sb), (pre + ".biases", "BF16", bb)]
                    if g == 64:  # MLX dequantize: scale * code + bias in float32 from the stored values
                        deq = from_bf16_bits(np.repeat(sb, g, axis=1)) * codes.astype(np.float32) + \
                            from_bf16_bits(np.repeat(bb, g, axis=1))
                        out.append((pre + ".dequant", "F32", deq.astype(np.float32)))
                else:
                    out += [(pre + ".scales", "F32", s), (pre + ".biases", "F32", b)]
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, "affine_golden.safetensors")
    write_safetensors(path, out)
    with open(os.path.join(OUT_DIR, "PROVENANCE.md"), "w") as f:
        f.write("# Provenance of tests/goldens/quant\n\n"
                "Generated by `scripts/gen_quant_goldens.py` (the only writer of this directory); do not edit by hand.\n\n"
                f"- command: `{os.path.basename(sys.executable)} scripts/gen_quant_goldens.py`\n"
                f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S}\n"
                f"- python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}\n"
                f"- seed: {SEED} (numpy.random.default_rng)\n\n"
                "`affine_golden.safetensors`: `input.bf16` [4, 256] bf16 rows (Gaussian, eight special groups of 32:\n"
                "zeros, constant, symmetric span, ties on a 1/8 grid, positive only, negative only, below the 1e-7\n"
                "scale floor, |min| == |max|; Student-t(3); uniform) and `input.f32` [2, 256] (Q8_0-like, Gaussian).\n"
                "For bits in {2,3,4,5,6,8} and g in {32,64,128}: `<kind>.b<bits>.g<g>.weight` U32 packed codes,\n"
                "`.scales` / `.biases` (BF16 for bf16 input, F32 for f32 input, as MLX stores the weight dtype),\n"
                "and for bf16 input with g = 64 `.dequant` F32 (scale * code + bias).\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
