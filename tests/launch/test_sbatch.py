"""Pure tests of the Slurm plan: arrays by wave and shape, chunking, parameters, golden scripts.

Golden files live in tests/golden/sbatch/; regenerate them with ROLLCLI_UPDATE_GOLDEN=1 after a
deliberate change (and read the diff). Paths contain quotes and spaces, as in submitit's tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rollcli.launch.api import Job, Resources
from rollcli.launch.sbatch import (
    group_into_arrays,
    job_waves,
    parse_sbatch_extra,
    parse_time_minutes,
    render_plan_scripts,
    render_sbatch,
    submitit_parameters,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sbatch"
RUN_DIR = Path('/shared/runs/it\'s a "quoted" run/sweep 1')
PYTHON = "/opt/rollcli venv/bin/python"

H200 = Resources(
    nodes=1,
    gpus_per_node=8,
    cpus_per_task=32,
    mem="512G",
    time="2-00:00:00",
    partition="h200",
    account="rl-team",
    qos="high",
    constraint="h200&ib",
    sbatch_extra=("--exclusive", "#SBATCH --reservation=rl week", "--mail-type END"),
)


def _jobs(n: int, kind: str = "train", res: Resources = Resources(), deps=None) -> list[Job]:
    return [
        Job(
            f"{kind}{i:04d}",
            kind,
            RUN_DIR / "jobs" / f"{kind}{i:04d}",
            tuple(deps[i]) if deps else (),
            res,
        )
        for i in range(n)
    ]


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    assert path.exists(), f"missing golden file {path}; create it with ROLLCLI_UPDATE_GOLDEN=1"
    assert text == path.read_text("utf-8"), f"{name} differs from its golden file"


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("30", 30),
        ("30:30", 31),
        ("48:00:00", 2880),
        ("2-00:00:00", 2880),
        ("1-12", 2160),
        ("0-00:10", 10),
        (None, 1440),
    ],
)
def test_parse_time_minutes(text, minutes):
    assert parse_time_minutes(text) == minutes


@pytest.mark.parametrize("bad", ["", "1h", "10:61:00:00", "0", "abc"])
def test_parse_time_rejects_non_slurm_times(bad):
    with pytest.raises(ValueError, match="launch.time"):
        parse_time_minutes(bad)


def test_parse_sbatch_extra_forms():
    assert parse_sbatch_extra(H200.sbatch_extra) == {
        "exclusive": True,
        "reservation": "rl week",
        "mail-type": "END",
    }
    with pytest.raises(ValueError, match="sbatch_extra"):
        parse_sbatch_extra(["exclusive"])


def test_twelve_jobs_of_one_shape_are_one_array_with_parallelism_4():
    groups = group_into_arrays(_jobs(12), array_parallelism=4)
    assert [(g.name, g.size, g.parallelism) for g in groups] == [("train-0", 12, 4)]


def test_waves_and_shapes_make_separate_arrays_with_dependencies():
    train = _jobs(4)
    big = _jobs(2, "train", H200)
    big = [Job(f"big{i}", "train", j.job_dir, (), H200) for i, j in enumerate(big)]
    evals = _jobs(4, "eval", deps=[[t.id] for t in train])
    report = [
        Job("report", "report", RUN_DIR / "jobs" / "report", tuple(j.id for j in train + evals))
    ]
    jobs = train + big + evals + report
    assert job_waves(jobs)["report"] == 2
    groups = group_into_arrays(jobs, array_parallelism=3)
    assert [(g.name, g.size, g.depends_on_groups) for g in groups] == [
        ("train-0", 4, ()),
        ("train-1", 2, ()),
        ("eval-0", 4, ("train-0",)),
        ("report-0", 1, ("eval-0", "train-0")),
    ]
    # parallelism bounds each wave as a whole: 3 shared by the two train arrays
    assert sum(g.parallelism for g in groups if g.wave == 0) <= 3 + 1


def test_dependency_cycle_is_an_error():
    a = Job("a", "train", RUN_DIR / "a", ("b",))
    b = Job("b", "train", RUN_DIR / "b", ("a",))
    with pytest.raises(ValueError, match="cycle"):
        group_into_arrays([a, b])


def test_1500_tasks_split_below_max_array_size():
    jobs = _jobs(1500)
    groups = group_into_arrays(jobs, max_array_size=1001, array_parallelism=64)
    assert [g.size for g in groups] == [750, 750]
    assert all(g.size <= 1001 for g in groups)
    assert sum(g.parallelism for g in groups) == 64
    assert [j.id for g in groups for j in g.jobs] == [j.id for j in jobs]  # nothing lost or doubled
    scripts = render_plan_scripts(
        jobs, run_dir=RUN_DIR, experiment="big", max_array_size=1001, array_parallelism=64,
        python=PYTHON,
    )  # fmt: skip
    arrays = [line for _, text in scripts for line in text.splitlines() if "--array" in line]
    assert arrays == ["#SBATCH --array=0-749%32", "#SBATCH --array=0-749%32"]
    # tiny MaxArraySize: many chunks, each at most that size, parallelism at least 1 each
    groups = group_into_arrays(jobs, max_array_size=7, array_parallelism=4)
    assert max(g.size for g in groups) <= 7 and sum(g.size for g in groups) == 1500
    assert min(g.parallelism for g in groups) >= 1


def test_parameters_carry_every_resource():
    group = group_into_arrays(_jobs(3, res=H200), array_parallelism=2)[0]
    params = submitit_parameters(group, run_dir=RUN_DIR, experiment="pc", dependency="afterany:7")
    assert params["time"] == 2880 and params["nodes"] == 1 and params["gpus_per_node"] == 8
    assert params["cpus_per_task"] == 32 and params["partition"] == "h200"
    assert params["account"] == "rl-team" and params["qos"] == "high"
    assert params["constraint"] == "h200&ib" and params["dependency"] == "afterany:7"
    assert params["additional_parameters"]["mem"] == "512G"
    assert params["additional_parameters"]["requeue"] is True
    assert params["array_parallelism"] == 2


def test_golden_train_array_h200():
    group = group_into_arrays(_jobs(12, res=H200), array_parallelism=4)[0]
    text = render_sbatch(group, run_dir=RUN_DIR, experiment="pc-vs-grpo", python=PYTHON)
    _check_golden("train_array_h200.sh", text)
    assert "#SBATCH --array=0-11%4" in text
    assert "#SBATCH --exclusive" in text and "#SBATCH --reservation='rl week'" in text


def test_golden_eval_array_with_dependency():
    train = _jobs(3)
    evals = _jobs(3, "eval", deps=[[t.id] for t in train])
    groups = group_into_arrays(train + evals)
    text = render_sbatch(groups[1], run_dir=RUN_DIR, experiment="quick", python=PYTHON)
    _check_golden("eval_array_dependency.sh", text)
    assert "#SBATCH --dependency=afterany:train-0" in text
    real = render_sbatch(
        groups[1],
        run_dir=RUN_DIR,
        experiment="quick",
        python=PYTHON,
        dependency_ids={"train-0": "4242"},
    )
    assert "#SBATCH --dependency=afterany:4242" in real


def test_golden_multinode_single_job():
    res = Resources(nodes=4, gpus_per_node=8, cpus_per_task=64, time="48:00:00", partition="h200")
    group = group_into_arrays(_jobs(1, res=res))[0]
    text = render_sbatch(group, run_dir=RUN_DIR, experiment="verl-2node", python=PYTHON)
    _check_golden("multinode_verl.sh", text)
    assert "--array" not in text  # a single job is not an array
    assert "#SBATCH --nodes=4" in text and "#SBATCH --ntasks-per-node=1" in text
    assert "ROLLCLI_RAY_PORT" in text  # the multinode template is included


def test_no_requeue_when_the_spec_says_so():
    group = group_into_arrays(_jobs(1, res=Resources(requeue=False)))[0]
    text = render_sbatch(group, run_dir=RUN_DIR, experiment="x", python=PYTHON)
    assert "#SBATCH --no-requeue" in text and "#SBATCH --requeue" not in text


def _setup_block(text: str) -> str:
    """The ``# setup`` block of a rendered script (what runs before srun)."""
    return text.split("# setup\n", 1)[1].split("\n# command", 1)[0]


def test_srun_gets_the_tasks_cpus():
    """Slurm 22.05-23.02 no longer passes sbatch's --cpus-per-task to srun: the setup block
    exports SRUN_CPUS_PER_TASK from it, so the task srun starts has all the CPUs Ray is told."""
    import subprocess

    group = group_into_arrays(_jobs(1, res=H200))[0]
    setup = _setup_block(render_sbatch(group, run_dir=RUN_DIR, experiment="x", python=PYTHON))
    probe = setup + '\necho "srun=${SRUN_CPUS_PER_TASK:-unset}"\n'
    env = {"PATH": "/usr/bin:/bin", "SLURM_CPUS_PER_TASK": "32"}
    out = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("srun=32")
    # outside a job with --cpus-per-task nothing is invented
    del env["SLURM_CPUS_PER_TASK"]
    out = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("srun=unset")
