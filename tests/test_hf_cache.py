"""The Hugging Face cache of a run: which hub models a spec needs, whether the cache holds
them (read by huggingface_hub itself from a fake cache in the hub's layout), ``rollcli data
prefetch`` filling it from a fake hub, offline mode for compute nodes, and the verl job's
one-line failure when an offline node lacks the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rollcli.hf_cache import (
    hub_cache_dir,
    hub_models,
    missing_models,
    offline_environment,
)

FAKE_HUB = {  # repo -> files the fake hub serves
    "Org/Model-1.5B": {"config.json": "{}", "model.safetensors": "w", "tokenizer.json": "{}"},
    "Org/Tok": {"tokenizer_config.json": "{}", "tokenizer.json": "{}"},
}


def fake_snapshot_download(repo_id, *, cache_dir, allow_patterns=None, **_):
    """What huggingface_hub.snapshot_download leaves in a cache: refs/main names a snapshot."""
    if repo_id not in FAKE_HUB:
        raise FileNotFoundError(f"404: {repo_id}")
    repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs/main").write_text("a" * 40)
    for name, text in FAKE_HUB[repo_id].items():
        (snapshot / name).write_text(text)
    return str(snapshot)


def test_hub_models_skips_local_folders_and_the_tiny_model(tmp_path):
    local = tmp_path / "my-model"
    local.mkdir()
    assert hub_models({"model": "Org/Model-1.5B", "tokenizer": "Org/Tok"}) == [
        "Org/Model-1.5B",
        "Org/Tok",
    ]
    assert hub_models({"model": "Org/Model-1.5B", "tokenizer": "Org/Model-1.5B"}) == [
        "Org/Model-1.5B"
    ]
    assert hub_models({"model": str(local)}) == []
    assert hub_models({"model": "tiny"}) == []


def test_cache_dir_follows_huggingface_hubs_order(tmp_path):
    assert hub_cache_dir({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert hub_cache_dir({"HF_HOME": "/h"}) == Path("/h/hub")
    assert hub_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")


def test_offline_environment_respects_the_users_choice():
    assert offline_environment({}) == {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    assert offline_environment({"HF_HUB_OFFLINE": "0"}) == {}  # compute nodes with internet
    assert "HF_HUB_OFFLINE" not in offline_environment({"HF_HUB_OFFLINE": "1"})


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "prefetch-me",
                "backend": {"kind": "verl", "model": "Org/Model-1.5B", "tokenizer": "Org/Tok"},
                "budget": {"steps": 2, "rollouts_per_step": 8},
                "allocators": {"grpo": {"kind": "uniform", "n": 8}},
            }
        )
    )
    return path


def test_prefetch_fills_the_cache_from_a_fake_hub(cli, spec_file, tmp_path, monkeypatch):
    import huggingface_hub

    cache = tmp_path / "shared/hf/hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    calls = []

    def download(repo_id, **kwargs):
        calls.append(repo_id)
        return fake_snapshot_download(repo_id, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    assert missing_models(["Org/Model-1.5B", "Org/Tok"], cache) == ["Org/Model-1.5B", "Org/Tok"]
    result = cli(["data", "prefetch", spec_file])
    assert result.exit_code == 0, result.output
    assert "Org/Model-1.5B: in" in result.stdout and "Org/Tok: in" in result.stdout
    assert missing_models(["Org/Model-1.5B", "Org/Tok"], cache) == []
    again = cli(["data", "prefetch", spec_file])  # cached: nothing is downloaded again
    assert again.exit_code == 0 and calls == ["Org/Model-1.5B", "Org/Tok"]


def test_verl_job_on_an_offline_node_without_the_model_fails_in_one_line(tmp_path, monkeypatch):
    from rollcli.backends.verl import runner
    from rollcli.errors import RollcliError

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(runner, "prepare_inputs", lambda *a, **k: pytest.fail("started"))
    job = {"backend": {"kind": "verl", "model": "Org/Model-1.5B", "device": "cpu"}}
    with pytest.raises(RollcliError, match="Org/Model-1.5B is not in the Hugging Face cache"):
        runner.run_train_job(tmp_path, job=job)
    fake_snapshot_download("Org/Model-1.5B", cache_dir=tmp_path / "empty")
    runner.preflight_models(job)  # cached now: no error
