"""``rollcli doctor``: every check with its failure simulated on this CPU machine (probes
replaced, fake files), each reported on one line with its fix, and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

import rollcli.doctor as doctor_pkg
from rollcli.doctor import checks, probes, render, run_checks
from rollcli.doctor.checks import Check, Context
from rollcli.spec import load_spec

SPEC = """\
name: first-h200-run
backend: {kind: verl, model: Org/Math-1.5B, reward: code}
budget: {steps: 10, rollouts_per_step: 64}
allocators: {grpo: {kind: uniform, n: 8}}
launch: {executor: slurm, nodes: 1, gpus_per_node: 8, cpus_per_task: 64, time: "04:00:00"}
"""


@pytest.fixture
def spec_path(tmp_path):
    path = tmp_path / "first.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def ctx(spec_path, tmp_path):
    return Context(
        spec=load_spec(spec_path),
        spec_file=str(spec_path),
        runs_dir=Path("/shared/runs"),
        env={"HF_HUB_CACHE": str(tmp_path / "hub")},
    )


def _one(lines: list[Check], name: str) -> Check:
    (found,) = [c for c in lines if c.name == name]
    return found


def test_pins_are_read_from_rollclis_own_extras():
    pins = {r.name: str(r.specifier) for r in probes.gpu_pins()}
    assert pins["verl"] == "==0.9.1" and "vllm" in pins  # whatever the gpu extra pins


def test_versions_against_the_pins(ctx, monkeypatch):
    pins = [Requirement("torch==2.11.0"), Requirement("vllm==0.24.0"), Requirement("ray")]
    installed = {"torch": "2.13.0", "vllm": None, "ray": "2.50.0"}
    monkeypatch.setattr(probes, "gpu_pins", lambda: pins)
    monkeypatch.setattr(probes, "installed_version", installed.get)
    lines = checks.check_gpu_stack(ctx)
    assert _one(lines, "torch").status == "fail"
    assert _one(lines, "torch").detail == "2.13.0 installed, pinned ==2.11.0"
    assert _one(lines, "vllm").detail == "not installed (pinned ==0.24.0)"
    assert _one(lines, "unpinned") == Check("unpinned", "ok", "ray 2.50.0")


def test_flash_attn_built_against_another_torch(ctx, monkeypatch):
    monkeypatch.setattr(probes, "gpu_pins", lambda: [Requirement("flash-attn==2.8.3")])
    monkeypatch.setattr(checks, "_install_commands", lambda: None)  # the pin's own line
    monkeypatch.setattr(
        probes, "import_problem", lambda m: "ImportError: flash_attn_2_cuda.so: undefined symbol"
    )
    (line,) = checks.check_flash_attn(ctx)
    assert line.status == "fail" and "undefined symbol" in line.detail
    assert "pip install 'flash-attn==2.8.3' --no-build-isolation" in line.fix
    monkeypatch.setattr(checks, "_install_commands", lambda: ["pip a", "pip b"])
    assert checks.check_flash_attn(ctx)[0].fix.startswith("pip b (built against")


def test_flash_attn_not_needed_with_an_sdpa_fallback(spec_path, monkeypatch):
    monkeypatch.setattr(probes, "import_problem", lambda m: pytest.fail("imported"))
    override = (
        "backend.verl_overrides={actor_rollout_ref.model.override_config.attn_implementation: sdpa}"
    )
    spec = load_spec(spec_path, [override])
    (line,) = checks.check_flash_attn(Context(spec=spec))
    assert line.status == "skip" and "sdpa" in line.detail


def test_no_gpu_warns_on_a_login_node_and_fails_in_a_job(ctx, monkeypatch):
    monkeypatch.setattr(
        probes, "torch_cuda", lambda: {"torch": "2.11.0", "cuda": "12.8", "available": False}
    )
    monkeypatch.setattr(probes, "command_output", lambda argv, timeout_s=10.0: None)
    (login,) = checks.check_cuda(ctx)
    assert login.status == "warn" and "srun --gpus-per-node=1 rollcli doctor" in login.fix
    ctx.env = {**ctx.env, "SLURM_JOB_ID": "42"}
    (job,) = checks.check_cuda(ctx)
    assert job.status == "fail" and "CUDA_VISIBLE_DEVICES" in job.fix


def test_driver_older_than_torchs_cuda(ctx, monkeypatch):
    info = {"torch": "2.11.0", "cuda": "13.0", "available": True, "devices": 8, "name": "H200"}
    monkeypatch.setattr(probes, "torch_cuda", lambda: info)
    smi = "| NVIDIA-SMI 550.54   Driver Version: 550.54   CUDA Version: 12.4 |"
    monkeypatch.setattr(probes, "command_output", lambda argv, timeout_s=10.0: smi)
    cuda, driver = checks.check_cuda(ctx)
    assert cuda.status == "ok" and "8 x H200" in cuda.detail
    assert driver.status == "fail" and "supports CUDA 12.4, torch needs 13.0" in driver.detail


def test_nccl_interface_that_does_not_exist(ctx, monkeypatch):
    monkeypatch.setattr(probes, "network_interfaces", lambda: ["eth0", "lo"])
    ctx.env = {"NCCL_SOCKET_IFNAME": "ib", "NCCL_IB_DISABLE": "1"}
    lines = checks.check_nccl(ctx)
    assert [c.status for c in lines] == ["fail", "warn"]
    assert "matches no interface here (eth0, lo)" in lines[0].detail
    ctx.env = {"NCCL_SOCKET_IFNAME": "eth"}
    assert checks.check_nccl(ctx)[0].status == "ok"


def test_stale_ray_address_file(ctx, tmp_path, monkeypatch):
    path = tmp_path / "ray_current_cluster"
    assert checks.check_ray_address(ctx, path)[0].status == "ok"
    path.write_text("10.0.0.5:6379\n")
    monkeypatch.setattr(probes, "port_open", lambda host, port, timeout_s=1.0: False)
    (line,) = checks.check_ray_address(ctx, path)
    assert line.status == "fail" and line.fix == f"rm {path}"
    monkeypatch.setattr(probes, "port_open", lambda host, port, timeout_s=1.0: True)
    assert checks.check_ray_address(ctx, path)[0].status == "warn"


def test_sandbox_without_bubblewrap(ctx, monkeypatch):
    from rollcli.eval.graders.sandbox import bwrap

    monkeypatch.setattr(bwrap, "find_bwrap", lambda: None)
    lines = checks.check_sandbox(ctx)
    line = _one(lines, "sandbox: bubblewrap")
    assert line.status == "fail" and "apt-get install bubblewrap" in line.fix


def test_run_folder_on_node_local_storage(ctx):
    ctx.runs_dir = Path("/tmp/runs")
    (line,) = checks.check_run_folder(ctx)
    assert line.status == "fail" and "under /tmp" in line.detail and "--runs-dir" in line.fix


def test_hf_cache_missing_model_and_node_local_cache(ctx):
    lines = checks.check_hf_cache(ctx)  # pytest's tmp_path is under /tmp: node-local too
    assert [c.status for c in lines] == ["fail", "fail"]
    assert "under /tmp" in lines[0].detail and "HF_HOME" in lines[0].fix
    assert "Org/Math-1.5B not in" in lines[1].detail and "(jobs run offline)" in lines[1].detail
    assert lines[1].fix == f"rollcli data prefetch {ctx.spec_file}"


def test_srun_cpus_in_an_affected_slurm(ctx, monkeypatch):
    monkeypatch.setattr(probes, "command_output", lambda argv, timeout_s=10.0: "slurm 23.02.7\n")
    ctx.env = {"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "64"}
    version, cpus = checks.check_slurm(ctx)
    assert version.status == "ok" and version.detail == "slurm 23.02.7"
    assert cpus.status == "fail" and "SRUN_CPUS_PER_TASK=None" in cpus.detail
    ctx.env = {**ctx.env, "SRUN_CPUS_PER_TASK": "64"}
    assert checks.check_slurm(ctx)[1].status == "ok"
    monkeypatch.setattr(probes, "command_output", lambda argv, timeout_s=10.0: None)
    assert checks.check_slurm(ctx)[0].status == "fail"


def test_wandb_auto_says_it_logs_nothing_without_a_login(ctx, monkeypatch):
    """Issue 28: `auto` no longer falls back to offline files; doctor says what it does."""
    from rollcli.analysis import tracking

    monkeypatch.setattr(tracking, "is_logged_in", lambda: False)
    line = _one(checks.check_wandb(ctx), "wandb")
    assert line.status == "warn" and line.detail == "auto -> nothing logged: no W&B login"
    assert "tracking.wandb.mode: offline" in line.fix
    monkeypatch.setattr(tracking, "is_logged_in", lambda: True)
    monkeypatch.setattr(tracking, "can_reach_wandb", lambda: False)
    line = _one(checks.check_wandb(ctx), "wandb")
    assert line.status == "warn" and "nothing logged" in line.detail
    monkeypatch.setattr(tracking, "can_reach_wandb", lambda: True)
    assert _one(checks.check_wandb(ctx), "wandb").detail == "auto -> online"


def test_a_crashing_check_is_a_failure_line_not_a_traceback(monkeypatch):
    def broken(ctx):
        raise OSError("probe exploded")

    monkeypatch.setattr(doctor_pkg, "ALL_CHECKS", (broken,))
    (line,) = run_checks(Context())
    assert line.status == "fail" and "probe exploded" in line.detail


def test_cli_prints_one_line_per_check_and_exits_non_zero(cli, spec_path, monkeypatch):
    monkeypatch.setattr(
        doctor_pkg,
        "ALL_CHECKS",
        (
            lambda ctx: [Check("cuda", "ok", "8 x H200")],
            lambda ctx: [Check("flash-attn", "fail", "does not import", "pip install x")],
        ),
    )
    result = cli(["doctor", spec_path])
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[:2] == [
        "ok    cuda: 8 x H200",
        "FAIL  flash-attn: does not import -> fix: pip install x",
    ]
    monkeypatch.setattr(doctor_pkg, "ALL_CHECKS", (lambda ctx: [Check("cuda", "ok", "fine")],))
    assert cli(["doctor", spec_path]).exit_code == 0


def test_render_shows_fixes_only_where_something_is_wrong():
    lines = render([Check("a", "ok", "x", "never shown"), Check("b", "warn", "y", "do z")])
    assert lines == ["ok    a: x", "WARN  b: y -> fix: do z"]


def test_doctor_command_imports_nothing_heavy():
    """`rollcli doctor --help` and the doctor package load no torch, flash_attn, verl or wandb:
    those are imported by the probes that need them, when they run."""
    import subprocess
    import sys

    probe = (
        "import sys, rollcli.cli.app, rollcli.doctor;"
        "print(sorted(m for m in ('torch', 'flash_attn', 'verl', 'wandb', 'huggingface_hub')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
