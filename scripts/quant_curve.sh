#!/usr/bin/env bash
# The acceptance-per-byte curve of a DSpark drafter (issue #5): quantizes the rungs (affine 8/4/3/2
# g64, turbo 4/3/2 g32 (the bpw of affine g64 at each width), knapsack mixes at 3.0/3.5/4.0/4.5 bpw
# from `dspark sensitivity`), runs them
# all through ONE `dspark ab` against the unquantized drafter on Spec-Bench dev (arms alternate per
# prompt), then tabulates and plots acceptance (95% CI of the change) and tok/s against drafter
# bytes, with the headline turbo-4 vs affine-4 paired comparison.
#
# Usage: scripts/quant_curve.sh DRAFTER_DIR REGEN_DIR OUT_DIR [extra dspark ab flags, e.g. --n-prompts 48 -n 64]
# Env: DSPARK_BIN (default build/release/dspark), DSPARK_MODEL (default gemma3-270m),
#      ARM_OPTS (drafter settings of every arm; default num-draft-tokens=3,draft-copy=off: a fixed
#      draft length without the copy head, so acceptance measures the drafter's numerics only),
#      PYTHON (with matplotlib + numpy; default python3).
# Rungs already in OUT_DIR/rungs are reused (delete them to redo). Exit: 0 written, 2 bad usage.
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '2,14p' "$0"; exit 2; fi
bin=${DSPARK_BIN:-build/release/dspark}
model=${DSPARK_MODEL:-gemma3-270m}
arm_opts=${ARM_OPTS:-num-draft-tokens=3,draft-copy=off}
py=${PYTHON:-python3}
src=$1 calib=$2 out=$3
shift 3
mkdir -p "$out/rungs" "$out/recipes"
q() {
  local name=$1
  shift
  if [ -d "$out/rungs/$name" ]; then echo "quant_curve: reusing $out/rungs/$name"; return; fi
  "$bin" quantize-drafter "$src" -m "$model" --out "$out/rungs/$name" "$@"
}
q affine8 --method affine --bits 8 --group 64
q affine4 --method affine --bits 4 --group 64
q affine3 --method affine --bits 3 --group 64
q affine2 --method affine --bits 2 --group 64
q turbo4 --method turbo --bits 4 --group 32
q turbo3 --method turbo --bits 3 --group 32
q turbo2 --method turbo --bits 2 --group 32
"$bin" sensitivity "$src" -m "$model" --calib "$calib" --target-bpw 3,3.5,4,4.5 \
  --recipe-out "$out/recipes/mix-{bpw}.json" --markdown "$out/sensitivity.md" --json >"$out/sensitivity.json"
for b in 3 3.5 4 4.5; do q "mix$b" --recipe "$out/recipes/mix-$b.json"; done
arms=()
for r in affine8 affine4 affine3 affine2 turbo4 turbo3 turbo2 mix3 mix3.5 mix4 mix4.5; do
  arms+=(--arm "$r=draft-model=$out/rungs/$r,$arm_opts")
done
rc=0
"$bin" ab -m "$model" --arm "bf16=draft-model=$src,$arm_opts" "${arms[@]}" --json --markdown "$out/curve_ab.md" "$@" \
  >"$out/curve_ab.json" || rc=$?
if [ "$rc" -gt 1 ]; then echo "quant_curve: dspark ab failed ($rc)"; exit "$rc"; fi  # 1 = some verdict failed
"$py" "$(dirname "$0")/plot_quant_curve.py" "$out/curve_ab.json" --png "$out/curve.png" --markdown "$out/curve.md"
echo "quant_curve: $out/curve.md, $out/curve.png"
