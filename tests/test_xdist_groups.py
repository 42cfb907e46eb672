"""tests/conftest.py's XDIST_GROUPS: what scripts/test.sh's `--dist loadgroup` keeps together."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("suite_conftest", TESTS / "conftest.py")
conftest = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = conftest  # its dataclass looks its module up
_spec.loader.exec_module(conftest)


def test_every_grouped_file_exists():
    for prefix in conftest.XDIST_GROUPS:
        path = TESTS.parent / prefix.split("::")[0]
        assert path.is_file(), f"XDIST_GROUPS names {prefix}, but {path} is gone"


def test_the_longest_prefix_names_the_group():
    group_of = conftest.xdist_group_of
    assert (
        group_of("tests/launch/test_slurm.py::test_cancel_stops_a_running_array") == "slurm-1node"
    )
    assert group_of("tests/launch/test_multinode.py::test_x[a]") == "slurm-2node"
    assert group_of("tests/eval/test_runner.py::test_smollm2_gguf_end_to_end") == "smollm2"
    assert group_of("tests/eval/test_runner.py::test_hf_engine_on_tiny_model") is None
    assert group_of("tests/launch/test_slurm_fallback.py::test_x") is None


def test_each_test_has_one_tier():
    tier = conftest.tier_of
    assert (
        tier("tests/backends/verl/test_verl_cpu.py::test_pilot_commit_groups_and_resume") == "verl"
    )
    assert tier("tests/backends/verl/test_verl_issue29_field.py::test_x[vcrl]") == "verl"
    assert tier("tests/backends/verl/test_verl_gpu_run.py::test_x") == "main"
    # the two-node Ray tests run alone: beside another worker Ray's 30 s ran out
    assert tier("tests/backends/verl/test_verl_multinode.py::test_verl_job_spans") == "two-node"
    assert tier("tests/launch/test_multinode.py::test_x") == "two-node"
    assert tier("tests/launch/test_multinode_plan.py::test_x") == "main"
    for module in conftest.VERL_E2E_MODULES + conftest.TWO_NODE_MODULES:
        assert (TESTS.parent / module).is_file(), (
            f"tests/conftest.py names {module}, but it is gone"
        )


def test_the_tiers_split_the_suite():
    """``--tier main``, ``verl`` and ``two-node`` together collect what ``--tier all`` does,
    each test once."""
    import subprocess
    import sys

    def collected(tier: str) -> set[str]:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--co",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--tier={tier}",
                "tests/backends/verl",
                "tests/launch/test_multinode.py",
            ],
            cwd=TESTS.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {line for line in out.splitlines() if "::" in line}

    parts = [collected(t) for t in ("main", "verl", "two-node")]
    assert all(parts)
    assert sum(len(p) for p in parts) == len(set().union(*parts)) == len(collected("all"))
