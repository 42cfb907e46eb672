"""W&B: job trackers write offline run folders with namespaced keys and no link out of the job
folder; `auto` logs nothing without a login; the report run carries the speedup table, curves,
figures and files (read back from the .wandb file W&B writes); reports are built offline and saved
with only the network save mocked."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rollcli.analysis import analyze_run
from rollcli.analysis.tracking import (
    NullTracker,
    WandbTracker,
    create_tracker,
    is_logged_in,
    resolve_mode,
    wandb_run_id,
)
from rollcli.analysis.wandb_report import build_wandb_report, publish_wandb_report
from rollcli.cli.app import app
from rollcli.store.atomic import atomic_write_json, read_json, read_jsonl

# wandb-workspaces still uses pydantic v1-style validators
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """No API key, no netrc, every W&B folder inside tmp."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NETRC", str(home / ".netrc"))
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_ENTITY", "WANDB_BASE_URL", "WANDB_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        path = tmp_path / var.lower()
        path.mkdir()
        monkeypatch.setenv(var, str(path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    return home


def _job_config(job_id: str, mode: str) -> dict:
    return {
        "experiment": "synthetic",
        "job": {"id": job_id, "type": "train", "allocator": "pc", "seed": 1},
        "backend": {"kind": "sim"},
        "allocator": {"kind": "pilot_commit", "n_pilot": 8},
        "budget": {"steps": 40, "rollouts_per_step": 64},
        "tracking": {"wandb": {"project": "rollcli-test", "mode": mode, "tags": ["ci"]}},
    }


def test_mode_resolution(wandb_env, monkeypatch):
    from rollcli.analysis import tracking

    monkeypatch.setattr(tracking, "can_reach_wandb", lambda: True)
    assert not is_logged_in()
    assert resolve_mode("auto") == "disabled"  # issue 28: not offline files nobody asked for
    assert resolve_mode("offline") == "offline"
    assert resolve_mode("disabled") == "disabled"
    (wandb_env / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password x\n")
    (wandb_env / ".netrc").chmod(0o600)
    assert resolve_mode("auto") == "online"
    (wandb_env / ".netrc").unlink()
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_mode(None) == "online"
    with pytest.raises(ValueError, match="tracking.wandb.mode"):
        resolve_mode("sometimes")


def test_auto_logs_nothing_with_a_login_but_no_network(wandb_env, monkeypatch):
    """A compute node without internet: an online run would retry for minutes, then fail."""
    from rollcli.analysis import tracking

    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens on port 443
    assert not tracking.can_reach_wandb(timeout_s=1.0)
    assert resolve_mode("auto") == "disabled"
    assert resolve_mode("online") == "online"  # an explicit mode is the user's choice


def test_run_id_is_deterministic():
    assert wandb_run_id("3f2a9c1b7d", "exp") == wandb_run_id("3f2a9c1b7d", "exp")
    assert wandb_run_id("3f2a9c1b7d", "exp") != wandb_run_id("3f2a9c1b7e", "exp")
    assert len(wandb_run_id("x", "e")) == 16 and wandb_run_id("x", "e").isalnum()


def test_experiments_sharing_a_job_get_a_run_each(tmp_path, wandb_env, monkeypatch):
    """Job ids leave the experiment out: a GRPO baseline shared by two experiments has one job
    id. Each experiment's tracker must open its own W&B run, not resume the other's."""
    import rollcli.analysis.tracking as tracking

    opened = []

    class FakeRun:
        step = 0

        def define_metric(self, *args, **kwargs):
            return None

    def fake_init(wandb, mode, kwargs):
        opened.append(kwargs)
        return FakeRun()

    monkeypatch.setattr(tracking, "_init", fake_init)
    for experiment in ("pc-vs-grpo", "vigor-vs-grpo"):
        config = {**_job_config("grpo0000001", "offline"), "experiment": experiment}
        create_tracker(config, tmp_path / experiment / "job")
    first, second = opened
    assert first["group"] == "pc-vs-grpo" and second["group"] == "vigor-vs-grpo"
    assert first["id"] != second["id"]
    # and a resumed job (same experiment, same job) continues its own run
    again = create_tracker(
        {**_job_config("grpo0000001", "offline"), "experiment": "pc-vs-grpo"}, tmp_path / "again"
    )
    assert again is not None and opened[2]["id"] == first["id"]


@pytest.mark.parametrize("mode", ["disabled", "auto"])
def test_disabled_tracker_writes_nothing(tmp_path, wandb_env, mode):
    """`auto` without a login logs nothing at all (issue 28: it wrote offline runs, ~1.2 s CPU
    a job, into every job folder)."""
    tracker = create_tracker(_job_config("job0000001", mode), tmp_path / "job")
    assert isinstance(tracker, NullTracker)
    tracker({"step": 1, "cum_rollouts": 64})
    tracker.finish()
    assert not (tmp_path / "job").exists()


def test_every_row_key_lands_in_a_section(synthetic_run):
    """No flat key reaches W&B: each metrics-row key maps to a named section (issue 28: ~25
    keys landed in one flat section)."""
    from rollcli.analysis.tracking import wandb_key
    from rollcli.train.rows import initial_row

    rows = read_jsonl(synthetic_run / "jobs" / "pc01abcdef" / "metrics.jsonl")
    contract = {"cum_rollouts", "cum_tokens", "step_rollouts", "step_tokens", "wall_s",
                "cum_rollouts_trained", "reward_mean", "reward_var", "gen_reward_var",
                "zero_var_frac", "prompts_trained", "rollouts_trained", "evicted", "deferred",
                "epoch", "policy_version", "rollouts_skipped", "groups_informative",
                *initial_row(0)}  # fmt: skip
    for part in ("informative", "zero_var", "decision", "held"):
        contract |= {f"rollouts_{part}", f"tokens_{part}"}
    keys = contract | {k for row in rows for k in row} - {"step"}
    sections = {"rollouts", "tokens", "reward", "pool", "time", "eval", "alloc", "train"}
    for key in keys - {"step"}:
        assert wandb_key(key).split("/")[0] in sections, key
    assert wandb_key("cum_rollouts") == "rollouts/cumulative"
    assert wandb_key("rollouts_decision") == "rollouts/decision"
    assert wandb_key("zero_var_frac") == "reward/zero_var_frac"
    assert wandb_key("eval/accuracy") == "eval/accuracy"
    assert wandb_key("something_new") == "other/something_new"
    assert len({wandb_key(k) for k in keys}) == len(keys)  # no two keys collide


@pytest.mark.slow
def test_offline_run_folder_has_the_expected_keys(
    synthetic_run, tmp_path, wandb_env, read_wandb_log
):
    rows = read_jsonl(synthetic_run / "jobs" / "pc01abcdef" / "metrics.jsonl")
    job_dir = tmp_path / "job"
    config = _job_config("pc01abcdef", "offline")
    for _ in range(2):  # a resumed job logs into the same run id
        tracker = create_tracker(config, job_dir)
        assert isinstance(tracker, WandbTracker) and tracker.mode == "offline"
        for row in rows:
            tracker(row)
        tracker.finish()
    run_id = wandb_run_id("pc01abcdef", "synthetic")
    folders = sorted((job_dir / "wandb").glob("offline-run-*"))
    # same run id; a second folder started within the same second gets a "-1" suffix
    assert len(folders) == 2 and all(f"-{run_id}" in f.name for f in folders)

    records = list(read_wandb_log(folders[0] / f"run-{run_id}.wandb"))
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert run.run_id == run_id
    assert run.run_group == "synthetic" and run.job_type == "train"
    assert run.project == "rollcli-test" and run.display_name == "pc-seed1"
    assert list(run.tags) == ["ci"]
    logged_config = {
        item.key or "/".join(item.nested_key): json.loads(item.value_json)
        for item in run.config.update
    }
    assert logged_config["job"]["id"] == "pc01abcdef"
    assert logged_config["allocator"] == {"kind": "pilot_commit", "n_pilot": 8}
    history = [
        {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in r.history.item
        }
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    assert [h["_step"] for h in history] == [row["step"] for row in rows]
    named = {"rollouts/cumulative", "tokens/cumulative", "reward/var_trained"}
    assert named | {"reward/zero_var_frac", "time/step_s"} <= set(history[5])
    assert history[5]["rollouts/cumulative"] == rows[5]["cum_rollouts"]
    assert all("/" in key for h in history for key in h if not key.startswith("_"))
    assert history[5]["eval/accuracy"] == pytest.approx(rows[5]["eval/accuracy"])
    metrics = {
        r.metric.glob_name or r.metric.name: r.metric
        for r in records
        if r.WhichOneof("record_type") == "metric"
    }
    assert metrics["eval/*"].step_metric == "rollouts/cumulative"
    # issue 28: logs/debug-core.log linked to ~/.cache; nothing links out of the job folder
    assert not [p for p in job_dir.rglob("*") if p.is_symlink()]
    assert (folders[0] / "logs" / "debug-core.log").is_file()


def _enable_wandb(run_dir, **settings):
    manifest = read_json(run_dir / "manifest.json")
    manifest["spec"]["tracking"]["wandb"].update(settings)
    atomic_write_json(run_dir / "manifest.json", manifest)


def test_report_is_built_offline(synthetic_run):
    import wandb_workspaces.reports.v2 as wr

    report = build_wandb_report(analyze_run(synthetic_run), entity="team", project="proj")
    markdown = next(b for b in report.blocks if isinstance(b, wr.MarkdownBlock))
    assert "| pc | pilot_commit | 3 | 3/3 | 2.05k | 1.25x (1.25, 1.25, 1.25) |" in markdown.text
    results, grid = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    assert grid.runsets[0].groupby == ["config.job.allocator"]
    assert "Group = 'synthetic'" in str(grid.runsets[0].filters)
    plots = {(p.x, p.y[0]) for p in grid.panels}
    assert ("rollouts/cumulative", "eval/accuracy") in plots
    assert ("Step", "reward/var_trained") in plots
    # no band of W&B's own (min-max, stddev): the bootstrap band is the report run's figure
    assert {p.groupby_rangefunc for p in grid.panels} == {"none"}
    assert "JobType = 'report'" in str(results.runsets[0].filters)
    assert any(getattr(p, "media_keys", None) == ["figures/accuracy"] for p in results.panels)


def test_offline_report_says_how_to_sync(synthetic_run, wandb_env):
    _enable_wandb(synthetic_run, mode="auto")
    pending = synthetic_run / "jobs" / "pc00abcdef" / "wandb" / "offline-run-20261129_000000-abc"
    pending.mkdir(parents=True)
    result = publish_wandb_report(analyze_run(synthetic_run))
    assert result.url is None
    text = " ".join(result.messages)
    assert "wandb login" in text and f"wandb sync {pending}" in text

    runner = CliRunner()
    out = runner.invoke(app, ["report", str(synthetic_run), "--no-plots", "--wandb"])
    assert out.exit_code == 0, out.output
    assert "wandb sync" in out.output


def test_report_without_login_or_logged_runs_says_auto_logged_nothing(synthetic_run, wandb_env):
    _enable_wandb(synthetic_run, mode="auto")
    result = publish_wandb_report(analyze_run(synthetic_run))
    assert result.url is None
    (message,) = result.messages
    assert message.startswith("No W&B run was logged: tracking.wandb.mode auto logs only")
    assert "wandb login" in message and "tracking.wandb.mode: offline" in message


def test_logged_in_report_is_saved_and_its_url_printed(synthetic_run, wandb_env, monkeypatch):
    import wandb_workspaces.reports.v2 as wr

    _enable_wandb(synthetic_run, mode="online", entity="team", project="proj")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    saved = []

    def fake_save(self, draft=False, clone=False):  # the only network call
        saved.append(self)
        self.id = "Vmlldzo1"
        return self

    monkeypatch.setattr(wr.Report, "save", fake_save)
    result = publish_wandb_report(analyze_run(synthetic_run))
    assert len(saved) == 1 and saved[0].entity == "team" and saved[0].project == "proj"
    # the host is wandb's own mapping of its API URL to its app URL
    assert result.url.startswith("https://")
    assert result.url.endswith("/team/proj/reports/rollcli:-synthetic--Vmlldzo1")
    monkeypatch.setenv("WANDB_BASE_URL", "https://api.wandb.example.org")
    result = publish_wandb_report(analyze_run(synthetic_run))
    assert result.url == "https://wandb.example.org/team/proj/reports/rollcli:-synthetic--Vmlldzo1"


def _under(flat: dict, prefix: str) -> dict:
    """The fields of one logged value (a table, an image): W&B records them as prefix/field."""
    return {k[len(prefix) + 1 :]: v for k, v in flat.items() if k.startswith(prefix + "/")}


@pytest.mark.slow
def test_report_run_carries_the_results(synthetic_run, tmp_path, wandb_env, read_wandb_log):
    """Issue 28: only raw rows reached W&B. The report run holds the speedup table, the curves
    with the figure's band, the figures and report.json as an artifact (read back from the
    offline run's .wandb file and the files W&B writes next to it)."""
    import threading

    from rollcli.analysis import write_report
    from rollcli.analysis.report import results_table
    from rollcli.analysis.wandb_results import curve_table, report_run_id
    from rollcli.jobs import report as report_job
    from rollcli.store.folders import JobFolder

    _enable_wandb(synthetic_run, mode="offline", project="rollcli-test")
    job_dir = synthetic_run / "jobs" / "report0001"
    report_job.run(JobFolder(job_dir), None, threading.Event())  # the plan's report job
    result = write_report(synthetic_run, out=tmp_path / "report")  # the same files again
    (folder,) = (job_dir / "wandb").glob("offline-run-*")
    run_id = report_run_id("synthetic")
    records = list(read_wandb_log(folder / f"run-{run_id}.wandb"))
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.run_group, run.job_type, run.display_name) == ("synthetic", "report", "report")
    (history,) = [
        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    columns, rows = results_table(result.analysis)
    table = _under(history, "results/speedups")
    assert table["_type"] == "table-file" and table["ncols"] == len(columns)
    written = json.loads((folder / "files" / table["path"]).read_text())
    assert written["columns"] == columns
    names = [r[0] for r in written["data"]]
    assert names == [r[0] for r in rows] and names[:2] == ["grpo", "pc"]
    speedup = written["data"][1][columns.index("rollouts_speedup")]
    assert speedup == pytest.approx(1.25)
    curves = _under(history, "results/accuracy_curves")
    curve_columns, curve_rows = curve_table(result.analysis)
    assert curves["nrows"] == len(curve_rows) and curve_columns[-2:] == ["band_low", "band_high"]
    pngs = {p.stem for p in result.files if p.suffix == ".png"}
    assert "accuracy" in pngs
    for stem in pngs:
        image = _under(history, f"figures/{stem}")
        assert image["_type"] == "image-file" and (folder / "files" / image["path"]).is_file()
    summary = {
        i.key or "/".join(i.nested_key): json.loads(i.value_json)
        for r in records
        if r.WhichOneof("record_type") == "summary"
        for i in r.summary.update
    }
    assert summary["speedup/pc"] == pytest.approx(1.25)
    artifacts = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
    (artifact,) = [a for a in artifacts if a.name == "report-synthetic"]
    assert artifact.type == "report"
    contents = {e.path for e in artifact.manifest.contents}
    assert {"report.json", "report.csv", "accuracy.pdf"} <= contents
    assert not [p for p in job_dir.rglob("*") if p.is_symlink()]


def test_report_run_logs_nothing_when_tracking_is_off(synthetic_run, tmp_path, wandb_env):
    from rollcli.analysis.wandb_results import log_report_run

    for mode in ("disabled", "auto"):  # auto: no login here
        _enable_wandb(synthetic_run, mode=mode)
        assert log_report_run(analyze_run(synthetic_run), [], tmp_path / "job") is None
    assert not (tmp_path / "job").exists()


def test_keep_inside_copies_file_links_and_never_walks_out(tmp_path):
    """A link to a file outside becomes a copy; a link to a folder outside is dropped without
    touching what it points to."""
    from rollcli.analysis.tracking import keep_inside

    outside = tmp_path / "cache"
    (outside / "logs").mkdir(parents=True)
    (outside / "core-debug.log").write_text("core log\n")
    (outside / "logs" / "other.log").symlink_to(outside / "core-debug.log")
    run = tmp_path / "job" / "wandb" / "offline-run-1" / "logs"
    run.mkdir(parents=True)
    (run / "debug-core.log").symlink_to(outside / "core-debug.log")
    (run / "gone.log").symlink_to(outside / "missing.log")
    (tmp_path / "job" / "wandb" / "cache-link").symlink_to(outside)
    keep_inside(tmp_path / "job" / "wandb")
    assert not [p for p in (tmp_path / "job").rglob("*") if p.is_symlink()]
    assert (run / "debug-core.log").read_text() == "core log\n"
    assert not (run / "gone.log").exists()
    assert (outside / "logs" / "other.log").is_symlink()  # outside: left as it was


@pytest.mark.slow
def test_sweep_report_run_carries_the_ablation(tmp_path, wandb_env, read_wandb_log):
    """A sweep's report job logs its ablation table (the rows of ablation.csv, numbers as
    numbers) and files to the sweep's report run."""
    from rollcli.analysis.ablation import write_ablation
    from rollcli.analysis.wandb_results import log_sweep_report_run, report_run_id
    from tests.analysis.test_analysis_ablation import _ablation

    run_dir = tmp_path / "runs" / "pc-thresholds"
    spec = {"name": "pc-thresholds", "tracking": {"wandb": {"mode": "offline", "group": "g"}}}
    atomic_write_json(run_dir / "manifest.json", {"spec": spec, "plan": {"jobs": []}})
    files = write_ablation(_ablation(), run_dir / "report", plots=False)
    logged = log_sweep_report_run(run_dir, files, run_dir / "jobs" / "report0001")
    assert logged is not None and logged.run_id == report_run_id("pc-thresholds")
    (folder,) = logged.wandb_dir.glob("offline-run-*")
    records = list(read_wandb_log(folder / f"run-{logged.run_id}.wandb"))
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.run_group, run.job_type) == ("g", "report")
    (history,) = [
        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    table = _under(history, "results/ablation")
    written = json.loads((folder / "files" / table["path"]).read_text())
    assert written["columns"][:2] == ["point", "allocators.pc.p_upper"]
    speedups = [row[written["columns"].index("speedup")] for row in written["data"]]
    assert speedups == [1.3, 1.2, 0.6]
    artifacts = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
    (artifact,) = [a for a in artifacts if a.name == "report-pc-thresholds"]
    assert {"ablation.csv", "ablation.json"} <= {e.path for e in artifact.manifest.contents}
