"""The light core: a spec, sweep or command that needs a pip extra this environment lacks fails
before anything starts, in one line that names the extra; what needs none still works.

A missing package is simulated with ``sys.modules[name] = None`` (what ``import name`` and
``importlib.util.find_spec`` both treat as not installed); tests/packaging/test_light_core.py
installs the real light core into a fresh venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rollcli.analysis.tracking import resolve_mode
from rollcli.extras import EXTRAS, MissingExtraError, missing_modules, require_extra

REPO = Path(__file__).resolve().parents[1]


def _uninstall(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def _no_heavy_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    _uninstall(monkeypatch, "torch", "safetensors", "wandb", "verl", "math_verify")


def test_the_extras_match_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    optional = declared["optional-dependencies"]
    assert set(EXTRAS) <= set(optional)
    core = " ".join(declared["dependencies"])
    for heavy in ("torch", "wandb", "math-verify", "safetensors", "sympy"):
        assert heavy not in core, heavy
    assert any(r.startswith("torch") for r in optional["tiny"])
    assert any(r.startswith("wandb") for r in optional["wandb"])
    assert any(r.startswith("math-verify") for r in optional["verl"])


def test_missing_modules_and_the_line(monkeypatch):
    assert missing_modules("tiny") == []  # the shared test venv has every extra
    _uninstall(monkeypatch, "torch")
    assert missing_modules("tiny") == ["torch"]
    with pytest.raises(MissingExtraError) as error:
        require_extra("tiny", "backend tiny")
    assert str(error.value) == (
        "backend tiny needs the `tiny` extra: pip install 'rollcli[tiny]' (missing: torch)"
    )
    assert error.value.exit_code == 2


@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_a_tiny_spec_without_torch_fails_before_any_job(cli, monkeypatch, tmp_path, command):
    _uninstall(monkeypatch, "torch")
    spec = REPO / "experiments" / "quickstart.yaml"
    args = [command, spec] + (["--runs-dir", tmp_path / "runs"] if command == "run" else [])
    result = cli(args)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {spec}: backend tiny needs the `tiny` extra: pip install 'rollcli[tiny]' "
        "(missing: torch)\n"
    )
    assert not (tmp_path / "runs").exists()  # nothing half-done


def test_a_verl_spec_without_verl_names_the_verl_extra(cli, monkeypatch):
    _uninstall(monkeypatch, "verl")
    result = cli(["validate", REPO / "experiments" / "pc-1.5b-h200.yaml"])
    assert result.exit_code == 2, result.output
    assert "backend verl needs the `verl` extra: pip install 'rollcli[verl]'" in result.stderr


def test_a_sim_spec_needs_no_extra(cli, monkeypatch):
    _no_heavy_extras(monkeypatch)
    spec = REPO / "experiments" / "sim-allocators.yaml"
    for command in ("validate", "plan"):
        result = cli([command, spec])
        assert result.exit_code == 0, result.output


def test_wandb_online_or_offline_needs_the_wandb_extra(cli, monkeypatch):
    _uninstall(monkeypatch, "wandb")
    spec = REPO / "experiments" / "sim-allocators.yaml"
    for mode in ("online", "offline"):
        result = cli(["validate", spec, f"tracking.wandb.mode={mode}"])
        assert result.exit_code == 2, result.output
        assert f"tracking.wandb.mode {mode} needs the `wandb` extra" in result.stderr
    assert cli(["validate", spec, "tracking.wandb.mode=auto"]).exit_code == 0


def test_auto_tracking_without_wandb_tracks_nothing(monkeypatch):
    import rollcli.analysis.tracking as tracking

    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)  # even when logged in and W&B answers
    monkeypatch.setattr(tracking, "can_reach_wandb", lambda timeout_s=3.0: True)
    assert resolve_mode("auto") == "online"  # with wandb installed
    _uninstall(monkeypatch, "wandb")
    assert resolve_mode("auto") == "disabled"
    assert resolve_mode("offline") == "offline"  # asked for: the spec check refuses it earlier


def test_a_sweep_over_a_tiny_spec_without_torch(cli, monkeypatch, tmp_path):
    _uninstall(monkeypatch, "torch")
    sweep = REPO / "sweeps" / "tiny-pc-thresholds.yaml"
    result = cli(["sweep", sweep, "--dry-run", "--runs-dir", tmp_path / "runs"])
    assert result.exit_code == 2, result.output
    assert f"error: {sweep}: backend tiny needs the `tiny` extra" in result.stderr


def test_report_wandb_without_wandb(cli, monkeypatch, tmp_path):
    _uninstall(monkeypatch, "wandb")
    result = cli(["report", tmp_path / "runs" / "x", "--wandb", "--no-plots"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: rollcli report --wandb needs the `wandb` extra: pip install 'rollcli[wandb]' "
        "(missing: wandb)\n"
    )


def test_eval_of_a_math_benchmark_without_math_verify(monkeypatch, tmp_path):
    from rollcli.eval.runner import EvalSettings, evaluate

    _uninstall(monkeypatch, "math_verify")
    settings = EvalSettings(suite=("math500",), k=1, limit=2, model="m", engine="hf")

    def engine():  # must not be reached: the check comes before the model loads
        raise AssertionError("the model was loaded")

    with pytest.raises(MissingExtraError, match=r"math benchmarks \(math500\) needs the `eval`"):
        evaluate(engine, settings, tmp_path / "eval", show_progress=False)
