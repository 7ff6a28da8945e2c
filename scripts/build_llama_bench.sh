#!/usr/bin/env bash
# Builds llama.cpp's own `llama-bench` (the native peer of `dspark bench`) from the llama.cpp source
# vendored in the llama-cpp-python sdist pinned in requirements.txt: no third-party source is kept in
# this repository. Idempotent: an existing binary is reused.
#
#   scripts/build_llama_bench.sh [OUT_DIR]      # default: build/llama-bench
#   prints the binary's path on the last line of stdout
#
# The build is CPU-only, native to this machine (GGML_NATIVE), tests and examples off. Takes several
# minutes on 2 cores. Needs cmake, a C++ compiler and pip (scripts/setup_deps.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$REPO/build/llama-bench}"
PIN="$(grep -E '^llama-cpp-python==' "$REPO/requirements.txt" | head -1)"
[ -n "$PIN" ] || { echo "build_llama_bench: no llama-cpp-python pin in requirements.txt" >&2; exit 2; }
BIN="$OUT/build/bin/llama-bench"
if [ -x "$BIN" ]; then
  echo "build_llama_bench: $BIN already built ($PIN)" >&2
  echo "$BIN"
  exit 0
fi
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if ! ls "$OUT"/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
  echo "build_llama_bench: downloading the $PIN sdist from PyPI" >&2
  # The sdist's URL and sha256 from PyPI's simple index (pip download would first build the package's
  # metadata, and with it its build backend from source).
  "$PY" - "${PIN#llama-cpp-python==}" "$OUT" <<'PYEOF'
import hashlib, os, re, sys, urllib.request
ver, out = sys.argv[1], sys.argv[2]
index = urllib.request.urlopen("https://pypi.org/simple/llama-cpp-python/", timeout=60).read().decode()
name = f"llama_cpp_python-{ver}.tar.gz"
links = [h for h in re.findall(r'href="([^"]+)"', index) if h.split("#")[0].endswith("/" + name)]
if not links or "#sha256=" not in links[0]:
    sys.exit(f"build_llama_bench: PyPI's index lists no {name} with a sha256")
url, sha = links[0].split("#sha256=")
data = urllib.request.urlopen(url, timeout=600).read()
if hashlib.sha256(data).hexdigest() != sha:
    sys.exit(f"build_llama_bench: sha256 mismatch for {name}")
path = os.path.join(out, name)
with open(path + ".part", "wb") as f:
    f.write(data)
os.replace(path + ".part", path)
print(f"build_llama_bench: {name} sha256 {sha}", file=sys.stderr)
PYEOF
fi
SDIST="$(ls "$OUT"/llama_cpp_python-*.tar.gz | head -1)"
SRC="$OUT/src"
if [ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]; then
  rm -rf "$SRC" && mkdir -p "$SRC"
  tar -xzf "$SDIST" -C "$SRC" --strip-components=1
fi
LLAMA="$SRC/vendor/llama.cpp"
[ -f "$LLAMA/CMakeLists.txt" ] || { echo "build_llama_bench: $SDIST has no vendor/llama.cpp" >&2; exit 2; }
echo "build_llama_bench: configuring $LLAMA" >&2
cmake -S "$LLAMA" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >&2
echo "build_llama_bench: building llama-bench (several minutes)" >&2
cmake --build "$OUT/build" --target llama-bench -j "$(nproc)" >&2
[ -x "$BIN" ] || { echo "build_llama_bench: $BIN was not produced" >&2; exit 1; }
echo "$BIN"
