#!/usr/bin/env python3
"""Writes the GGUF fuzzer seed corpus: a few small valid files in tests/fuzz/corpus/ (each < 4 KB).

Usage: python3 tests/fuzz/gen_corpus.py [out_dir]   (standard library only; output is deterministic)
Layout per docs/GGUF.md: header, KV pairs, tensor infos, padding to ALIGNMENT, packed data.
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (block elements, block bytes)
DTYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
          "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
          "Q6_K": (14, 256, 210), "BF16": (30, 1, 2)}


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        return out + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR_FMT[t], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dtype name, ne list)] with deterministic data."""
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + value(t, v)
    offset, blobs = 0, []
    for i, (name, dt, ne) in enumerate(tensors):
        tid, be, bb = DTYPES[dt]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // be * bb
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        out += struct.pack("<IQ", tid, offset)
        blobs.append((offset, bytes((i * 31 + j * 7) & 0xFF for j in range(nbytes))))
        offset += nbytes + (alignment - nbytes % alignment) % alignment
    if tensors:
        out += b"\0" * ((alignment - len(out) % alignment) % alignment)
        start = len(out)
        for off, blob in blobs:
            out += b"\0" * (start + off - len(out)) + blob
    return out


def corpus():
    every_scalar = [("s.u8", U8, 200), ("s.i8", I8, -3), ("s.u16", U16, 60000), ("s.i16", I16, -300),
                    ("s.u32", U32, 4000000000), ("s.i32", I32, -7), ("s.f32", F32, 0.5), ("s.bool", BOOL, 1),
                    ("s.string", STRING, "h\u00e9llo"), ("s.u64", U64, 2**63), ("s.i64", I64, -2**40),
                    ("s.f64", F64, 1e-6)]
    every_array = [("a.%d" % t, ARRAY, (t, [1, 0, 2])) for t in (U8, I8, U16, I16, U32, I32, BOOL, U64, I64)]
    every_array += [("a.f32", ARRAY, (F32, [0.0, -1000.0])), ("a.f64", ARRAY, (F64, [2.5])),
                    ("a.string", ARRAY, (STRING, ["<pad>", "", "\u2581the"])), ("a.empty", ARRAY, (I32, []))]
    gemma = [("general.architecture", STRING, "gemma3"), ("general.file_type", U32, 15),
             ("gemma3.block_count", U32, 1), ("gemma3.embedding_length", U32, 32),
             ("gemma3.attention.layer_norm_rms_epsilon", F32, 1e-6),
             ("tokenizer.ggml.model", STRING, "llama"),
             ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<pad>", "<eos>", "<bos>", "<unk>", "a", "b"])),
             ("tokenizer.ggml.scores", ARRAY, (F32, [-1000.0] * 4 + [0.0, -1.0])),
             ("tokenizer.ggml.token_type", ARRAY, (I32, [3, 3, 3, 2, 1, 1])),
             ("tokenizer.ggml.bos_token_id", U32, 2), ("tokenizer.ggml.add_bos_token", BOOL, 1)]
    return {
        # Names carry no .gguf suffix: the repository's .gitignore excludes *.gguf.
        "empty": gguf([]),
        "scalars": gguf(every_scalar),
        "arrays": gguf(every_array),
        "v2_one_tensor": gguf([("general.name", STRING, "x")], [("t", "F32", [4])], version=2),
        "align64_types": gguf([("general.alignment", U32, 64)],
                                   [("f16", "F16", [8, 2]), ("bf16", "BF16", [4]), ("q4_0", "Q4_0", [32]),
                                    ("q4_1", "Q4_1", [32]), ("q5_1", "Q5_1", [32]), ("zero", "F32", [0, 3]),
                                    ("d4", "F32", [1, 2, 1, 2])], alignment=64),
        "kquants": gguf([], [("q4k", "Q4_K", [256]), ("q5k", "Q5_K", [256]), ("q6k", "Q6_K", [256])]),
        # A skeleton (formats/gguf_random.h): the tensor table in metadata, no tensors.
        "skeleton": gguf([("general.architecture", STRING, "llama"),
                          ("dspark.skeleton.tensor_names", ARRAY, (STRING, ["a.weight", "b.weight"])),
                          ("dspark.skeleton.tensor_types", ARRAY, (U32, [8, 0])),
                          ("dspark.skeleton.tensor_shapes", ARRAY, (I64, [32, 2, -1, -1, 16, -1, -1, -1]))]),
        "gemma_mini": gguf(gemma, [("token_embd.weight", "Q8_0", [32, 6]), ("output_norm.weight", "F32", [32]),
                                        ("blk.0.attn_q.weight", "Q5_0", [32, 4])]),
    }


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in sorted(corpus().items()):
        assert len(data) < 4096, (name, len(data))
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        print("%-16s %5d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
