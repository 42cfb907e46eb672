#!/usr/bin/env bash
# GPU check of the verl backend (about 10 minutes on one H200): a few GRPO steps of a small model
# with vLLM rollouts and FSDP on one GPU, for the uniform and pilot_commit allocators, printing
# per-step times. Run it whenever a GPU machine is available and paste its output into
# docs/benchmarks/verl.md.
#
#   scripts/gpu-check.sh                      # tiny Qwen2 built in code (no hub access needed)
#   GPU_CHECK_MODEL=/models/Qwen2.5-0.5B-Instruct scripts/gpu-check.sh   # a real local model
#
# Needs: an NVIDIA GPU, torch with CUDA, vllm, verl==0.9.1 and rollcli importable by $PYTHON.
# The preflight is `rollcli doctor` (GPU_CHECK_SPEC=spec.yaml also checks that spec's needs);
# a failed check stops the script before any GPU time is spent.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
MODEL=${GPU_CHECK_MODEL:-tiny}
STEPS=${GPU_CHECK_STEPS:-5}
OUT=${GPU_CHECK_OUT:-$(mktemp -d /tmp/rollcli-gpu-check.XXXXXX)}

echo "== preflight (rollcli doctor: GPU stack against the pins, flash-attn, CUDA and driver, NCCL, Ray)"
"$PYTHON" -m rollcli.cli doctor ${GPU_CHECK_SPEC:+"$GPU_CHECK_SPEC"}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true

# uniform: 64 prompts x 8; pilot_commit: 4 pilots + 4 commits (B = 64 prompts, 128 pilots a round)
echo "== verl steps (model=$MODEL, $STEPS steps, 512 rollouts/step, responses <= 512 tokens)"
start=$(date +%s)
"$PYTHON" benchmarks/bench_verl.py --device cuda --model "$MODEL" \
    --allocators uniform,pilot_commit --steps "$STEPS" --rollouts 512 --response-len 512 \
    --train-samples 2048 --out "$OUT"
echo "== total $(( $(date +%s) - start )) s; job folders (metrics.jsonl, bench.log) in $OUT"
