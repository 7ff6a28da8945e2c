#!/usr/bin/env bash
# Writes the token ids of a regen folder's finished shards as a compressed, checksummed file that
# can be committed (data/regen-ids/), so a new machine rebuilds the shards with
# `dspark regen ... --from-ids` instead of regenerating them (scripts/train_default_drafter.sh).
# Usage: scripts/export_regen_ids.sh REGEN_DIR [NAME]   (NAME default gemma3-270m-v2)
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: scripts/export_regen_ids.sh REGEN_DIR [NAME]}"
name="${2:-gemma3-270m-v2}"
out=data/regen-ids
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/release/dspark regen --out "$src" --export-ids "$tmp/$name.ids.safetensors"
xz -9 -T1 -c "$tmp/$name.ids.safetensors" >"$tmp/$name.ids.safetensors.xz"
python3 - "$src/manifest.json" "$tmp/$name.ids.safetensors" "$tmp/$name.ids.safetensors.xz" "$out/$name.manifest.json" "$name" <<'PY'
import hashlib, json, os, sys
man, raw, xz, out, name = sys.argv[1:]
m = json.load(open(man))
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
# Sequence and token counts from the ids file's own header (safetensors: u64 length + JSON).
b = open(raw, "rb").read()
n = int.from_bytes(b[:8], "little")
hdr = json.loads(b[8:8 + n])
j = {
    "file": name + ".ids.safetensors.xz",
    "format": "dspark-regen-ids-v1 (safetensors), xz-compressed",
    "sequences": hdr["prompt_len"]["shape"][0],
    "tokens": hdr["tokens"]["shape"][0],
    "shards": m["shards_done"],
    "response_tokens": m["response_tokens"],
    "regen_settings": m["settings"],
    "bytes_compressed": os.path.getsize(xz),
    "bytes_uncompressed": os.path.getsize(raw),
    "sha256_compressed": sha(xz),
    "sha256_uncompressed": sha(raw),
}
if "continues_ids" in m:  # a run made with --skip-ids: replay that file first
    j["continues"] = m["continues_ids"]
json.dump(j, open(out, "w"), indent=1)
print(json.dumps({k: j[k] for k in ("sequences", "tokens", "response_tokens", "bytes_compressed")}))
PY
mv "$tmp/$name.ids.safetensors.xz" "$out/"
echo "export_regen_ids: $out/$name.ids.safetensors.xz + $out/$name.manifest.json"
