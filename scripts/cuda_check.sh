#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine, in one short run: a GPU is lent for minutes at a time and
# has no network, so everything it needs is prepared on the build machine first.
#
#   scripts/cuda_check.sh prepare DIR       on the build machine, after a build that has the CUDA backend
#                                           (build/release): the binaries, both targets' skeletons (their
#                                           metadata and tensor tables, `dspark random-model --skeleton`)
#                                           and the shared libraries a bare machine may lack, into
#                                           DIR/carry.tar.xz (~10 MB; carry DIR to the GPU machine)
#   scripts/cuda_check.sh run DIR OUT [N]   on the GPU machine: the CUDA unit tests, then per target a
#                                           random-weight model of its exact shapes and types, greedy
#                                           tokens on the CPU and on the GPU (N, default 256), speculative
#                                           == serial on the GPU, the verify curve, then prefill / decode
#                                           speed beside the transformers anchor and the bandwidth bound
#                                           (bench/cuda_anchor.py). Everything lands in OUT/cuda_check.log
#                                           and OUT/cuda_check.jsonl; exit 1 when a check fails.
#                                           The run keeps within CUDA_CHECK_BUDGET_S seconds (default 540,
#                                           one device command's limit less a margin): the speed steps are
#                                           shortened or skipped when the time left is short.
# The random models' text is noise: agreement and speed are what they can show (docs/CUDA.md).
set -uo pipefail  # a step's failure anywhere in a pipeline (bench | python | tee) fails the check
mode="${1:-}"
dir="${2:-}"
if [ -z "$mode" ] || [ -z "$dir" ]; then
  echo "usage: scripts/cuda_check.sh prepare DIR | run DIR OUT [N]" >&2
  exit 2
fi

