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


def test_the_verl_phase_holds_the_verl_trainer_modules():
    is_verl = conftest.is_verl_e2e
    assert is_verl("tests/backends/verl/test_verl_cpu.py::test_pilot_commit_groups_and_resume")
    assert is_verl("tests/backends/verl/test_verl_multinode.py::test_verl_job_spans_both_nodes")
    assert not is_verl("tests/backends/verl/test_verl_gpu_run.py::test_x")
    # the two-node Ray tests run there too: beside the other worker Ray's 30 s ran out
    assert is_verl("tests/launch/test_multinode.py::test_x")
    assert not is_verl("tests/launch/test_multinode_plan.py::test_x")
    for module in conftest.VERL_E2E_MODULES:
        assert (TESTS.parent / module).is_file(), f"VERL_E2E_MODULES names {module}, but it is gone"
