"""Every train and eval job runs under a memory cap (issue 26): one job cannot exhaust the host."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rollcli.jobs.memcap import DEFAULT_FRACTION, memory_cap_bytes, parse_size


def test_sizes_and_defaults():
    assert parse_size("64G") == 64 << 30 and parse_size("512M") == 512 << 20
    assert parse_size("2048") == 2048 << 20  # Slurm's unit: MB
    with pytest.raises(ValueError, match="not a memory size"):
        parse_size("lots")
    assert memory_cap_bytes({"memory_limit": "3G"}, {"kind": "sim"}) == 3 << 30
    assert memory_cap_bytes({"memory_limit": "0"}, {"kind": "sim"}) is None
    default = memory_cap_bytes({}, {"kind": "tiny"})
    assert default is not None and default > 0
    import os

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert default == int(physical * DEFAULT_FRACTION)
    # CUDA reserves more address space than memory: there Slurm's cgroup is the cap
    assert memory_cap_bytes({"memory_limit": "3G"}, {"kind": "verl"}) is None
    assert memory_cap_bytes({}, {"kind": "verl", "device": "cpu"}) == default


def test_a_job_growing_past_its_cap_fails_inside_itself(tmp_path):
    """The real entry point: a train job whose growth would take the host gets MemoryError."""
    from rollcli.store.state import read_state
    from rollcli.testing.train_jobs import write_job

    job = write_job(tmp_path / "job", "uniform", steps=2, every=1)
    config = job / "config.yaml"
    config.write_text(config.read_text() + "launch:\n  memory_limit: 1G\n")
    script = textwrap.dedent(
        f"""
        import sys
        import rollcli.jobs.train as train
        def grow(*args, **kwargs):
            hog = bytearray(4 << 30)  # 4 GiB: past the 1 GiB cap
        train.run_train_job = grow
        from rollcli.jobs.entry import main
        sys.exit(main([{str(job)!r}]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 1, done.stderr.decode()[-2000:]
    state = read_state(job)
    assert state["status"] == "failed" and "MemoryError" in state["error_tail"]


def test_the_spec_knob_reaches_every_train_and_eval_job_without_changing_ids():
    from pathlib import Path

    from rollcli.errors import RollcliError
    from rollcli.plan import build_plan
    from rollcli.spec import load_spec

    golden = Path(__file__).resolve().parents[1] / "golden" / "plan"
    for name in ("sim", "verl"):
        plain = build_plan(load_spec(golden / f"{name}.yaml"))
        capped = build_plan(load_spec(golden / f"{name}.yaml", ["launch.memory_limit=48G"]))
        assert [j.id for j in capped.jobs] == [j.id for j in plain.jobs]
        for job in capped.jobs:
            expected = "48G" if job.type in ("train", "eval") else None
            assert dict(job.config.get("launch") or {}).get("memory_limit") == expected
        assert "memory_limit" not in load_spec(golden / f"{name}.yaml").to_dict()["launch"]
    with pytest.raises(RollcliError, match="memory_limit"):
        load_spec(golden / "sim.yaml", ["launch.memory_limit=lots"])