if [ "$mode" = prepare ]; then
  src=$(cd "$(dirname "$0")/.." && pwd)
  build="$src/build/release"
  [ -x "$build/dspark" ] || { echo "cuda_check: no $build/dspark: build first" >&2; exit 2; }
  mkdir -p "$dir/bin" "$dir/lib"
  cp "$build/dspark" "$build/tests/dspark_kernels_tests" "$dir/bin/"
  "$build/dspark" random-model -m smollm2-135m --skeleton --out "$dir/smollm2.skel.gguf" >/dev/null || exit 1
  "$build/dspark" random-model -m gemma3-270m --skeleton --out "$dir/gemma3.skel.gguf" >/dev/null || exit 1
  # Every shared library the binaries load except glibc's own (the GPU machine's glibc is at least as new).
  for lib in $(ldd "$dir"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libmvec.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  # One xz archive: the GPU machine takes 64 MiB with the working tree (the libraries alone are ~40 MB).
  python3 - "$dir" <<'PY' || exit 1
import os, sys, tarfile
d = sys.argv[1]
with tarfile.open(os.path.join(d, "carry.tar.xz"), "w:xz", preset=6) as t:
    for name in ("bin", "lib", "smollm2.skel.gguf", "gemma3.skel.gguf"):
        t.add(os.path.join(d, name), arcname=name)
PY
  rm -rf "$dir/bin" "$dir/lib" "$dir"/*.skel.gguf
  du -sh "$dir/carry.tar.xz"
  exit 0
fi

[ "$mode" = run ] || { echo "cuda_check: unknown step '$mode' (prepare or run)" >&2; exit 2; }
out="${3:-}"
n="${4:-256}"
[ -n "$out" ] || { echo "usage: scripts/cuda_check.sh run DIR OUT [N]" >&2; exit 2; }
mkdir -p "$out"
if [ -f "$dir/carry.tar.xz" ]; then  # unpack what `prepare` archived (python: xz may not be installed there)
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$dir/carry.tar.xz" /tmp/cuda-carry ||
    exit 1
  dir=/tmp/cuda-carry
fi
budget="${CUDA_CHECK_BUDGET_S:-540}"
left() { echo $((budget - SECONDS)); }
# The carried libraries serve only our binaries, and only where the machine lacks them: each binary is
# started by a wrapper that puts them on its own library path, so the machine's python, torch,
# nvidia-smi and compute-sanitizer keep the machine's (newer) libstdc++.
for lib in "$dir"/lib/*; do
  [ -e "$lib" ] || continue
  ldconfig -p 2>/dev/null | awk '{print $1}' | grep -qxF "$(basename "$lib")" && rm -f "$lib"
done
mkdir -p "$dir/real"
for b in dspark dspark_kernels_tests; do
  [ -f "$dir/bin/$b" ] && [ ! -f "$dir/real/$b" ] && mv "$dir/bin/$b" "$dir/real/$b"
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
    "$dir/lib" "$dir/real/$b" >"$dir/bin/$b"
  chmod +x "$dir/bin/$b"
done
bin="$dir/bin"
log="$out/cuda_check.log"
res="$out/cuda_check.jsonl"
: >"$res"
exec > >(tee "$log") 2>&1
fail=0
threads=$(nproc)
date -u
echo "carried libraries used (the machine lacks them): $(ls "$dir/lib" | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | head -3

echo "== unit tests (CUDA backend against the CPU)"
timeout 180 "$bin/dspark_kernels_tests" --gtest_filter='Cuda*' >/tmp/cuda_unit.txt 2>&1 || fail=1
cp /tmp/cuda_unit.txt "$out/cuda_unit.txt"
grep -E "^\[ *(OK|FAILED|SKIPPED) *\]|Failure|Skipped|Expected|Which is|error" /tmp/cuda_unit.txt | head -60
# Here a skipped device test means the backend did not start: a failure, not a pass.
grep -q "^\[  SKIPPED \]" /tmp/cuda_unit.txt && { echo "FAIL the CUDA tests skipped on a GPU machine"; fail=1; }

# The device tests again under compute-sanitizer's memcheck where the machine allows it (out-of-bounds
# and misaligned accesses; some devices and runtimes refuse it, e.g. "Device not supported" then error 999
# at the first allocation: reported, not failed).
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$san" ]; then
  echo "== memcheck of the CUDA tests"
  timeout 200 "$san" --tool memcheck --target-processes all "$bin/dspark_kernels_tests" --gtest_filter='CudaBackend.*' \
    >/tmp/cuda_memcheck.txt 2>&1
  cp /tmp/cuda_memcheck.txt "$out/cuda_memcheck.txt"
  grep -E "ERROR SUMMARY|Invalid|out of bounds|misaligned|not supported" /tmp/cuda_memcheck.txt | head -20
  if grep -qiE "not supported|cudaErrorUnknown|error 999" /tmp/cuda_memcheck.txt; then
    echo "note: compute-sanitizer refused this device or runtime: memcheck not run"
  elif grep -qE "ERROR SUMMARY: [1-9]" /tmp/cuda_memcheck.txt; then
    echo "FAIL memcheck found errors"; fail=1
  fi
fi

prompt="The river runs past the old mill. The river runs past the old mill and the bridge. The river runs"
for m in smollm2 gemma3; do
  echo "== $m: random-weight model of the target's shapes"
  model="/tmp/$m-random.gguf"
  "$bin/dspark" random-model -m "$dir/$m.skel.gguf" --out "$model" --seed 7 || { fail=1; continue; }
  run() {  # name, then generate's arguments
    local name="$1"; shift
    timeout 120 "$bin/dspark" generate -m "$model" -p "$prompt" -n "$n" --ignore-eos --json -t "$threads" "$@" \
      >"/tmp/$m-$name.json" 2>"/tmp/$m-$name.err"
    local rc=$?
    [ $rc -eq 0 ] || { echo "FAIL $m $name: exit $rc"; sed 's/^/   | /' "/tmp/$m-$name.err" | tail -5; fail=1; }
  }
  run cpu --backend cpu --no-spec
  run cuda --backend cuda --no-spec
  run cuda-spec --backend cuda --draft-kind ngram --num-draft-tokens 4
  run cuda-spec-sampled --backend cuda --draft-kind ngram --temp 0.7 --seed 3
  # Random weights decode greedily to one token repeated; sampling at T 1 (the same seed) walks the
  # vocabulary, so CPU against GPU there is the more searching comparison (reported, not required:
  # SiLU and attention differ by rounding, and a draw may fall on a boundary between two tokens).
  run cpu-t1 --backend cpu --no-spec --temp 1 --seed 5
  run cuda-t1 --backend cuda --no-spec --temp 1 --seed 5
  python3 - "$m" "$res" /tmp/$m-cpu.json /tmp/$m-cuda.json /tmp/$m-cuda-spec.json /tmp/$m-cpu-t1.json \
    /tmp/$m-cuda-t1.json <<'PY' || fail=1
import json, sys
m, res, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    cpu, cuda, spec, cpu_t1, cuda_t1 = (json.load(open(p)) for p in paths)
except Exception as e:  # a run above failed: already reported
    print(f"FAIL {m}: {e}"); sys.exit(1)
def agree(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]: n += 1
    return n
row = {"model": m, "check": "greedy", "tokens": len(cpu["tokens"]),
       "cpu_vs_cuda_agree": agree(cpu["tokens"], cuda["tokens"]),
       "spec_vs_serial_cuda_agree": agree(cuda["tokens"], spec["tokens"]),
       "cuda_decode_tok_s": cuda.get("decode_tok_s"), "cpu_decode_tok_s": cpu.get("decode_tok_s"),
       "cuda_spec_decode_tok_s": spec.get("decode_tok_s"), "spec": spec.get("spec"),
       "sampled_t1_cpu_vs_cuda_agree": agree(cpu_t1["tokens"], cuda_t1["tokens"]),
       "sampled_t1_distinct_tokens": len(set(cpu_t1["tokens"]))}
open(res, "a").write(json.dumps(row) + "\n")
print(json.dumps(row))
ok = row["cpu_vs_cuda_agree"] == row["tokens"] and row["spec_vs_serial_cuda_agree"] == row["tokens"]
print(("ok  " if ok else "FAIL") + f" {m}: CPU == CUDA for {row['cpu_vs_cuda_agree']} of {row['tokens']} tokens; "
      f"spec == serial on CUDA for {row['spec_vs_serial_cuda_agree']}")
sys.exit(0 if ok else 1)
PY
  echo "== $m: the verify curve on the GPU"
  timeout 120 "$bin/dspark" bench -m "$model" --backend cuda -p 0 -n 0 --verify-curve --curve-max 16 --curve-ctx 512 \
    -r 3 -t "$threads" --json \
    | python3 -c "import json,sys; d=json.load(sys.stdin); d={'model':'$m','check':'verify_curve',**d}; print(json.dumps(d))" \
    | tee -a "$res" || fail=1
done
# Speed last (correctness first, should the run be cut short): dspark's prefill / decode beside the
# transformers anchor and the memory-bandwidth bound, per target (bench/cuda_anchor.py).
anchor="$(cd "$(dirname "$0")/.." && pwd)/bench/cuda_anchor.py"
for m in smollm2 gemma3; do
  echo "== $m: speed against transformers and the bandwidth bound ($(left) s left)"
  # torch.compile takes minutes per model: only when the time left allows it.
  compile=(); [ "$(left)" -lt 330 ] && compile=(--no-compile)
  [ "$(left)" -lt 90 ] && { echo "skipped: $(left) s left"; continue; }
  timeout $(( $(left) - 40 )) python3 "$anchor" --dspark "$bin/dspark" --model "/tmp/$m-random.gguf" --out "$res" \
    "${compile[@]}" || fail=1
done
# Where a token's device time goes, per op (bench --profile waits around each op on a device), for the
# speed work that follows.
for m in smollm2 gemma3; do
  echo "== $m: per-op device time of prefill and decode ($(left) s left)"
  [ "$(left)" -lt 30 ] && { echo "skipped: $(left) s left"; continue; }
  timeout 60 "$bin/dspark" bench -m "/tmp/$m-random.gguf" --backend cuda -p 64 -n 32 -r 1 --profile -v 2>&1 |
    grep -v '^bench \[' || fail=1
done
echo "== done: $([ $fail -eq 0 ] && echo all checks passed || echo some checks FAILED)"
exec >&- 2>&-  # close the pipe to tee, and give it a moment to write the log's end before OUT is read
sleep 1
exit $fail
