"""One run folder per variant (issue 16): `rollcli run spec budget.steps=50` wrote into the same
runs/<name>, overwrote its spec.yaml and report/, and status/report showed only the last one."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rollcli.store.variants import spec_differences

SPEC = Path(__file__).resolve().parents[2] / "rollcli" / "templates" / "specs" / "quickstart.yaml"
BASE = ["budget.steps=3", "seeds=[0]", "eval.every=3", "~allocators.dapo", "~allocators.vigor"]


def test_spec_differences_name_the_result_keys():
    old = {"name": "q", "budget": {"steps": 150, "rollouts_per_step": 64}, "launch": {"x": 1}}
    new = {"name": "q", "budget": {"steps": 50, "rollouts_per_step": 64}, "launch": {"x": 2}}
    assert spec_differences(old, new) == ["budget.steps: 150 -> 50"]  # launch is no variant


def test_a_variant_gets_its_own_folder_and_reuses_finished_jobs(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = cli(["run", SPEC, *BASE, "--runs-dir", tmp_path])
    assert first.exit_code == 0, first.output
    base = tmp_path / "quickstart"
    spec_before = (base / "spec.yaml").read_text()
    grpo = next(
        j
        for j in json.loads((base / "manifest.json").read_text())["plan"]["jobs"]
        if j["allocator"] == "grpo"
    )
    # only Pilot-Commit changes: GRPO's finished job is the same job (same content hash)
    second = cli(["run", SPEC, *BASE, "allocators.pc.n_commit=4", "--runs-dir", tmp_path])
    assert second.exit_code == 0, second.output
    (variant,) = [p for p in tmp_path.glob("quickstart-*") if p.is_dir()]
    assert "holds another variant of this experiment (allocators.pc.n_commit: 12 -> 4)" in (
        second.stdout
    )
    assert f"this run goes to {variant}; 1 finished jobs copied from it" in second.stdout
    assert "1 already done" in second.stdout  # GRPO not run again
    assert (base / "spec.yaml").read_text() == spec_before  # the first folder is untouched
    assert yaml.safe_load((variant / "spec.yaml").read_text())["allocators"]["pc"]["n_commit"] == 4
    assert (variant / "jobs" / grpo["id"] / "metrics.jsonl").is_file()
    # the same variant again: the same folder, everything done
    again = cli(["run", SPEC, *BASE, "allocators.pc.n_commit=4", "--runs-dir", tmp_path])
    assert again.exit_code == 0 and f"this run goes to {variant}" in again.stdout
    assert "3 already done" in again.stdout
    # a launch-only change is no variant
    local = cli(["run", SPEC, *BASE, "launch.max_parallel=1", "--runs-dir", tmp_path])
    assert local.exit_code == 0 and "another variant" not in local.stdout
    # status of the first folder lists the variant with a command that works
    status = cli(["status", base])
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("variant: "))
    assert "allocators.pc.n_commit: 12 -> 4" in line
    command = line.rsplit(": rollcli ", 1)[1].split()
    assert cli(command).exit_code == 0
    # and both compare in one report: GRPO's shared job counted once
    both = cli(["report", base, variant, "--json", "--no-plots"])
    assert both.exit_code == 0, both.output
    order = json.loads(both.stdout)["order"]
    assert order[0] == "grpo" and len(order) == 3 and all(n.endswith("pc") for n in order[1:])
