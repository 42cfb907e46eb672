# Developer tasks (`pip install rust-just` provides `just`). Each recipe is one line you can also copy.

# create .venv and install rollcli with every extra used in development
setup:
    python3 -m venv .venv && .venv/bin/pip install -q torch==2.13.0 && .venv/bin/pip install -q torch==2.13.0 -e ".[test,verl,wandb-reports]"

# the whole test suite, exactly as CI runs it (starts the local Slurm cluster when root)
test *ARGS:
    bash scripts/test.sh {{ARGS}}

# a developer's quick pass: the suite without the `slow` tests (CI always runs them all)
test-fast *ARGS:
    bash scripts/test.sh -m "not slow" {{ARGS}}

# lint and format check
lint:
    .venv/bin/ruff check rollcli tests benchmarks && .venv/bin/ruff format --check rollcli tests benchmarks

# every benchmark (about 30 minutes on 2 cores); results land in docs/benchmarks/
bench:
    .venv/bin/python benchmarks/bench_cli.py
    .venv/bin/python benchmarks/bench_core.py
    .venv/bin/python benchmarks/bench_knapsack.py
    .venv/bin/python benchmarks/bench_sweep.py
    .venv/bin/python benchmarks/bench_eval.py
    .venv/bin/python benchmarks/bench_tiny.py timing
    .venv/bin/python benchmarks/bench_tiny.py allocators --seeds 5
    .venv/bin/python benchmarks/bench_verl.py --allocators uniform,pilot_commit --steps 3

# the main job: the quickstart experiment on this machine
quickstart:
    .venv/bin/rollcli run experiments/quickstart.yaml

# the local Slurm cluster used by the integration tests
slurm action="start":
    bash scripts/slurm-local.sh {{action}}
